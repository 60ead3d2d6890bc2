//! Tasks by tool (Tasks extension): how many tasks each tool created and how each ended
//! (completed, failed, cancelled), counted at the gateway from the answers it forwards.
//!
//! The tool is named only by the `tools/call` that created the task (its answer is a
//! `CreateTaskResult`, seen by the [response scanner](crate::mcp::result_scan)); later
//! `tasks/get` and `tasks/cancel` requests name the task only. So each replica keeps a bounded
//! map from the task id's [digest](crate::mcp::digest) (never the id) to the tool's label,
//! like the [flow store](crate::gateway::telemetry::flows) (both are an [`Expiring`] map): entries expire in the order they were made (one timeout
//! for all, `flows.timeout`), past `flows.max_tracked` the oldest is dropped and counted as
//! evicted. A terminal status comes from a `tasks/get` answer (`status` completed, failed or
//! cancelled) or from a successful `tasks/cancel` of a task not seen ending before; each task's
//! end is counted once (the entry stays, marked ended, until it expires). A task this replica
//! did not see created (through another replica, before a restart, evicted) ends under the
//! tool label [`UNKNOWN_TOOL`], also once.

use crate::gateway::telemetry::expiring::Expiring;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

use crate::mcp::digest::state_digest;
use crate::mcp::result_scan::{ResultKind, TaskStatus, Verdict};
use crate::mcp::{methods, tasks};

/// The tool label of a task whose creation this replica did not see.
pub(crate) const UNKNOWN_TOOL: &str = "_unknown";

/// The task metrics (registered once, kept across reloads).
#[derive(Clone)]
pub struct TaskMetrics {
    pub created: IntCounterVec,
    pub ended: IntCounterVec,
    pub evicted: IntCounter,
    pub tracked: IntGauge,
}

impl TaskMetrics {
    pub(crate) fn register(r: &Registry) -> prometheus::Result<Self> {
        let m = TaskMetrics {
            created: IntCounterVec::new(
                Opts::new(
                    "tasks_created_total",
                    "Tasks created (a tools/call answered with a CreateTaskResult), by tool.",
                ),
                &["tool"],
            )?,
            ended: IntCounterVec::new(
                Opts::new(
                    "tasks_ended_total",
                    "Tasks seen ending, once each, by tool (_unknown: created out of this replica's sight) and status: completed, failed or cancelled (from tasks/get answers, or a successful tasks/cancel).",
                ),
                &["tool", "status"],
            )?,
            evicted: IntCounter::new(
                "tasks_evicted_total",
                "Tasks forgotten unfinished because flows.max_tracked tasks were followed at once.",
            )?,
            tracked: IntGauge::new(
                "tasks_tracked",
                "Tasks this replica remembers now (live or ended, until flows.timeout).",
            )?,
        };
        r.register(Box::new(m.created.clone()))?;
        r.register(Box::new(m.ended.clone()))?;
        r.register(Box::new(m.evicted.clone()))?;
        r.register(Box::new(m.tracked.clone()))?;
        Ok(m)
    }
}

#[derive(Debug)]
struct Slot {
    tool: Arc<str>,
    ended: bool,
}

/// The bounded map task digest → tool of one replica.
pub struct TaskMap {
    inner: Mutex<Expiring<Slot>>,
    unknown: Arc<str>,
}

