//! Concurrency stage: `max_in_flight` per route, per tool or per group of tools, checked after
//! the rate limits on the claimed headers, so that one slow tool cannot take a pool's capacity
//! from the others; and each pool's own limit (`pools.<name>.concurrency`, [`pool`]), adaptive
//! ([`adaptive`]: found from the pool's latency) or fixed, taken once the pool is final and the
//! body says whether the request starts a call or continues one. A request over a limit waits for a slot if the limit has a `queue` (bounded
//! in count and time) and is otherwise answered 503 + `Retry-After` + -31007 at once.
//!
//! A slot is a semaphore permit held by the request until it is finished (dropped with its
//! [`Held`]), whatever way it ends. Counts are per replica. With `per: name`, each name gets its
//! own count up to `max_keys` names; further names share one overflow count (stricter, never
//! looser, and memory stays bounded).

pub(crate) mod adaptive;
pub(crate) mod pool;
pub(crate) mod pools;

pub(crate) use crate::gateway::concurrency::telemetry::ConcurrencyMetrics;

use prometheus::IntGauge;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::concurrency::ConcurrencyKey;
use crate::config::ConcurrencyLimitConfig;
use crate::config::Pattern;
use crate::mcp::{codes, Rejection};

/// One count: its slots and how many wait for one.
struct Slot {
    sem: Arc<Semaphore>,
    waiting: AtomicUsize,
}

impl Slot {
    fn new(n: u32) -> Arc<Slot> {
        Arc::new(Slot {
            sem: Arc::new(Semaphore::new(n as usize)),
            waiting: AtomicUsize::new(0),
        })
    }
}

/// One configured concurrency limit.
pub struct ConcurrencyLimit {
    pub config: ConcurrencyLimitConfig,
    shared: Arc<Slot>,
    names: Mutex<HashMap<String, Arc<Slot>>>,
    overflow: Arc<Slot>,
    gauge: IntGauge,
    waiting: IntGauge,
}

/// What a limit looks at: the request's route and claims.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConcurrencyInput<'a> {
    pub route: &'a str,
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// The slots a request holds: of the limits covering it, and of its pool's; released when
/// dropped.
#[derive(Default)]
pub struct Held(
    Vec<(OwnedSemaphorePermit, IntGauge)>,
    pub(crate) Option<pool::PoolPermit>,
);

impl Drop for Held {
    fn drop(&mut self) {
        for (_, g) in &self.0 {
            g.dec();
        }
    }
}

/// A refusal: which limit, and the `Retry-After` to send.
#[derive(Debug, Clone)]
pub(crate) struct Shed {
    pub limit: String,
    pub max_in_flight: u32,
    pub retry_after: Duration,
    /// The request waited in the queue until its timeout.
    pub timed_out: bool,
}

impl ConcurrencyLimit {
    pub(crate) fn new(config: &ConcurrencyLimitConfig, metrics: &ConcurrencyMetrics) -> Self {
        ConcurrencyLimit {
            shared: Slot::new(config.max_in_flight),
            names: Mutex::new(HashMap::new()),
            overflow: Slot::new(config.max_in_flight),
            gauge: metrics.in_flight.with_label_values(&[&config.name]),
            waiting: metrics.waiting.with_label_values(&[&config.name]),
            config: config.clone(),
        }
    }

    pub(crate) fn applies(&self, i: &ConcurrencyInput) -> bool {
        let pat = |p: &Option<Pattern>, v: Option<&str>| match (p, v) {
            (None, _) => true,
            (Some(p), Some(v)) => p.matches(v),
            (Some(_), None) => false,
        };
        let m = &self.config.matcher;
        m.route.as_deref().is_none_or(|r| r == i.route)
            && pat(&m.method, i.method)
            && pat(&m.name, i.name)
    }

