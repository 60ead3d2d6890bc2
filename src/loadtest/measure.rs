//! What is measured while the load runs: one [`Measures`] per shard (a few shards, each behind
//! its own mutex, so workers rarely contend), merged at the end. HDR histograms hold latencies
//! in microseconds. The aggregates it holds are in [`super::stats`] and [`super::tally`].

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub(crate) use super::stats::{new_hist, LegError};
pub(crate) use super::stats::{Bucket, InstanceCounts, Landing, LegStats, OpStats};
use super::tally::Tally;
use super::task_measure::TaskMeasures;

fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

/// Which leg of a flow a request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegKind {
    /// Leg 1 of a `tools/call` flow.
    First,
    /// Leg 2 or later of a `tools/call` flow (carries `inputResponses` / `requestState`).
    Retry,
    /// A plain request (`server/discover`, `tools/list`, ...).
    Plain,
    /// A deliberately mismatched request.
    Bad,
}

impl LegKind {
    pub(crate) const ALL: [LegKind; 4] =
        [LegKind::First, LegKind::Retry, LegKind::Plain, LegKind::Bad];
    pub(crate) fn name(self) -> &'static str {
        match self {
            LegKind::First => "first",
            LegKind::Retry => "retry",
            LegKind::Plain => "plain",
            LegKind::Bad => "bad",
        }
    }
    fn idx(self) -> usize {
        self as usize
    }
}

/// How a flow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlowEnd {
    Completed,
    Failed,
    Abandoned,
}

/// Everything measured, per shard while running and merged at the end; serialized losslessly
/// (histograms in HdrHistogram's encoding, [`super::wire`]) into the JSON report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measures {
    pub legs: [LegStats; 4],
    /// Whole completed `tools/call` flows, from the (intended) start of leg 1.
    #[serde(with = "super::wire::hist")]
    pub flows_hist: Histogram<u64>,
    pub ops: Vec<OpStats>,
    pub flows_started: u64,
    pub flows_completed: u64,
    pub flows_failed: u64,
    pub flows_abandoned: u64,
    /// Flows that failed before their first leg (their arguments could not be rendered).
    pub flows_unsent: u64,
    /// Completed flows by number of legs.
    pub rounds: BTreeMap<u32, u64>,
    pub errors_by_status: BTreeMap<u16, u64>,
    pub errors_by_code: BTreeMap<i64, u64>,
    #[serde(deserialize_with = "super::wire::static_keys")]
    pub errors_by_kind: BTreeMap<&'static str, u64>,
    pub bad_sent: u64,
    pub bad_rejected: u64,
    pub landing: Landing,
    pub timeline: Vec<Bucket>,
    /// Live window for the progress line (reset by the ticker; not in reports).
    #[serde(skip, default = "new_hist")]
    pub window: Histogram<u64>,
    /// Error messages, content checks, declined flows, stages.
    pub tally: Tally,
    /// Tasks-extension flows: requests after the creating call, ends, landing.
    pub tasks: TaskMeasures,
}

impl Measures {
    /// Count an error of a request in the run's totals: the tally, its second, its kind,
    /// status and code.
    pub(super) fn count_error(&mut self, e: &LegError, at_sec: usize) {
        self.tally.error(e);
        self.bucket(at_sec).errors += 1;
        *self.errors_by_kind.entry(e.kind).or_default() += 1;
        if let Some(s) = e.status {
            *self.errors_by_status.entry(s).or_default() += 1;
        }
        if let Some(c) = e.code {
            *self.errors_by_code.entry(c).or_default() += 1;
        }
    }

    pub(crate) fn new(op_labels: &[String]) -> Self {
        Measures {
            legs: Default::default(),
            flows_hist: new_hist(),
            ops: op_labels.iter().map(|l| OpStats::new(l)).collect(),
            flows_started: 0,
            flows_completed: 0,
            flows_failed: 0,
            flows_abandoned: 0,
            flows_unsent: 0,
            rounds: BTreeMap::new(),
            errors_by_status: BTreeMap::new(),
            errors_by_code: BTreeMap::new(),
            errors_by_kind: BTreeMap::new(),
            bad_sent: 0,
            bad_rejected: 0,
            landing: Landing::default(),
            timeline: Vec::new(),
            window: new_hist(),
            tally: Tally::default(),
            tasks: TaskMeasures::default(),
        }
    }

