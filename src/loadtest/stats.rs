//! The aggregates [`super::measure::Measures`] is made of: latency and counts per leg kind
//! ([`LegStats`]) and per operation ([`OpStats`]), where retry legs landed ([`Landing`]), and
//! one second of the timeline ([`Bucket`]); the histogram every latency is kept in
//! ([`new_hist`]) and an error seen on a leg ([`LegError`]).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Significant figures of every latency histogram.
const SIGFIG: u8 = 3;

pub(crate) fn new_hist() -> Histogram<u64> {
    Histogram::new(SIGFIG).expect("valid sigfig")
}

/// An error seen on one leg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LegError {
    /// A short, bounded label (`http_status`, `jsonrpc_error`, `timeout`, `transport`, ...).
    pub kind: &'static str,
    pub status: Option<u16>,
    pub code: Option<i64>,
    /// What the upstream said (JSON-RPC `error.message`, the tool's text when `isError`, the
    /// start of a non-JSON body) or what went wrong locally (the transport error).
    pub message: Option<String>,
}

/// Latency and counts of one leg kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LegStats {
    #[serde(with = "super::wire::hist")]
    pub hist: Histogram<u64>,
    pub requests: u64,
    pub errors: u64,
}

impl Default for LegStats {
    fn default() -> Self {
        LegStats {
            hist: new_hist(),
            requests: 0,
            errors: 0,
        }
    }
}

impl LegStats {
    pub(super) fn merge(&mut self, o: &LegStats) {
        self.hist.add(&o.hist).expect("auto-resizing histogram");
        self.requests += o.requests;
        self.errors += o.errors;
    }
}

/// Per operation (`tools/call create_repo`, `tools/list`, ...).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpStats {
    pub label: String,
    /// Every leg of this operation.
    pub legs: LegStats,
    /// Whole completed flows.
    #[serde(with = "super::wire::hist")]
    pub flows: Histogram<u64>,
    pub completed: u64,
    pub failed: u64,
    pub abandoned: u64,
}

impl OpStats {
    pub(super) fn new(label: &str) -> Self {
        OpStats {
            label: label.into(),
            legs: LegStats::default(),
            flows: new_hist(),
            completed: 0,
            failed: 0,
            abandoned: 0,
        }
    }
    pub(super) fn merge(&mut self, o: &OpStats) {
        self.legs.merge(&o.legs);
        self.flows.add(&o.flows).expect("auto-resizing histogram");
        self.completed += o.completed;
        self.failed += o.failed;
        self.abandoned += o.abandoned;
    }
}

/// Legs served by one instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceCounts {
    pub first: u64,
    pub retry: u64,
    pub plain: u64,
}

/// Where retry legs landed compared with leg 1 of their flow.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Landing {
    /// Retry legs whose instance and whose flow's leg-1 instance are both known.
    pub retry_known: u64,
    /// ...of which served by a different instance than leg 1.
    pub cross: u64,
    /// Retry legs (answered) for which either instance is unknown.
    pub retry_unknown: u64,
    pub instances: BTreeMap<String, InstanceCounts>,
    /// Retry legs by the gateway's `x-mcp-edge-retry-landing` header (`elsewhere`, `same`,
    /// `untracked`): present only when the pool steers retry legs (`mrtr.retry_landing`).
    #[serde(default)]
    pub steered: BTreeMap<String, u64>,
}

impl Landing {
    pub(crate) fn cross_fraction(&self) -> Option<f64> {
        (self.retry_known > 0).then(|| self.cross as f64 / self.retry_known as f64)
    }

    /// Retry legs the gateway said it steered (any value of its retry-landing header).
    pub(crate) fn steered_total(&self) -> u64 {
        self.steered.values().sum()
    }
}

/// One second of the run (by completion time).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Bucket {
    pub requests: u64,
    pub errors: u64,
    pub flows_completed: u64,
}
