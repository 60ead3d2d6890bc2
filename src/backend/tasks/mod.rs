//! The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) in the reference backend:
//! the task store of one pool and the handle a running job uses.
//!
//! A task belongs to the principal that created it (the same principal the sealed
//! `requestState` binds) and lives in the memory of the pool that created it, until its
//! `ttlMs` (counted from creation) runs out. Its id carries the owner hint of the instance
//! that created it ([`crate::mcp::tasks::owner_hint`]), so a gateway can send later
//! `tasks/*` requests to that instance.
//!
//! - [`TaskStore`] (this file): create, find (by id and principal), expire;
//! - [`Entry`] (`entry`): one task's state and its wire shapes (`CreateTaskResult`,
//!   `DetailedTask`);
//! - [`TaskCtx`] (`run_ctx`): what a running job sees: sleep (ended by a cancel), ask the
//!   client for input (`input_required` until `tasks/update` answered every key), report
//!   progress;
//! - [`jobs`]: what the task-supporting tools do; [`serve`]: the `tasks/*` methods.

mod entry;
pub(crate) mod jobs;
mod run_ctx;
pub(crate) mod serve;

pub(crate) use entry::Entry;
pub(crate) use run_ctx::{Stop, TaskCtx};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::mcp::tasks::mint_task_id;

/// How often clients are asked to poll.
pub(crate) const POLL_INTERVAL_MS: u64 = 500;
/// Default task lifetime (`--task-ttl`).
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// Most tasks one pool keeps at once (live or finished, until they expire).
pub(crate) const MAX_TASKS: usize = 10_000;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// RFC 3339 UTC with milliseconds, as the spec's `createdAt` / `lastUpdatedAt`.
pub(crate) fn iso_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The tasks of one pool.
pub(crate) struct TaskStore {
    tasks: Mutex<HashMap<String, Arc<Entry>>>,
    ttl: Duration,
    max: usize,
}

impl TaskStore {
    pub(crate) fn new(ttl: Duration) -> Self {
        TaskStore {
            tasks: Mutex::default(),
            ttl,
            max: MAX_TASKS,
        }
    }

    #[cfg(test)]
    fn with_max(mut self, max: usize) -> Self {
        self.max = max;
        self
    }

    /// A new `working` task for `principal`, with an id carrying `hint`. Refused
    /// (with a message) when the store is full of unexpired tasks.
    pub(crate) fn create(&self, principal: &str, hint: &str) -> Result<Arc<Entry>, String> {
        let now = now_ms();
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        if tasks.len() >= self.max {
            tasks.retain(|_, e| {
                let keep = !e.expired(now);
                if !keep {
                    e.cancel();
                }
                keep
            });
            if tasks.len() >= self.max {
                return Err(format!(
                    "This server holds {} tasks, its limit; try again when some have expired (each lives {} s)",
                    tasks.len(),
                    self.ttl.as_secs()
                ));
            }
        }
        let entry = Arc::new(Entry::new(
            mint_task_id(hint),
            principal.to_owned(),
            now,
            self.ttl.as_millis() as u64,
        ));
        tasks.insert(entry.id.clone(), entry.clone());
        Ok(entry)
    }

    /// The task `id` of `principal`: `None` when it does not exist, has expired or belongs to
    /// another principal (the three are not told apart, so ids of others cannot be probed).
    pub(crate) fn find(&self, id: &str, principal: &str) -> Option<Arc<Entry>> {
        let now = now_ms();
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        let e = tasks.get(id)?.clone();
        if e.expired(now) {
            tasks.remove(id);
            e.cancel();
            return None;
        }
        (e.principal == principal).then_some(e)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tasks::status;

    #[test]
    fn tasks_belong_to_their_principal_and_expire() {
        let store = TaskStore::new(Duration::from_millis(50));
        let t = store.create("alice", "0123456789abcdef").unwrap();
        assert!(t.id.starts_with("0123456789abcdef."));
        assert!(store.find(&t.id, "alice").is_some());
        assert!(
            store.find(&t.id, "bob").is_none(),
            "another principal's task"
        );
        assert!(store.find("nope", "alice").is_none());
        std::thread::sleep(Duration::from_millis(80));
        assert!(store.find(&t.id, "alice").is_none(), "expired");
        assert_eq!(
            t.status(),
            status::CANCELLED,
            "an expired task's job is stopped"
        );
    }

    #[test]
    fn a_full_store_refuses_until_tasks_expire() {
        let store = TaskStore::new(Duration::from_millis(40)).with_max(2);
        store.create("a", "0123456789abcdef").unwrap();
        store.create("a", "0123456789abcdef").unwrap();
        assert!(store.create("a", "0123456789abcdef").is_err());
        std::thread::sleep(Duration::from_millis(60));
        assert!(store.create("a", "0123456789abcdef").is_ok());
        assert_eq!(store.len(), 1);
    }
}