impl TaskMap {
    pub(crate) fn new(timeout: Duration, max: usize) -> Self {
        TaskMap {
            inner: Mutex::new(Expiring::new(timeout, max)),
            unknown: Arc::from(UNKNOWN_TOOL),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Expiring<Slot>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    /// Tasks remembered now.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// A tools/call of `tool` created the task with this id digest.
    pub(crate) fn created(&self, digest: u64, tool: Arc<str>, now: Instant, m: &TaskMetrics) {
        m.created.with_label_values(&[&tool]).inc();
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        self.insert(&mut inner, digest, tool, false, now, m);
        m.tracked.set(inner.len() as i64);
    }

    /// An answer said the task's status is `status`: count its end if it is terminal and not
    /// counted yet. Returns the tool label it was counted under.
    pub(crate) fn status(
        &self,
        digest: u64,
        status: TaskStatus,
        now: Instant,
        m: &TaskMetrics,
    ) -> Option<Arc<str>> {
        if !status.is_terminal() {
            return None;
        }
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        let tool = match inner.get_mut(&digest) {
            Some(slot) if slot.ended => return None,
            Some(slot) => {
                slot.ended = true;
                slot.tool.clone()
            }
            None => {
                let tool = self.unknown.clone();
                self.insert(&mut inner, digest, tool.clone(), true, now, m);
                tool
            }
        };
        m.ended.with_label_values(&[&tool, status.as_str()]).inc();
        m.tracked.set(inner.len() as i64);
        Some(tool)
    }

    fn insert(
        &self,
        inner: &mut Expiring<Slot>,
        digest: u64,
        tool: Arc<str>,
        ended: bool,
        now: Instant,
        m: &TaskMetrics,
    ) {
        inner.insert(digest, Slot { tool, ended }, now, |s| {
            if !s.ended {
                m.evicted.inc();
            }
        });
    }

    fn expire(&self, inner: &mut Expiring<Slot>, now: Instant) {
        inner.expire(now, |_| {});
    }
}

/// One forwarded answer, as far as tasks are concerned.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TaskAnswer<'a> {
    pub method: Option<&'a str>,
    /// The request's `Mcp-Name` (the task id for tasks/*).
    pub name: Option<&'a str>,
    /// Answered 2xx by the upstream (not by the gateway).
    pub ok: bool,
    pub verdict: Verdict,
}

/// A task's end, counted once: its tool label, terminal status and id digest.
pub(crate) type TaskEnd = (Arc<str>, TaskStatus, u64);

/// Count what one forwarded answer says about a task; `tool_label` gives the tool's bounded
/// label (asked only when the answer created a task). The task's end, when this answer is it.
pub(crate) fn observe(
    map: &TaskMap,
    m: &TaskMetrics,
    a: TaskAnswer<'_>,
    tool_label: impl FnOnce() -> Arc<str>,
    now: Instant,
) -> Option<TaskEnd> {
    let TaskAnswer {
        method,
        name,
        ok,
        verdict,
    } = a;
    if !ok {
        return None;
    }
    let by_name = || name.map(state_digest);
    match method {
        Some(methods::TOOLS_CALL) if verdict.kind == ResultKind::Task => {
            if let Some(d) = verdict.task_digest {
                map.created(d, tool_label(), now, m);
            }
            None
        }
        Some(tasks::GET) => {
            let (st, d) = (verdict.task_status?, verdict.task_digest.or_else(by_name)?);
            map.status(d, st, now, m).map(|tool| (tool, st, d))
        }
        Some(tasks::CANCEL) if verdict.kind == ResultKind::Complete => {
            let d = by_name()?;
            let st = TaskStatus::Cancelled;
            map.status(d, st, now, m).map(|tool| (tool, st, d))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(max: usize, timeout: Duration) -> (TaskMap, TaskMetrics) {
        let m = TaskMetrics::register(&Registry::new()).unwrap();
        (TaskMap::new(timeout, max), m)
    }

    fn ended(m: &TaskMetrics, tool: &str, status: &str) -> u64 {
        m.ended.with_label_values(&[tool, status]).get()
    }

    #[test]
    fn each_task_ends_once_under_its_tool() {
        let (map, m) = setup(100, Duration::from_secs(60));
        let t0 = Instant::now();
        map.created(1, Arc::from("deploy_async"), t0, &m);
        map.created(2, Arc::from("slow_compute"), t0, &m);
        assert_eq!(m.created.with_label_values(&["deploy_async"]).get(), 1);
        assert_eq!(map.status(1, TaskStatus::Working, t0, &m), None);
        assert_eq!(map.status(1, TaskStatus::InputRequired, t0, &m), None);
        let tool = map.status(1, TaskStatus::Completed, t0, &m);
        assert_eq!(tool.as_deref(), Some("deploy_async"));
        // Later polls (and a late cancel) of the same task do not count again.
        assert_eq!(map.status(1, TaskStatus::Completed, t0, &m), None);
        assert_eq!(map.status(1, TaskStatus::Cancelled, t0, &m), None);
        assert_eq!(ended(&m, "deploy_async", "completed"), 1);
        assert_eq!(ended(&m, "deploy_async", "cancelled"), 0);
        map.status(2, TaskStatus::Cancelled, t0, &m);
        map.status(2, TaskStatus::Failed, t0, &m);
        assert_eq!(ended(&m, "slow_compute", "cancelled"), 1);
        assert_eq!(ended(&m, "slow_compute", "failed"), 0);
        assert_eq!(m.tracked.get(), 2);
    }

    #[test]
    fn unknown_tasks_end_once_as_unknown() {
        let (map, m) = setup(100, Duration::from_secs(60));
        let t0 = Instant::now();
        assert_eq!(map.status(9, TaskStatus::Working, t0, &m), None);
        assert_eq!(map.len(), 0, "a live unknown task takes no place");
        assert_eq!(
            map.status(9, TaskStatus::Failed, t0, &m).as_deref(),
            Some(UNKNOWN_TOOL)
        );
        assert_eq!(map.status(9, TaskStatus::Failed, t0, &m), None);
        assert_eq!(ended(&m, UNKNOWN_TOOL, "failed"), 1);
    }

    #[test]
    fn answers_that_create_and_end_tasks() {
        let (map, m) = setup(100, Duration::from_secs(60));
        let t0 = Instant::now();
        let id = "0123456789abcdef.abc";
        let v = |kind, st| Verdict {
            kind,
            task_digest: Some(state_digest(id)),
            task_status: st,
            ..Verdict::default()
        };
        let see = |method, name, ok, verdict| {
            let a = TaskAnswer {
                method: Some(method),
                name: Some(name),
                ok,
                verdict,
            };
            observe(&map, &m, a, || Arc::from("deploy_async"), t0);
        };
        let call = methods::TOOLS_CALL;
        see(call, "deploy_async", false, v(ResultKind::Task, None));
        see(call, "deploy_async", true, v(ResultKind::Complete, None));
        assert_eq!(map.len(), 0, "a refused call, a plain result: no task");
        let created = v(ResultKind::Task, Some(TaskStatus::Working));
        see(call, "deploy_async", true, created);
        assert_eq!(m.created.with_label_values(&["deploy_async"]).get(), 1);
        see(
            tasks::GET,
            id,
            true,
            v(ResultKind::Complete, Some(TaskStatus::Working)),
        );
        // An unknown task's refusal (an error) and an update's ack end nothing.
        see(tasks::CANCEL, id, true, v(ResultKind::Error, None));
        see(tasks::UPDATE, id, true, v(ResultKind::Complete, None));
        assert_eq!(ended(&m, "deploy_async", "cancelled"), 0);
        // The cancel ack (no taskId in it: the Mcp-Name names the task) ends it, once.
        let ack = Verdict {
            kind: ResultKind::Complete,
            ..Verdict::default()
        };
        see(tasks::CANCEL, id, true, ack);
        see(
            tasks::GET,
            id,
            true,
            v(ResultKind::Complete, Some(TaskStatus::Cancelled)),
        );
        assert_eq!(ended(&m, "deploy_async", "cancelled"), 1);
    }

    #[test]
    fn bounded_fifo_expiry_and_eviction() {
        let (map, m) = setup(3, Duration::from_secs(10));
        let t0 = Instant::now();
        for d in 0..3 {
            map.created(d, Arc::from("t"), t0, &m);
        }
        map.status(0, TaskStatus::Completed, t0, &m);
        // A fourth pushes out the oldest (task 0, already ended: not an eviction).
        map.created(3, Arc::from("t"), t0, &m);
        assert_eq!((map.len(), m.evicted.get()), (3, 0));
        // A fifth pushes out task 1, live: evicted; its end later counts as unknown.
        map.created(4, Arc::from("t"), t0, &m);
        assert_eq!((map.len(), m.evicted.get()), (3, 1));
        map.status(1, TaskStatus::Completed, t0, &m);
        assert_eq!(ended(&m, UNKNOWN_TOOL, "completed"), 1);
        // After the timeout every entry is gone; the gauge follows.
        let later = t0 + Duration::from_secs(11);
        assert_eq!(
            map.status(4, TaskStatus::Completed, later, &m).as_deref(),
            Some(UNKNOWN_TOOL)
        );
        assert_eq!(map.len(), 1);
        assert_eq!(m.tracked.get(), 1);
        // Many tasks through a small map keep its FIFO bounded too.
        for d in 100..1_000 {
            map.created(d, Arc::from("t"), later, &m);
            map.status(d, TaskStatus::Completed, later, &m);
        }
        assert!(map.len() <= 3);
        assert!(map.lock().marks() <= 2 * 3 + 64 + 1);
    }
}
