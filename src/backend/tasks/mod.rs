//! The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) in the reference backend:
//! the task store of one pool and the handle a running job uses.
//!
//! A task belongs to the principal that created it (the same principal the sealed
//! `requestState` binds) and lives in the memory of the pool that created it, until its
//! `ttlMs` (counted from creation) runs out. Its id carries the owner hint of the instance
//! that created it ([`crate::mcp::tasks::owner_hint`]), so a gateway can send later
//! `tasks/*` requests to that instance.
//!
//! - [`TaskStore`]: create, find (by id and principal), expire;
//! - [`Entry`]: one task's state and its wire shapes (`CreateTaskResult`, `DetailedTask`);
//! - [`TaskCtx`]: what a running job sees: sleep (ended by a cancel), ask the client for
//!   input (`input_required` until `tasks/update` answered every key), report progress;
//! - [`jobs`]: what the task-supporting tools do; [`serve`]: the `tasks/*` methods.

pub mod jobs;
pub mod serve;

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

use crate::mcp::mrtr::INPUT_REQUESTS;
use crate::mcp::tasks::{mint_task_id, status, TASK_ID};

/// How often clients are asked to poll.
pub const POLL_INTERVAL_MS: u64 = 500;
/// Default task lifetime (`--task-ttl`).
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// Most tasks one pool keeps at once (live or finished, until they expire).
pub const MAX_TASKS: usize = 10_000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// RFC 3339 UTC with milliseconds, as the spec's `createdAt` / `lastUpdatedAt`.
pub fn iso_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The tasks of one pool.
pub struct TaskStore {
    tasks: Mutex<HashMap<String, Arc<Entry>>>,
    ttl: Duration,
    max: usize,
}