    fn slot(&self, name: Option<&str>) -> Arc<Slot> {
        let (ConcurrencyKey::Name, Some(name)) = (self.config.per, name) else {
            return self.shared.clone();
        };
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = names.get(name) {
            return s.clone();
        }
        if names.len() >= self.config.max_keys {
            return self.overflow.clone();
        }
        let s = Slot::new(self.config.max_in_flight);
        names.insert(name.to_owned(), s.clone());
        s
    }

    #[cfg(test)]
    /// Requests holding a slot of this limit (every count together).
    pub(crate) fn in_flight(&self) -> i64 {
        self.gauge.get()
    }

    fn shed(&self, timed_out: bool) -> Shed {
        Shed {
            limit: self.config.name.clone(),
            max_in_flight: self.config.max_in_flight,
            retry_after: self.config.retry_after,
            timed_out,
        }
    }

    /// Take a slot: at once, after a bounded wait, or not (`Err`). `Ok(true)`: it waited.
    async fn acquire(
        &self,
        i: &ConcurrencyInput<'_>,
    ) -> Result<(OwnedSemaphorePermit, bool), Shed> {
        let slot = self.slot(i.name);
        if let Ok(p) = slot.sem.clone().try_acquire_owned() {
            return Ok((p, false));
        }
        let Some(q) = &self.config.queue else {
            return Err(self.shed(false));
        };
        if slot.waiting.fetch_add(1, Ordering::AcqRel) >= q.max_waiting {
            slot.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(self.shed(false));
        }
        self.waiting.inc();
        let got = tokio::time::timeout(q.timeout, slot.sem.clone().acquire_owned()).await;
        self.waiting.dec();
        slot.waiting.fetch_sub(1, Ordering::AcqRel);
        match got {
            Ok(Ok(p)) => Ok((p, true)),
            // The semaphore is never closed; a timeout is the only way here.
            _ => Err(self.shed(true)),
        }
    }
}

/// Take a slot of every limit that covers the request, in order, counting each decision. On a
/// refusal the slots already taken are given back.
pub(crate) async fn admit(
    limits: &[Arc<ConcurrencyLimit>],
    metrics: &ConcurrencyMetrics,
    input: &ConcurrencyInput<'_>,
) -> Result<Held, Shed> {
    let mut held = Held::default();
    for l in limits {
        if !l.applies(input) {
            continue;
        }
        match l.acquire(input).await {
            Ok((permit, waited)) => {
                let decision = if waited { "queued" } else { "admitted" };
                metrics
                    .decisions
                    .with_label_values(&[&l.config.name, decision])
                    .inc();
                l.gauge.inc();
                held.0.push((permit, l.gauge.clone()));
            }
            Err(shed) => {
                metrics
                    .decisions
                    .with_label_values(&[&l.config.name, "shed"])
                    .inc();
                return Err(shed);
            }
        }
    }
    Ok(held)
}

/// The 503 answer for a shed request, and its `Retry-After` value.
pub(crate) fn refusal(shed: &Shed) -> (Rejection, String) {
    let secs = crate::gateway::rate_limits::stages::retry_after_secs(shed.retry_after);
    let waited = if shed.timed_out {
        " (waited in its queue until the timeout)"
    } else {
        ""
    };
    let rej = Rejection::new(
        503,
        codes::GATEWAY_OVERLOADED,
        "concurrency-limited",
        format!(
            "Concurrency limit {:?} reached: {} requests in flight{waited}; retry after {secs} s",
            shed.limit, shed.max_in_flight
        ),
    )
    .with_data(serde_json::json!({
        "limit": shed.limit,
        "maxInFlight": shed.max_in_flight,
        "retryAfterSeconds": secs,
    }));
    (rej, secs.to_string())
}

