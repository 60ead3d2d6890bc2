//! What the load tester measures of Tasks-extension flows ([`TaskMeasures`], one per shard,
//! merged at the end): tasks created and how each ended, the time from the creating call to
//! the terminal status, polls per task, latency and errors per request kind (`tasks/get`,
//! `tasks/update`, `tasks/cancel`), and where the task requests landed: on the instance that
//! created the task (the owner) or elsewhere.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::stats::new_hist;
use super::stats::LegStats;
use crate::mcp::tasks;

/// The request kinds of a task flow after its creating `tools/call`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskReq {
    Get,
    Update,
    Cancel,
}

impl TaskReq {
    pub(crate) const ALL: [TaskReq; 3] = [TaskReq::Get, TaskReq::Update, TaskReq::Cancel];

    /// The method it sends.
    pub(crate) fn method(self) -> &'static str {
        match self {
            TaskReq::Get => tasks::GET,
            TaskReq::Update => tasks::UPDATE,
            TaskReq::Cancel => tasks::CANCEL,
        }
    }

    fn idx(self) -> usize {
        self as usize
    }
}

/// How a task flow ended, as the load tester saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskEnd {
    /// `tasks/get` said `completed`.
    Completed,
    /// The tester cancelled it (its share of `--task-cancel-share`) and `tasks/get` said
    /// `cancelled`.
    Cancelled,
    /// `tasks/get` said `failed`.
    Failed,
    /// Not terminal within the task's time or poll bound: the tester cancelled it and gave up.
    Abandoned,
    /// Requests about it kept failing (or a status made no sense): the task was lost.
    Error,
}

/// Where the task requests of one kind landed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskLanding {
    /// Answered by the instance that answered the creating call.
    pub owner: u64,
    /// Answered by another instance.
    pub other: u64,
    /// The answer or the creating call named no instance.
    pub unknown: u64,
}

impl TaskLanding {
    fn merge(&mut self, o: &TaskLanding) {
        self.owner += o.owner;
        self.other += o.other;
        self.unknown += o.unknown;
    }

    /// Share of the requests with a known instance that reached the owner.
    pub fn owner_share(&self) -> Option<f64> {
        let known = self.owner + self.other;
        (known > 0).then(|| self.owner as f64 / known as f64)
    }
}

/// Everything measured of task flows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskMeasures {
    /// `tools/call` answers that created a task.
    pub created: u64,
    pub completed: u64,
    pub cancelled: u64,
    pub failed: u64,
    pub abandoned: u64,
    pub errors: u64,
    /// Completed tasks whose result is a tool error (`isError`).
    pub tool_errors: u64,
    /// From the creating call's send to the `tasks/get` that said `completed`.
    #[serde(with = "super::wire::hist")]
    pub time_to_complete: Histogram<u64>,
    /// `tasks/get` requests per ended task.
    #[serde(with = "super::wire::hist")]
    pub polls: Histogram<u64>,
    /// Per [`TaskReq`].
    pub reqs: [LegStats; 3],
    pub landing: [TaskLanding; 3],
}

impl Default for TaskMeasures {
    fn default() -> Self {
        TaskMeasures {
            created: 0,
            completed: 0,
            cancelled: 0,
            failed: 0,
            abandoned: 0,
            errors: 0,
            tool_errors: 0,
            time_to_complete: new_hist(),
            polls: new_hist(),
            reqs: Default::default(),
            landing: Default::default(),
        }
    }
}

impl TaskMeasures {
    /// One task request: its latency, whether it failed, the instance that answered and the
    /// task's owner.
    pub(crate) fn record_req(
        &mut self,
        kind: TaskReq,
        latency: Duration,
        failed: bool,
        instance: Option<&[u8]>,
        owner: Option<&[u8]>,
    ) {
        let s = &mut self.reqs[kind.idx()];
        s.requests += 1;
        s.errors += u64::from(failed);
        let _ = s.hist.record((latency.as_micros() as u64).max(1));
        let l = &mut self.landing[kind.idx()];
        match (instance, owner) {
            (Some(a), Some(b)) if a == b => l.owner += 1,
            (Some(_), Some(_)) => l.other += 1,
            _ => l.unknown += 1,
        }
    }