    pub(super) fn bucket(&mut self, sec: usize) -> &mut Bucket {
        if self.timeline.len() <= sec {
            self.timeline.resize(sec + 1, Bucket::default());
        }
        &mut self.timeline[sec]
    }

    /// Record one leg. `instance` is the instance that served it, `first_instance` the one that
    /// served leg 1 of the same flow (for retry legs).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_leg(
        &mut self,
        op: usize,
        kind: LegKind,
        latency: Duration,
        at_sec: usize,
        error: Option<LegError>,
        instance: Option<&[u8]>,
        first_instance: Option<&[u8]>,
    ) {
        let v = us(latency);
        let stats = &mut self.legs[kind.idx()];
        stats.requests += 1;
        let _ = stats.hist.record(v);
        let _ = self.window.record(v);
        if let Some(o) = self.ops.get_mut(op) {
            o.legs.requests += 1;
            let _ = o.legs.hist.record(v);
        }
        let b = self.bucket(at_sec);
        b.requests += 1;
        if kind == LegKind::Bad {
            self.bad_sent += 1;
            if error.is_none() {
                self.bad_rejected += 1;
            }
        }
        if let Some(e) = error {
            self.legs[kind.idx()].errors += 1;
            if let Some(o) = self.ops.get_mut(op) {
                o.legs.errors += 1;
            }
            self.count_error(&e, at_sec);
        }
        if let Some(inst) = instance {
            let name = String::from_utf8_lossy(inst);
            let counts = match self.landing.instances.get_mut(name.as_ref()) {
                Some(c) => c,
                None => self.landing.instances.entry(name.into_owned()).or_default(),
            };
            match kind {
                LegKind::First => counts.first += 1,
                LegKind::Retry => counts.retry += 1,
                LegKind::Plain => counts.plain += 1,
                LegKind::Bad => {}
            }
        }
        if kind == LegKind::Retry {
            match (instance, first_instance) {
                (Some(a), Some(b)) => {
                    self.landing.retry_known += 1;
                    if a != b {
                        self.landing.cross += 1;
                    }
                }
                _ => self.landing.retry_unknown += 1,
            }
        }
    }

    /// Record the end of a flow (not for bad requests).
    pub(crate) fn record_flow(
        &mut self,
        op: usize,
        end: FlowEnd,
        legs: u32,
        total: Duration,
        at_sec: usize,
        is_call: bool,
    ) {
        match end {
            FlowEnd::Completed => {
                self.flows_completed += 1;
                *self.rounds.entry(legs).or_default() += 1;
                self.bucket(at_sec).flows_completed += 1;
                if is_call {
                    let _ = self.flows_hist.record(us(total));
                }
                if let Some(o) = self.ops.get_mut(op) {
                    o.completed += 1;
                    let _ = o.flows.record(us(total));
                }
            }
            FlowEnd::Failed => {
                self.flows_failed += 1;
                if let Some(o) = self.ops.get_mut(op) {
                    o.failed += 1;
                }
            }
            FlowEnd::Abandoned => {
                self.flows_abandoned += 1;
                *self.errors_by_kind.entry("flow_abandoned").or_default() += 1;
                self.tally.error(&LegError {
                    kind: "flow_abandoned",
                    status: None,
                    code: None,
                    message: Some(format!("still input_required after {legs} legs")),
                });
                if let Some(o) = self.ops.get_mut(op) {
                    o.abandoned += 1;
                }
            }
        }
    }

    pub(crate) fn merge(&mut self, o: &Measures) {
        for (a, b) in self.legs.iter_mut().zip(&o.legs) {
            a.merge(b);
        }
        self.flows_hist
            .add(&o.flows_hist)
            .expect("auto-resizing histogram");
        for (a, b) in self.ops.iter_mut().zip(&o.ops) {
            a.merge(b);
        }
        self.flows_started += o.flows_started;
        self.flows_completed += o.flows_completed;
        self.flows_failed += o.flows_failed;
        self.flows_abandoned += o.flows_abandoned;
        self.flows_unsent += o.flows_unsent;
        for (k, v) in &o.rounds {
            *self.rounds.entry(*k).or_default() += v;
        }
        for (k, v) in &o.errors_by_status {
            *self.errors_by_status.entry(*k).or_default() += v;
        }
        for (k, v) in &o.errors_by_code {
            *self.errors_by_code.entry(*k).or_default() += v;
        }
        for (k, v) in &o.errors_by_kind {
            *self.errors_by_kind.entry(k).or_default() += v;
        }
        self.tally.merge(&o.tally);
        self.tasks.merge(&o.tasks);
        self.bad_sent += o.bad_sent;
        self.bad_rejected += o.bad_rejected;
        self.landing.retry_known += o.landing.retry_known;
        self.landing.cross += o.landing.cross;
        self.landing.retry_unknown += o.landing.retry_unknown;
        for (k, v) in &o.landing.steered {
            *self.landing.steered.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.landing.instances {
            let c = self.landing.instances.entry(k.clone()).or_default();
            c.first += v.first;
            c.retry += v.retry;
            c.plain += v.plain;
        }
        for (i, b) in o.timeline.iter().enumerate() {
            let m = self.bucket(i);
            m.requests += b.requests;
            m.errors += b.errors;
            m.flows_completed += b.flows_completed;
        }
    }

    /// Requests sent (every leg, bad ones and task requests included).
    pub(crate) fn requests(&self) -> u64 {
        self.legs.iter().map(|l| l.requests).sum::<u64>() + self.tasks.requests()
    }

    /// Errors: failed legs (task requests included) plus abandoned and unsent flows and
    /// abandoned or lost tasks. Bad requests rejected as expected are not errors.
    pub(crate) fn errors(&self) -> u64 {
        self.legs.iter().map(|l| l.errors).sum::<u64>()
            + self.flows_abandoned
            + self.flows_unsent
            + self.tasks.errors()
    }

    pub fn leg(&self, kind: LegKind) -> &LegStats {
        &self.legs[kind.idx()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn landing_and_errors_are_counted() {
        let mut m = Measures::new(&["a".into()]);
        let ms = Duration::from_millis;
        m.record_leg(0, LegKind::First, ms(2), 0, None, Some(b"be-1"), None);
        m.record_leg(
            0,
            LegKind::Retry,
            ms(3),
            0,
            None,
            Some(b"be-2"),
            Some(b"be-1"),
        );
        m.record_leg(
            0,
            LegKind::Retry,
            ms(3),
            1,
            None,
            Some(b"be-1"),
            Some(b"be-1"),
        );
        m.record_leg(0, LegKind::Retry, ms(3), 1, None, None, Some(b"be-1"));
        let e = LegError {
            kind: "jsonrpc_error",
            status: Some(200),
            code: Some(-32602),
            message: Some("Invalid or expired requestState".into()),
        };
        m.record_leg(
            0,
            LegKind::Retry,
            ms(4),
            1,
            Some(e),
            Some(b"be-3"),
            Some(b"be-1"),
        );
        m.record_leg(0, LegKind::Bad, ms(1), 1, None, None, None);
        m.record_flow(0, FlowEnd::Completed, 2, ms(5), 0, true);
        m.record_flow(0, FlowEnd::Abandoned, 8, ms(5), 1, true);
        let mut total = Measures::new(&["a".into()]);
        total.merge(&m);
        total.merge(&m);
        assert_eq!(total.requests(), 12);
        assert_eq!(total.errors(), 4);
        assert_eq!(total.landing.retry_known, 6);
        assert_eq!(total.landing.cross, 4);
        assert_eq!(total.landing.retry_unknown, 2);
        assert_eq!(
            total.landing.instances["be-1"],
            InstanceCounts {
                first: 2,
                retry: 2,
                plain: 0
            }
        );
        assert_eq!(total.bad_sent, 2);
        assert_eq!(total.bad_rejected, 2);
        assert_eq!(total.errors_by_code[&-32602], 2);
        assert_eq!(total.timeline.len(), 2);
        assert_eq!(total.timeline[1].errors, 2);
        assert_eq!(total.ops[0].completed, 2);
        assert_eq!(total.rounds[&2], 2);
        assert_eq!(total.leg(LegKind::Retry).errors, 2);
        assert_eq!(total.tally.error_groups()[0].1, 2);
    }
}