impl TaskStore {
    pub fn new(ttl: Duration) -> Self {
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

    /// A new `working` task for `principal`, of `tool`, with an id carrying `hint`. Refused
    /// (with a message) when the store is full of unexpired tasks.
    pub fn create(&self, principal: &str, tool: &str, hint: &str) -> Result<Arc<Entry>, String> {
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
            tool.to_owned(),
            now,
            self.ttl.as_millis() as u64,
        ));
        tasks.insert(entry.id.clone(), entry.clone());
        Ok(entry)
    }

    /// The task `id` of `principal`: `None` when it does not exist, has expired or belongs to
    /// another principal (the three are not told apart, so ids of others cannot be probed).
    pub fn find(&self, id: &str, principal: &str) -> Option<Arc<Entry>> {
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

    pub fn len(&self) -> usize {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The state of one task.
#[derive(Debug, Clone)]
struct State {
    status: &'static str,
    message: Option<String>,
    updated_ms: u64,
    /// Input requests not answered yet (while `input_required`).
    pending: Map<String, Value>,
    /// Answers received for the current round.
    answers: Map<String, Value>,
    result: Option<Value>,
    error: Option<Value>,
}

/// One task.
pub struct Entry {
    pub id: String,
    principal: String,
    pub tool: String,
    created_ms: u64,
    ttl_ms: u64,
    /// Whether this task is in a store (false: a task-supporting tool run inline for a client
    /// without the extension; it cannot ask for input).
    stored: bool,
    state: Mutex<State>,
    /// Poked on every change a job waits for (answers, cancel).
    poke: watch::Sender<()>,
}

fn is_terminal(s: &str) -> bool {
    matches!(s, status::COMPLETED | status::FAILED | status::CANCELLED)
}

impl Entry {
    fn new(id: String, principal: String, tool: String, now: u64, ttl_ms: u64) -> Self {
        Entry {
            id,
            principal,
            tool,
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
    pub fn detached(tool: &str) -> Arc<Entry> {
        let mut e = Entry::new(String::new(), String::new(), tool.to_owned(), now_ms(), 0);
        e.stored = false;
        Arc::new(e)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn expired(&self, now: u64) -> bool {
        now >= self.created_ms.saturating_add(self.ttl_ms)
    }

    pub fn status(&self) -> &'static str {
        self.lock().status
    }

    /// Change the state (unless the task is already terminal) and wake the job.
    fn change(&self, f: impl FnOnce(&mut State)) -> bool {
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
    pub fn cancel(&self) -> bool {
        self.change(|st| {
            st.status = status::CANCELLED;
            st.message = Some("Cancelled by the client".into());
            st.pending.clear();
        })
    }

    /// Take the answers to pending input requests; keys that are not pending are ignored.
    /// Returns how many were pending.
    pub fn answer(&self, responses: &Map<String, Value>) -> usize {
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

    pub fn complete(&self, result: Value) {
        self.change(|st| {
            st.status = status::COMPLETED;
            st.message = None;
            st.result = Some(result);
        });
    }

    pub fn fail(&self, code: i32, message: String) {
        self.change(|st| {
            st.status = status::FAILED;
            st.message = Some(message.clone());
            st.error = Some(json!({ "code": code, "message": message }));
        });
    }

    /// The task's inlined result or error, once terminal: for answering an inline run.
    pub fn outcome(&self) -> Option<Result<Value, Value>> {
        let st = self.lock();
        match st.status {
            status::COMPLETED => st.result.clone().map(Ok),
            status::FAILED => st.error.clone().map(Err),
            _ => None,
        }
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
    pub fn created(&self) -> Value {
        Value::Object(self.task_fields(&self.lock()))
    }

    /// The `DetailedTask` of tasks/get: the task, plus `inputRequests` while input is
    /// required, the inlined `result` once completed or `error` once failed.
    pub fn detailed(&self) -> Value {
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

/// Why a job stops early.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// The task was cancelled (or expired).
    Cancelled,
    /// The job needs the client's input, and it runs inline (the client did not negotiate the
    /// extension).
    NoInput,
}

/// What a running job sees of its task.
pub struct TaskCtx {
    pub entry: Arc<Entry>,
    rx: watch::Receiver<()>,
}

impl TaskCtx {
    pub fn new(entry: Arc<Entry>) -> Self {
        let rx = entry.poke.subscribe();
        TaskCtx { entry, rx }
    }

    fn check(&self) -> Result<(), Stop> {
        if self.entry.status() == status::CANCELLED {
            Err(Stop::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Wait `d`, or stop when the task is cancelled meanwhile.
    pub async fn sleep(&mut self, d: Duration) -> Result<(), Stop> {
        let deadline = tokio::time::Instant::now() + d;
        loop {
            self.check()?;
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return self.check(),
                r = self.rx.changed() => if r.is_err() { return Err(Stop::Cancelled) },
            }
        }
    }

    /// Report progress in `statusMessage`.
    pub fn progress(&self, message: String) {
        self.entry.change(|st| st.message = Some(message));
    }

    /// Ask the client: the task is `input_required` with `requests` until `tasks/update`
    /// answered every key; returns the answers by key.
    pub async fn ask(&mut self, requests: Map<String, Value>) -> Result<Map<String, Value>, Stop> {
        if !self.entry.stored {
            return Err(Stop::NoInput);
        }
        let keys: Vec<String> = requests.keys().cloned().collect();
        self.entry.change(|st| {
            st.status = status::INPUT_REQUIRED;
            st.message = Some("Waiting for the client's input (tasks/update)".into());
            st.answers.clear();
            st.pending = requests;
        });
        loop {
            self.check()?;
            {
                let mut st = self.entry.lock();
                if st.status == status::INPUT_REQUIRED && st.pending.is_empty() {
                    let answers = std::mem::take(&mut st.answers);
                    if keys.iter().all(|k| answers.contains_key(k)) {
                        st.status = status::WORKING;
                        st.message = None;
                        st.updated_ms = now_ms().max(st.updated_ms);
                        return Ok(answers);
                    }
                    st.answers = answers;
                }
            }
            if self.rx.changed().await.is_err() {
                return Err(Stop::Cancelled);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_belong_to_their_principal_and_expire() {
        let store = TaskStore::new(Duration::from_millis(50));
        let t = store
            .create("alice", "slow_compute", "0123456789abcdef")
            .unwrap();
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
        store.create("a", "t", "0123456789abcdef").unwrap();
        store.create("a", "t", "0123456789abcdef").unwrap();
        assert!(store.create("a", "t", "0123456789abcdef").is_err());
        std::thread::sleep(Duration::from_millis(60));
        assert!(store.create("a", "t", "0123456789abcdef").is_ok());
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn terminal_states_stick_and_wire_shapes() {
        let store = TaskStore::new(DEFAULT_TTL);
        let t = store.create("a", "t", "0123456789abcdef").unwrap();
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

    #[tokio::test]
    async fn ask_waits_for_every_key_and_cancel_stops_sleep() {
        let store = TaskStore::new(DEFAULT_TTL);
        let t = store.create("a", "t", "0123456789abcdef").unwrap();
        let mut ctx = TaskCtx::new(t.clone());
        let reqs: Map<String, Value> =
            serde_json::from_value(json!({"k1": {"method": "x"}, "k2": {"method": "y"}})).unwrap();
        let job = tokio::spawn(async move { ctx.ask(reqs).await });
        while t.status() != status::INPUT_REQUIRED {
            tokio::task::yield_now().await;
        }
        let one: Map<String, Value> =
            serde_json::from_value(json!({"k1": {"a": 1}, "zz": {}})).unwrap();
        assert_eq!(t.answer(&one), 1, "unknown keys are ignored");
        let d = t.detailed();
        assert_eq!(d["status"], "input_required");
        assert!(d[INPUT_REQUESTS].get("k1").is_none() && d[INPUT_REQUESTS].get("k2").is_some());
        let two: Map<String, Value> = serde_json::from_value(json!({"k2": {"b": 2}})).unwrap();
        t.answer(&two);
        let got = job.await.unwrap().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(t.status(), status::WORKING);

        let mut ctx = TaskCtx::new(t.clone());
        let sleeper = tokio::spawn(async move { ctx.sleep(Duration::from_secs(60)).await });
        tokio::task::yield_now().await;
        assert!(t.cancel());
        let r = tokio::time::timeout(Duration::from_secs(10), sleeper)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r, Err(Stop::Cancelled));
    }
}
