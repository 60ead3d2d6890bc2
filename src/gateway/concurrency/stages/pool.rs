//! One pool's concurrency limit (`pools.<name>.concurrency`): how many requests may be in the
//! pool at once, adaptive ([`super::adaptive::Gradient`]) or fixed, with legs of calls already
//! started before new calls, and the 503 + `Retry-After` + -31018 of a shed request.
//!
//! Admission is two numbers read without a lock: the limit, and the share of it new calls may
//! take (`first_leg_share`, or `min` while the limit probes its best latency). A new call (a
//! first leg) over its share is shed at once; a leg of a call already started (an MRTR retry
//! leg, a `tasks/*` request) takes any slot under the whole limit, and when there is none waits
//! up to `priority_wait` for one (at most `limit` of them wait), so flows already started
//! finish under overload. The limit learns from each request's latency up to its response head
//! ([`PoolPermit::answered`]); a request holds its slot until it ends.
//!
//! Counts are per replica, as every concurrency limit's.

use prometheus::IntGauge;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

use super::adaptive::{Gradient, Settings};
use super::ConcurrencyMetrics;
use crate::config::adaptive::PoolConcurrency;
use crate::mcp::{codes, Rejection};

/// Which requests go first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leg {
    /// A new call: takes at most its share of the limit, never waits.
    First,
    /// A leg of a call already started (a retry leg, `tasks/*`): the whole limit, and a wait.
    Started,
}

impl Leg {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Leg::First => "first",
            Leg::Started => "started",
        }
    }
}

/// One pool's limit, or one tool's in a pool.
pub struct PoolLimit {
    pub(crate) pool: String,
    /// A tool's own limit (`concurrency.tools`): its name.
    pub(crate) tool: Option<String>,
    pub(crate) config: PoolConcurrency,
    in_flight: AtomicU32,
    limit: AtomicU32,
    first_leg: AtomicU32,
    /// `None`: a fixed limit.
    gradient: Option<Mutex<Gradient>>,
    freed: Notify,
    waiting: AtomicUsize,
    gauges: [IntGauge; 2],
    metrics: ConcurrencyMetrics,
}

/// A slot in the pool; given back when dropped.
pub struct PoolPermit {
    limit: Arc<PoolLimit>,
    admitted_at: u32,
    since: Instant,
    answered: bool,
}

/// Why a request was shed, for its answer.
#[derive(Debug, Clone)]
pub(crate) struct PoolShed {
    pub pool: String,
    pub tool: Option<String>,
    pub limit: u32,
    pub in_flight: u32,
    pub leg: Leg,
    pub retry_after: Duration,
}

impl PoolLimit {
    /// The metrics label of a pool's limit (`pool`) or a tool's (`pool/tool`).
    pub(crate) fn label(pool: &str, tool: Option<&str>) -> String {
        match tool {
            Some(t) => format!("{pool}/{t}"),
            None => pool.to_string(),
        }
    }

    pub(crate) fn new(
        pool: &str,
        tool: Option<&str>,
        c: &PoolConcurrency,
        metrics: &ConcurrencyMetrics,
    ) -> Self {
        let label = Self::label(pool, tool);
        let gradient = c.adaptive.then(|| {
            let s = Settings {
                min: c.min,
                max: c.max,
                tolerance: c.tolerance,
                window: c.window,
                min_rtt_window: c.min_rtt_window,
            };
            Mutex::new(Gradient::new(s, c.start()))
        });
        let l = PoolLimit {
            pool: pool.to_string(),
            tool: tool.map(str::to_string),
            config: c.clone(),
            in_flight: AtomicU32::new(0),
            limit: AtomicU32::new(0),
            first_leg: AtomicU32::new(0),
            gradient,
            freed: Notify::new(),
            waiting: AtomicUsize::new(0),
            gauges: [
                metrics.pool_limit.with_label_values(&[&label]),
                metrics.pool_in_flight.with_label_values(&[&label]),
            ],
            metrics: metrics.clone(),
        };
        l.publish(c.start(), false);
        l
    }

    /// The limit now, new calls' share of it, and requests in the pool.
    pub(crate) fn now(&self) -> (u32, u32, u32) {
        let get = |a: &AtomicU32| a.load(Ordering::Acquire);
        (get(&self.limit), get(&self.first_leg), get(&self.in_flight))
    }

    /// The gradient's view, for explain and the console: best latency, probing.
    pub(crate) fn measured(&self) -> (Option<Duration>, bool) {
        match &self.gradient {
            Some(g) => {
                let g = g.lock().unwrap_or_else(|p| p.into_inner());
                (g.min_rtt(), g.probing())
            }
            None => (None, false),
        }
    }

    fn publish(&self, limit: u32, probing: bool) {
        let share = (f64::from(limit) * self.config.first_leg_share).floor() as u32;
        let first = if probing {
            self.config.min
        } else {
            share.max(1)
        };
        self.limit.store(limit, Ordering::Release);
        self.first_leg.store(first.min(limit), Ordering::Release);
        self.gauges[0].set(i64::from(limit));
    }

