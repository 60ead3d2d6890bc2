//! Flow stage: an MRTR call followed across its legs, statelessly and in bounded memory.
//!
//! When a `tools/call`, `prompts/get` or `resources/read` response is `input_required` with a
//! `requestState`, the store remembers the state's [digest](crate::mcp::digest) (never the
//! state) with the method, name, round, start of the flow, when the leg was answered, the
//! instance and the leg's span. A later request carrying the same state is the flow's next
//! round: the wait between the two legs (the user's think time) is observed, and whether it
//! went to the same instance. A `complete` result ends the flow (its rounds and duration are
//! observed), an error fails it, and a state not seen again within `flows.timeout` is counted
//! as abandoned. A flow starts at its first `input_required`: a call answered at once is not a
//! flow.
//!
//! The store is per replica. Entries expire in the order they were made (one timeout for all),
//! so a FIFO of deadlines finds the expired ones without a scan ([`crate::gateway::telemetry::expiring`]); past
//! `flows.max_tracked` entries the oldest is dropped and counted as evicted.
//!
//! A flow's id is the digest of the state its first leg was answered with: every later leg
//! carries it ([`LegFlow::flow`]), and the audit trail, when on, gets one record per flow that
//! completes, fails or is abandoned ([`crate::gateway::telemetry::audit`]).

use crate::gateway::telemetry::expiring::Expiring;
pub(crate) use crate::gateway::telemetry::flow_metrics::FlowMetrics;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::FlowsConfig;
use crate::gateway::telemetry::audit::{self, Audit, FlowEnd};
use crate::mcp::result_scan::{ResultKind, Verdict};

/// A span of one leg, for links between the legs of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanRef {
    pub trace_id: u128,
    pub span_id: u64,
    pub sampled: bool,
}

/// What the store keeps of a flow between two legs.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub method: &'static str,
    pub name: Arc<str>,
    /// The round of the leg that was answered `input_required`.
    pub round: u32,
    pub flow_started: Instant,
    pub answered: Instant,
    /// (pool, instance) that served that leg.
    pub instance: Option<(usize, usize)>,
    /// (pool, instance) that served leg 1 of the flow.
    pub first_instance: Option<(usize, usize)>,
    pub span: Option<SpanRef>,
    /// The flow's id (the digest of its first leg's state).
    pub flow: u64,
}

/// One finished leg, as the flow stage sees it.
#[derive(Debug, Clone)]
pub struct Leg {
    pub method: &'static str,
    pub name: Arc<str>,
    /// The digest of the request's `requestState`, if it carried one.
    pub request_state: Option<u64>,
    pub verdict: Verdict,
    /// The leg failed whatever its body said (an HTTP error, the gateway's own error).
    pub failed: bool,
    /// The gateway refused the leg with an invitation to retry (429, 503 + `Retry-After`): the
    /// flow goes on with the same state.
    pub retry_invited: bool,
    pub instance: Option<(usize, usize)>,
    pub started: Instant,
    pub span: Option<SpanRef>,
}

/// What the store knew about a leg's flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegFlow {
    /// The leg's round (1 for a flow's first leg).
    pub round: u32,
    /// The previous leg's span, to link to.
    pub previous_span: Option<SpanRef>,
    /// The flow's id (the digest of the state its first leg was answered with).
    pub flow: u64,
}

/// The bounded store of flows waiting for their next leg.
pub struct FlowStore {
    inner: Mutex<Expiring<Entry>>,
    /// Tasks by tool, with the same bounds ([`crate::gateway::telemetry::task_count`]).
    pub tasks: crate::gateway::telemetry::task_count::TaskMap,
    pub timeout: Duration,
    pub max: usize,
    /// Where flow ends are recorded (set by each gateway built with this store).
    pub(crate) audit: arc_swap::ArcSwapOption<Audit>,
}

