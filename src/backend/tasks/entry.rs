//! One task of the reference backend: its state (status, pending input requests, answers,
//! result or error), the transitions a job or a client makes (answer, cancel, complete, fail;
//! a terminal status sticks) and its wire shapes (`CreateTaskResult`, `DetailedTask`).

use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

use super::{iso_ms, now_ms, POLL_INTERVAL_MS};
use crate::mcp::mrtr::INPUT_REQUESTS;
use crate::mcp::tasks::{status, TASK_ID};

/// The state of one task.
#[derive(Debug, Clone)]
pub(super) struct State {
    pub(super) status: &'static str,
    pub(super) message: Option<String>,
    pub(super) updated_ms: u64,
    /// Input requests not answered yet (while `input_required`).
    pub(super) pending: Map<String, Value>,
    /// Answers received for the current round.
    pub(super) answers: Map<String, Value>,
    pub(super) result: Option<Value>,
    pub(super) error: Option<Value>,
}

/// One task.
pub(crate) struct Entry {
    pub id: String,
    pub(super) principal: String,
    created_ms: u64,
    ttl_ms: u64,
    /// Whether this task is in a store (false: a task-supporting tool run inline for a client
    /// without the extension; it cannot ask for input).
    pub(super) stored: bool,
    state: Mutex<State>,
    /// Poked on every change a job waits for (answers, cancel).
    pub(super) poke: watch::Sender<()>,
}

pub(super) fn is_terminal(s: &str) -> bool {
    matches!(s, status::COMPLETED | status::FAILED | status::CANCELLED)
}

impl Entry {
    pub(super) fn new(id: String, principal: String, now: u64, ttl_ms: u64) -> Self {
        Entry {
            id,
            principal,
            created_ms: now,
            ttl_ms,
            stored: true,
            state: Mutex::new(State {
                status: status::WORKING,
                message: None,
                updated_ms: now,
                pending: Map::new(),
                answers: Map::new(),
                result: None,
                error: None,
            }),
            poke: watch::channel(()).0,
        }
    }

    /// A task that is never stored: for running a task-supporting tool inline.
    pub(crate) fn detached() -> Arc<Entry> {
        let mut e = Entry::new(String::new(), String::new(), now_ms(), 0);
        e.stored = false;
        Arc::new(e)
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn expired(&self, now: u64) -> bool {
        now >= self.created_ms.saturating_add(self.ttl_ms)
    }

    pub(crate) fn status(&self) -> &'static str {
        self.lock().status
    }

    /// Change the state (unless the task is already terminal) and wake the job.
    pub(super) fn change(&self, f: impl FnOnce(&mut State)) -> bool {
        let mut st = self.lock();
        if is_terminal(st.status) {
            return false;
        }
        f(&mut st);
        st.updated_ms = now_ms().max(st.updated_ms);
        drop(st);
        self.poke.send_replace(());
        true
    }

    /// Cancel the task if it is not terminal yet. Returns whether this call cancelled it.
    pub(crate) fn cancel(&self) -> bool {
        self.change(|st| {
            st.status = status::CANCELLED;
            st.message = Some("Cancelled by the client".into());
            st.pending.clear();
        })
    }

    /// Take the answers to pending input requests; keys that are not pending are ignored.
    /// Returns how many were pending.
    pub(crate) fn answer(&self, responses: &Map<String, Value>) -> usize {
        let mut taken = 0;
        self.change(|st| {
            for (k, v) in responses {
                if st.pending.remove(k).is_some() {
                    st.answers.insert(k.clone(), v.clone());
                    taken += 1;
                }
            }
        });
        taken
    }

    pub(crate) fn complete(&self, result: Value) {
        self.change(|st| {
            st.status = status::COMPLETED;
            st.message = None;
            st.result = Some(result);
        });
    }

    pub(crate) fn fail(&self, code: i32, message: String) {
        self.change(|st| {
            st.status = status::FAILED;
            st.message = Some(message.clone());
            st.error = Some(json!({ "code": code, "message": message }));
        });
    }

    /// The `Task` members: id, status, times, TTL and poll interval.
    fn task_fields(&self, st: &State) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(TASK_ID.into(), Value::String(self.id.clone()));
        m.insert("status".into(), Value::String(st.status.into()));
        if let Some(msg) = &st.message {
            m.insert("statusMessage".into(), Value::String(msg.clone()));
        }
        m.insert("createdAt".into(), Value::String(iso_ms(self.created_ms)));
        m.insert("lastUpdatedAt".into(), Value::String(iso_ms(st.updated_ms)));
        m.insert("ttlMs".into(), Value::from(self.ttl_ms));
        m.insert("pollIntervalMs".into(), Value::from(POLL_INTERVAL_MS));
        m
    }

    /// The `CreateTaskResult` members (without `resultType` and `_meta`).
    pub(crate) fn created(&self) -> Value {
        Value::Object(self.task_fields(&self.lock()))
    }

    /// The `DetailedTask` of tasks/get: the task, plus `inputRequests` while input is
    /// required, the inlined `result` once completed or `error` once failed.
    pub(crate) fn detailed(&self) -> Value {
        let st = self.lock();
        let mut m = self.task_fields(&st);
        if st.status == status::INPUT_REQUIRED {
            m.insert(INPUT_REQUESTS.into(), Value::Object(st.pending.clone()));
        }
        if let Some(r) = &st.result {
            m.insert("result".into(), r.clone());
        }
        if let Some(e) = &st.error {
            m.insert("error".into(), e.clone());
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::tasks::{TaskStore, DEFAULT_TTL};
    use crate::mcp::mrtr::INPUT_REQUESTS;
    use serde_json::json;

    #[test]
    fn terminal_states_stick_and_wire_shapes() {
        let store = TaskStore::new(DEFAULT_TTL);
        let t = store.create("a", "0123456789abcdef").unwrap();
        let c = t.created();
        assert_eq!(c["status"], "working");
        assert_eq!(c["ttlMs"], 600_000);
        assert!(c["createdAt"].as_str().unwrap().ends_with('Z'));
        assert!(c.get("result").is_none() && c.get("ttl").is_none());
        t.complete(json!({"content": []}));
        assert!(!t.cancel(), "a completed task is not cancelled");
        let d = t.detailed();
        assert_eq!(d["status"], "completed");
        assert_eq!(d["result"], json!({"content": []}));
        assert!(d.get("error").is_none() && d.get(INPUT_REQUESTS).is_none());
    }
}