    /// One slot if fewer than `cap` are taken: the count with it.
    fn try_take(&self, cap: u32) -> Option<u32> {
        let mut n = self.in_flight.load(Ordering::Acquire);
        while n < cap {
            match self.in_flight.compare_exchange_weak(
                n,
                n + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.gauges[1].inc();
                    return Some(n + 1);
                }
                Err(now) => n = now,
            }
        }
        None
    }

    /// Whether a request of this leg would be admitted now (explain: no slot taken).
    pub(crate) fn would_admit(&self, leg: Leg) -> bool {
        let (limit, first, n) = self.now();
        n < if leg == Leg::First { first } else { limit }
    }

    /// Take a slot for a request of `leg`: at once, after a bounded wait (a started leg), or not.
    pub(crate) async fn admit(self: &Arc<Self>, leg: Leg) -> Result<PoolPermit, PoolShed> {
        let (limit, first, _) = self.now();
        let cap = if leg == Leg::First { first } else { limit };
        if let Some(n) = self.try_take(cap) {
            return Ok(self.permit(leg, n, "admitted"));
        }
        let wait = self.config.priority_wait;
        if leg == Leg::Started && !wait.is_zero() {
            if self.waiting.fetch_add(1, Ordering::AcqRel) < limit as usize {
                let got = self.wait_for_slot(wait).await;
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                if let Some(n) = got {
                    return Ok(self.permit(leg, n, "queued"));
                }
            } else {
                self.waiting.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.count(leg, "shed");
        let (limit, _, in_flight) = self.now();
        Err(PoolShed {
            pool: self.pool.clone(),
            tool: self.tool.clone(),
            limit,
            in_flight,
            leg,
            retry_after: self.config.retry_after,
        })
    }

    /// Wait for a freed slot under the whole limit, until `wait` has passed.
    async fn wait_for_slot(&self, wait: Duration) -> Option<u32> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(n) = self.try_take(self.now().0) {
                return Some(n);
            }
            tokio::time::timeout_at(deadline, freed).await.ok()?;
        }
    }

    fn count(&self, leg: Leg, decision: &str) {
        self.metrics
            .pool_decisions
            .with_label_values(&[
                &Self::label(&self.pool, self.tool.as_deref()),
                leg.label(),
                decision,
            ])
            .inc();
    }

    fn permit(self: &Arc<Self>, leg: Leg, n: u32, decision: &str) -> PoolPermit {
        self.count(leg, decision);
        PoolPermit {
            limit: self.clone(),
            admitted_at: n,
            since: Instant::now(),
            answered: false,
        }
    }

    fn sample(&self, rtt: Duration, admitted_at: u32, failed: bool) {
        let Some(g) = &self.gradient else { return };
        let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
        if g.sample(rtt, admitted_at, failed, Instant::now()) {
            self.publish(g.limit(), g.probing());
        }
    }
}

impl PoolPermit {
    /// The pool answered this request (its response head): its latency, and whether the
    /// answer says the pool is overloaded (502, 503, 504), teach the limit. Once per request.
    pub(crate) fn answered(&mut self, status: u16) {
        let rtt = self.since.elapsed();
        self.answered_after(status, rtt);
    }

    /// [`Self::answered`] with the latency given (the tests give it: a measured one depends on
    /// the machine's load).
    fn answered_after(&mut self, status: u16, rtt: std::time::Duration) {
        if std::mem::replace(&mut self.answered, true) {
            return;
        }
        let failed = matches!(status, 502..=504);
        self.limit.sample(rtt, self.admitted_at, failed);
    }
}

impl Drop for PoolPermit {
    fn drop(&mut self) {
        self.limit.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.limit.gauges[1].dec();
        self.limit.freed.notify_one();
    }
}

/// The 503 answer for a request the pool's limit shed, and its `Retry-After` value.
pub(crate) fn refusal(shed: &PoolShed) -> (Rejection, String) {
    let secs = crate::gateway::rate_limits::stages::retry_after_secs(shed.retry_after);
    let who = match shed.leg {
        Leg::First => "new calls take at most their share of it",
        Leg::Started => "even a call already started found no slot in time",
    };
    let whose = match &shed.tool {
        Some(t) => format!("Pool {:?} is at capacity for tool {t:?}", shed.pool),
        None => format!("Pool {:?} is at capacity", shed.pool),
    };
    let rej = Rejection::new(
        503,
        codes::GATEWAY_CAPACITY_SHED,
        "capacity-shed",
        format!(
            "{whose}: {} requests in flight against its concurrency limit of {} ({who}); retry after {secs} s",
            shed.in_flight, shed.limit
        ),
    )
    .with_data(serde_json::json!({
        "pool": shed.pool,
        "tool": shed.tool,
        "limit": shed.limit,
        "inFlight": shed.in_flight,
        "leg": shed.leg.label(),
        "retryAfterSeconds": secs,
    }));
    (rej, secs.to_string())
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