    /// A task flow ended after `polls` tasks/get, `elapsed` after its creating call was sent.
    pub(crate) fn record_end(&mut self, end: TaskEnd, polls: u32, elapsed: Duration) {
        match end {
            TaskEnd::Completed => {
                self.completed += 1;
                let _ = self
                    .time_to_complete
                    .record((elapsed.as_micros() as u64).max(1));
            }
            TaskEnd::Cancelled => self.cancelled += 1,
            TaskEnd::Failed => self.failed += 1,
            TaskEnd::Abandoned => self.abandoned += 1,
            TaskEnd::Error => self.errors += 1,
        }
        let _ = self.polls.record(u64::from(polls));
    }

    pub fn req(&self, kind: TaskReq) -> &LegStats {
        &self.reqs[kind.idx()]
    }

    pub(crate) fn landing(&self, kind: TaskReq) -> TaskLanding {
        self.landing[kind.idx()]
    }

    /// The landing of every task request together.
    pub fn landing_all(&self) -> TaskLanding {
        let mut t = TaskLanding::default();
        for l in &self.landing {
            t.merge(l);
        }
        t
    }

    /// Task requests sent.
    pub fn requests(&self) -> u64 {
        self.reqs.iter().map(|r| r.requests).sum()
    }

    /// Failed task requests, plus tasks abandoned, lost or completed with a tool error.
    pub(crate) fn errors(&self) -> u64 {
        self.reqs.iter().map(|r| r.errors).sum::<u64>()
            + self.abandoned
            + self.errors
            + self.tool_errors
    }

    /// Tasks that ended one way or another.
    pub(crate) fn ended(&self) -> u64 {
        self.completed + self.cancelled + self.failed + self.abandoned + self.errors
    }

    pub(crate) fn merge(&mut self, o: &TaskMeasures) {
        self.created += o.created;
        self.completed += o.completed;
        self.cancelled += o.cancelled;
        self.failed += o.failed;
        self.abandoned += o.abandoned;
        self.errors += o.errors;
        self.tool_errors += o.tool_errors;
        let _ = self.time_to_complete.add(&o.time_to_complete);
        let _ = self.polls.add(&o.polls);
        for (a, b) in self.reqs.iter_mut().zip(&o.reqs) {
            a.merge(b);
        }
        for (a, b) in self.landing.iter_mut().zip(&o.landing) {
            a.merge(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_requests_and_landing_add_up() {
        let mut m = TaskMeasures::default();
        let ms = Duration::from_millis;
        m.created = 3;
        m.record_req(TaskReq::Get, ms(2), false, Some(b"a"), Some(b"a"));
        m.record_req(TaskReq::Get, ms(2), false, Some(b"b"), Some(b"a"));
        m.record_req(TaskReq::Update, ms(3), true, None, Some(b"a"));
        m.record_req(TaskReq::Cancel, ms(1), false, Some(b"a"), Some(b"a"));
        m.record_end(TaskEnd::Completed, 4, ms(1200));
        m.record_end(TaskEnd::Cancelled, 1, ms(100));
        m.record_end(TaskEnd::Abandoned, 9, ms(100));
        let mut t = TaskMeasures::default();
        t.merge(&m);
        t.merge(&m);
        assert_eq!((t.created, t.ended()), (6, 6));
        assert_eq!((t.completed, t.cancelled, t.abandoned), (2, 2, 2));
        assert_eq!(t.requests(), 8);
        assert_eq!(t.errors(), 2 + 2);
        assert_eq!(t.polls.len(), 6);
        assert_eq!(t.polls.max(), 9);
        assert_eq!(t.time_to_complete.len(), 2);
        let all = t.landing_all();
        assert_eq!((all.owner, all.other, all.unknown), (4, 2, 2));
        assert_eq!(t.landing(TaskReq::Get).owner_share(), Some(0.5));
        assert_eq!(t.landing(TaskReq::Update).owner_share(), None);
        assert_eq!(t.req(TaskReq::Update).errors, 2);
    }
}