/// Build the limits of a config, keeping the counts of every limit whose settings did not change
/// (requests in flight across a reload keep their slots).
pub(crate) fn build(
    configs: &[ConcurrencyLimitConfig],
    previous: &[Arc<ConcurrencyLimit>],
    metrics: &ConcurrencyMetrics,
) -> Vec<Arc<ConcurrencyLimit>> {
    configs
        .iter()
        .map(|c| {
            previous
                .iter()
                .find(|p| &p.config == c)
                .cloned()
                .unwrap_or_else(|| Arc::new(ConcurrencyLimit::new(c, metrics)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use prometheus::Registry;

    fn limits(yaml: &str) -> (Vec<Arc<ConcurrencyLimit>>, ConcurrencyMetrics) {
        let cfg = Config::parse(
            &format!("pools:\n  d: {{instances: [127.0.0.1:1]}}\nconcurrency_limits:\n{yaml}"),
            "t",
        )
        .unwrap();
        let m = ConcurrencyMetrics::register(&Registry::new()).unwrap();
        (build(&cfg.concurrency_limits, &[], &m), m)
    }

    fn input(name: &str) -> ConcurrencyInput<'_> {
        ConcurrencyInput {
            route: "default",
            method: Some("tools/call"),
            name: Some(name),
        }
    }

    #[tokio::test]
    async fn a_full_limit_sheds_and_frees_on_drop() {
        let (ls, m) = limits("  - {name: slow, match: {name: deploy}, max_in_flight: 2}\n");
        let a = admit(&ls, &m, &input("deploy")).await.unwrap();
        let _b = admit(&ls, &m, &input("deploy")).await.unwrap();
        let shed = admit(&ls, &m, &input("deploy")).await.err().unwrap();
        assert_eq!((shed.limit.as_str(), shed.timed_out), ("slow", false));
        // Other tools are not covered.
        assert!(admit(&ls, &m, &input("echo")).await.unwrap().0.is_empty());
        assert_eq!(ls[0].in_flight(), 2);
        drop(a);
        assert_eq!(ls[0].in_flight(), 1);
        assert!(admit(&ls, &m, &input("deploy")).await.is_ok());
        let d = |x: &str| m.decisions.with_label_values(&["slow", x]).get();
        assert_eq!((d("admitted"), d("shed")), (3, 1));
        let (rej, retry) = refusal(&shed);
        assert_eq!((rej.status, rej.code, retry.as_str()), (503, -31007, "1"));
    }

    #[tokio::test]
    async fn per_name_counts_apart_and_overflow_is_shared() {
        let (ls, m) = limits("  - {name: each, max_in_flight: 1, per: name, max_keys: 2}\n");
        let _a = admit(&ls, &m, &input("a")).await.unwrap();
        let _b = admit(&ls, &m, &input("b")).await.unwrap();
        assert!(admit(&ls, &m, &input("a")).await.is_err());
        // Names past max_keys share one count.
        let _c = admit(&ls, &m, &input("c")).await.unwrap();
        assert!(admit(&ls, &m, &input("d")).await.is_err());
    }

    #[tokio::test]
    async fn the_queue_waits_bounded_in_count_and_time() {
        let (ls, m) =
            limits("  - {name: q, max_in_flight: 1, queue: {max_waiting: 1, timeout: 2s}}\n");
        let first = admit(&ls, &m, &input("x")).await.unwrap();
        let ls2 = ls.clone();
        let m2 = m.clone();
        let waiter = tokio::spawn(async move { admit(&ls2, &m2, &input("x")).await.is_ok() });
        // Wait until the second request is queued, then a third finds the queue full.
        while ls[0].shared.waiting.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        assert!(admit(&ls, &m, &input("x")).await.is_err());
        drop(first);
        assert!(
            waiter.await.unwrap(),
            "the queued request got the freed slot"
        );
        assert_eq!(m.decisions.with_label_values(&["q", "queued"]).get(), 1);
        // With the slot held, a queued request times out.
        let (ls, m) =
            limits("  - {name: t, max_in_flight: 1, queue: {max_waiting: 1, timeout: 20ms}}\n");
        let _held = admit(&ls, &m, &input("x")).await.unwrap();
        let shed = admit(&ls, &m, &input("x")).await.err().unwrap();
        assert!(shed.timed_out);
    }
}