impl FlowStore {
    pub(crate) fn new(cfg: &FlowsConfig) -> Self {
        FlowStore {
            inner: Mutex::new(Expiring::new(cfg.timeout, cfg.max_tracked)),
            tasks: crate::gateway::telemetry::task_count::TaskMap::new(
                cfg.timeout,
                cfg.max_tracked,
            ),
            timeout: cfg.timeout,
            max: cfg.max_tracked.max(1),
            audit: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Expiring<Entry>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Flows followed now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the leg answered with the state of `digest` was served, and leg 1 of its flow:
    /// what `mrtr.retry_landing: elsewhere` steers the next leg away from. A lookup in the
    /// bounded store; `None` for a state this replica does not follow.
    #[allow(clippy::type_complexity)]
    pub(crate) fn placement(
        &self,
        digest: u64,
    ) -> Option<(Option<(usize, usize)>, Option<(usize, usize)>)> {
        let inner = self.lock();
        let e = inner.get(&digest)?;
        Some((e.instance, e.first_instance))
    }

    /// Count the flows whose state expired unseen as abandoned.
    pub(crate) fn sweep(&self, now: Instant, m: &FlowMetrics) {
        let mut inner = self.lock();
        self.expire(&mut inner, now, m);
        m.tracked.set(inner.len() as i64);
    }

    /// Record a finished leg: its round, the wait since the previous leg, the flow's end.
    pub fn finish_leg(&self, leg: &Leg, now: Instant, m: &FlowMetrics) -> Option<LegFlow> {
        let mut inner = self.lock();
        self.expire(&mut inner, now, m);
        let out = self.leg(&mut inner, leg, now, m);
        m.tracked.set(inner.len() as i64);
        out
    }

    fn leg(
        &self,
        inner: &mut Expiring<Entry>,
        leg: &Leg,
        now: Instant,
        m: &FlowMetrics,
    ) -> Option<LegFlow> {
        let labels = [leg.method, &*leg.name];
        if leg.retry_invited {
            // The same state will come again: the flow goes on, this leg does not count.
            let prev = inner.get(&leg.request_state?)?;
            return Some(LegFlow {
                round: prev.round + 1,
                previous_span: prev.span,
                flow: prev.flow,
            });
        }
        let prev = leg.request_state.and_then(|d| inner.remove(&d));
        if let Some(p) = &prev {
            count_return(m, leg, p);
        } else if leg.request_state.is_some() {
            m.untracked.with_label_values(&labels).inc();
            return None;
        }
        let round = prev.as_ref().map_or(1, |p| p.round + 1);
        let kind = if leg.failed {
            ResultKind::Error
        } else {
            leg.verdict.kind
        };
        let flow = match (kind, leg.verdict.state_digest, &prev) {
            (ResultKind::InputRequired, Some(digest), _) => {
                let origin = match &prev {
                    Some(p) => (p.flow_started, p.first_instance, p.flow),
                    None => (leg.started, leg.instance, digest),
                };
                self.insert(inner, digest, leg, round, origin, now, m);
                origin.2
            }
            // A call answered with a task completed its MRTR rounds: the task goes on.
            (ResultKind::Complete | ResultKind::Task, _, Some(p)) => {
                count_completed(m, leg, round, now.saturating_duration_since(p.flow_started));
                self.ended(p, FlowEnd::Completed, round, now);
                p.flow
            }
            // An error, a response that said nothing, or input_required without a state to
            // follow: the flow ends here as far as this replica can tell.
            (_, _, Some(p)) => {
                m.flows
                    .with_label_values(&[leg.method, &leg.name, "failed"])
                    .inc();
                self.ended(p, FlowEnd::Failed, round, now);
                p.flow
            }
            (_, _, None) => return None,
        };
        Some(LegFlow {
            round,
            previous_span: prev.and_then(|p| p.span),
            flow,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &self,
        inner: &mut Expiring<Entry>,
        digest: u64,
        leg: &Leg,
        round: u32,
        (flow_started, first_instance, flow): (Instant, Option<(usize, usize)>, u64),
        now: Instant,
        m: &FlowMetrics,
    ) {
        inner.insert(
            digest,
            Entry {
                method: leg.method,
                name: leg.name.clone(),
                round,
                flow_started,
                answered: now,
                instance: leg.instance,
                first_instance,
                span: leg.span,
                flow,
            },
            now,
            |_| m.evicted.inc(),
        );
    }
}

impl FlowStore {
    fn expire(&self, inner: &mut Expiring<Entry>, now: Instant, m: &FlowMetrics) {
        inner.expire(now, |e| {
            m.flows
                .with_label_values(&[e.method, &e.name, "abandoned"])
                .inc();
            self.ended(&e, FlowEnd::Abandoned, e.round, now);
        });
    }

    /// A flow's end for the audit trail, when it is on: `rounds` legs were answered.
    fn ended(&self, e: &Entry, end: FlowEnd, rounds: u32, now: Instant) {
        let guard = self.audit.load();
        let Some(audit) = guard.as_deref() else {
            return;
        };
        audit.submit(audit::Record {
            time: std::time::SystemTime::now(),
            event: audit::Event::Flow(audit::Flow {
                method: e.method,
                name: e.name.clone(),
                flow: e.flow,
                end,
                rounds,
                duration: now.saturating_duration_since(e.flow_started),
                trace: e.span.map(|s| s.trace_id),
            }),
        });
    }
}

/// A leg that continues a tracked flow: the client's wait since the previous answer, and
/// whether it landed on the same instance.
fn count_return(m: &FlowMetrics, leg: &Leg, p: &Entry) {
    let wait = leg.started.saturating_duration_since(p.answered);
    let labels = [leg.method, &*leg.name];
    m.round_wait
        .with_label_values(&labels)
        .observe(wait.as_secs_f64());
    if let (Some(a), Some(b)) = (p.instance, leg.instance) {
        let same = if a == b { "same" } else { "other" };
        m.placement
            .with_label_values(&[leg.method, &leg.name, same])
            .inc();
    }
}

/// A flow that completed after `round` rounds, `took` since its first leg.
fn count_completed(m: &FlowMetrics, leg: &Leg, round: u32, took: std::time::Duration) {
    let labels = [leg.method, &*leg.name];
    m.flows
        .with_label_values(&[leg.method, &leg.name, "completed"])
        .inc();
    m.rounds
        .with_label_values(&labels)
        .observe(f64::from(round));
    m.duration
        .with_label_values(&labels)
        .observe(took.as_secs_f64());
}

#[cfg(test)]
mod tests;
