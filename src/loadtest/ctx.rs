//! What every worker of a run shares ([`Ctx`]): the client, the flows and their weights, the
//! shares of declined, cancelled and bad flows, the run's bounds, the measurement shards and
//! the live counters; and what a worker draws to start one flow ([`Draw`]). Built by
//! [`super::run`], read by the flows ([`super::flow`], [`super::task_flow`]), the legs
//! ([`super::leg`]) and the display ([`super::progress`]).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use rand::rngs::StdRng;
use rand::Rng;

use super::answer::ElicitAction;
use super::client::Http;
use super::feed::Feed;
use super::measure::Measures;
use super::plan::FlowPlan;
use super::shard::Shard;
use super::stages::Stages;

/// Measurement shards: workers pick one by index; each has its own lock.
pub(crate) const SHARDS: usize = 8;

/// Live counters for the progress display.
#[derive(Default)]
pub(crate) struct Live {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub flows: AtomicU64,
}

pub(crate) struct Ctx {
    pub(crate) http: Http,
    pub(crate) flows: Vec<FlowPlan>,
    pub(crate) feed: Option<Feed>,
    pub(crate) extra_headers: http::HeaderMap,
    /// `-H Authorization: ...` given: no rotating principals.
    pub(crate) user_authorization: bool,
    pub(crate) decline_share: f64,
    pub(crate) cancel_share: f64,
    pub(crate) task_cancel_share: f64,
    /// Longest a followed task may take (`--task-limit`).
    pub(crate) task_limit: Duration,
    pub(crate) stages: Option<Stages>,
    pub(crate) cumulative: Vec<u64>,
    pub(crate) total_weight: u64,
    /// The template whose mismatched headers make the bad requests.
    pub(crate) bad_template: usize,
    pub(crate) principals: Vec<HeaderValue>,
    pub(crate) upstream_header: HeaderName,
    pub(crate) timeout: Duration,
    pub(crate) max_rounds: u32,
    pub(crate) bad_share: f64,
    pub(crate) next_id: AtomicU64,
    /// Flows claimed by this process (its local numbers).
    pub(crate) claimed: AtomicU64,
    /// This process's part of `--flows`.
    pub(crate) flow_limit: Option<u64>,
    /// Which part of the run this process runs: flow numbers are run-wide.
    pub(crate) shard: Shard,
    pub(crate) deadline: Option<Instant>,
    pub(crate) start: Instant,
    pub(crate) shards: Vec<Mutex<Measures>>,
    pub(crate) live: Live,
}

/// What a worker needs to start one flow.
#[derive(Clone, Copy)]
pub(crate) struct Draw {
    pub(crate) seq: u64,
    pub(crate) bad: bool,
    pub(crate) pick: u64,
    pub(crate) action: ElicitAction,
    /// Seeds the flow's own templates ($uuid, $rand, a random feed row).
    pub(crate) seed: u64,
    /// A task this flow creates is cancelled with tasks/cancel.
    pub(crate) cancel_task: bool,
}

impl Ctx {
    /// Claim the next flow in the closed loop (its run-wide number), or `None` when the run
    /// is over.
    pub(crate) fn claim(&self) -> Option<u64> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let local = self.claimed.fetch_add(1, Relaxed);
        match self.flow_limit {
            Some(n) if local >= n => None,
            _ => Some(self.shard.global(local)),
        }
    }

    pub(crate) fn draw(&self, seq: u64, rng: &mut StdRng) -> Draw {
        let bad = self.bad_share > 0.0 && rng.gen::<f64>() < self.bad_share;
        let a: f64 = if self.decline_share + self.cancel_share > 0.0 {
            rng.gen()
        } else {
            1.0
        };
        let action = if a < self.decline_share {
            ElicitAction::Decline
        } else if a < self.decline_share + self.cancel_share {
            ElicitAction::Cancel
        } else {
            ElicitAction::Accept
        };
        Draw {
            seq,
            bad,
            pick: rng.gen_range(0..self.total_weight),
            action,
            seed: rng.gen(),
            cancel_task: self.task_cancel_share > 0.0 && rng.gen::<f64>() < self.task_cancel_share,
        }
    }

    /// The stage running at `at`, when the run has stages.
    pub(crate) fn stage(&self, at: Instant) -> Option<usize> {
        let s = self.stages.as_ref()?;
        Some(s.index_at(at.saturating_duration_since(self.start)))
    }

    pub(crate) fn sec(&self, at: Instant) -> usize {
        at.saturating_duration_since(self.start).as_secs() as usize
    }

    pub(crate) fn record(&self, shard: usize, f: impl FnOnce(&mut Measures)) {
        f(&mut self.shards[shard % SHARDS].lock().expect("measures lock"));
    }
}
