//! What a running job sees of its task ([`TaskCtx`]): sleep (ended by a cancel), ask the client
//! for input (`input_required` until `tasks/update` answered every key), report progress; and
//! why a job stops early ([`Stop`]).

use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

use super::{now_ms, Entry};
use crate::mcp::tasks::status;

/// Why a job stops early.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The task was cancelled (or expired).
    Cancelled,
    /// The job needs the client's input, and it runs inline (the client did not negotiate the
    /// extension).
    NoInput,
}

/// What a running job sees of its task.
pub(crate) struct TaskCtx {
    pub entry: Arc<Entry>,
    rx: watch::Receiver<()>,
}

impl TaskCtx {
    pub(crate) fn new(entry: Arc<Entry>) -> Self {
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
    pub(crate) async fn sleep(&mut self, d: Duration) -> Result<(), Stop> {
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
    pub(crate) fn progress(&self, message: String) {
        self.entry.change(|st| st.message = Some(message));
    }

    /// Ask the client: the task is `input_required` with `requests` until `tasks/update`
    /// answered every key; returns the answers by key.
    pub(crate) async fn ask(
        &mut self,
        requests: Map<String, Value>,
    ) -> Result<Map<String, Value>, Stop> {
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
    use crate::backend::tasks::{TaskStore, DEFAULT_TTL};
    use crate::mcp::mrtr::INPUT_REQUESTS;
    use crate::mcp::tasks::status;
    use serde_json::{json, Map, Value};
    use std::time::Duration;

    #[tokio::test]
    async fn ask_waits_for_every_key_and_cancel_stops_sleep() {
        let store = TaskStore::new(DEFAULT_TTL);
        let t = store.create("a", "0123456789abcdef").unwrap();
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
