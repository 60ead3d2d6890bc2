//! Calls waiting for a 2025-era client's answers, on this replica, and the ids of the questions
//! they asked.
//!
//! When the fleet answers a legacy client's call with `input_required`, the bridge asks the
//! client each input request as a server-initiated request on the call's own response stream.
//! The id of that request is a sealed token ([`AnswerId`]) naming the replica that holds the
//! stream, the waiting call and the question's key, bound to the session. The client POSTs its
//! answer with its session id to whichever replica its load balancer picks; that replica opens
//! the id and either hands the answer to the waiting call ([`Waiting::deliver`]) or, when
//! another replica holds the stream, sends the same POST on to it (`super::answers`). No shared
//! store: the id itself says where to go, and only a gateway holding the keys could have
//! written it.
//!
//! Bounded: at most `legacy.max_waiting` calls wait at once; each waits at most
//! `legacy.answer_timeout`, and is removed when it ends, whatever ended it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::mpsc;

use crate::mcp::seal::{now_ms, SealError, Sealer};

/// The token kind of a sealed answer id.
const KIND: &str = "ea1";
const MAX_LEN: usize = 1024;

/// What a question's id says.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct AnswerId {
    /// The replica that holds the call's stream (`legacy.advertise`).
    #[serde(rename = "r")]
    pub replica: String,
    /// The waiting call on that replica.
    #[serde(rename = "f")]
    pub call: u64,
    /// The key of the input request in the fleet's `inputRequests`.
    #[serde(rename = "k")]
    pub key: String,
    /// The session's nonce.
    #[serde(rename = "s")]
    pub session: String,
    /// Expiry, milliseconds since the Unix epoch.
    #[serde(rename = "e")]
    pub expires_at_ms: u64,
}

impl AnswerId {
    pub(crate) fn seal(&self, sealer: &Sealer) -> String {
        sealer.seal(KIND, self)
    }

    pub(crate) fn open(sealer: &Sealer, text: &str) -> Result<AnswerId, SealError> {
        sealer.open(KIND, text, MAX_LEN)
    }

    pub(crate) fn expired(&self) -> bool {
        now_ms() >= self.expires_at_ms
    }
}

/// What reaches a waiting call.
#[derive(Debug)]
pub(crate) enum Event {
    /// The client's answer to the question `key`: its `result`, or its `error`.
    Answer {
        key: String,
        answer: Result<Value, Value>,
    },
    /// The client cancelled the call (`notifications/cancelled`) or closed its session.
    Cancelled,
}

struct Slot {
    session: String,
    /// The client's JSON-RPC id of the call, as JSON text (for `notifications/cancelled`).
    request: String,
    tx: mpsc::UnboundedSender<Event>,
}

/// The calls waiting on this replica (carried over reloads).
#[derive(Default)]
pub(crate) struct Waiting {
    calls: Mutex<HashMap<u64, Slot>>,
}

/// Why an answer was not handed over.
#[derive(Debug, PartialEq)]
pub(crate) enum Undelivered {
    /// No call with that number waits here (it ended: answered, timed out, cancelled).
    NotWaiting,
    /// The call belongs to another session.
    OtherSession,
}

/// A registered waiting call; dropping it removes the call.
pub(crate) struct Registration<'a> {
    waiting: &'a Waiting,
    /// Set to the number of waiting calls whenever it changes.
    gauge: Option<prometheus::IntGauge>,
    pub id: u64,
    pub rx: mpsc::UnboundedReceiver<Event>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut calls = self.waiting.calls.lock().expect("waiting lock");
        calls.remove(&self.id);
        if let Some(g) = &self.gauge {
            g.set(calls.len() as i64);
        }
    }
}

impl Waiting {
    /// Register a call of `session` (the client's request id `request`); `None` when `max`
    /// calls already wait.
    pub(crate) fn register(
        &self,
        session: &str,
        request: String,
        max: usize,
        gauge: Option<prometheus::IntGauge>,
    ) -> Option<Registration<'_>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut calls = self.calls.lock().expect("waiting lock");
        if calls.len() >= max {
            return None;
        }
        let id = loop {
            let id = rand::random::<u64>();
            if !calls.contains_key(&id) {
                break id;
            }
        };
        calls.insert(
            id,
            Slot {
                session: session.to_owned(),
                request,
                tx,
            },
        );
        if let Some(g) = &gauge {
            g.set(calls.len() as i64);
        }
        Some(Registration {
            waiting: self,
            gauge,
            id,
            rx,
        })
    }

    /// Hand `event` to call `id` of `session`.
    pub(crate) fn deliver(&self, id: u64, session: &str, event: Event) -> Result<(), Undelivered> {
        let calls = self.calls.lock().expect("waiting lock");
        let slot = calls.get(&id).ok_or(Undelivered::NotWaiting)?;
        if slot.session != session {
            return Err(Undelivered::OtherSession);
        }
        slot.tx.send(event).map_err(|_| Undelivered::NotWaiting)
    }

    /// Cancel the calls of `session` (those with the client request id `request`, or all);
    /// how many were cancelled.
    pub(crate) fn cancel(&self, session: &str, request: Option<&str>) -> usize {
        let calls = self.calls.lock().expect("waiting lock");
        calls
            .values()
            .filter(|s| s.session == session && request.is_none_or(|r| r == s.request))
            .filter(|s| s.tx.send(Event::Cancelled).is_ok())
            .count()
    }

    /// How many calls wait now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.calls.lock().expect("waiting lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::seal::StateKeys;
    use serde_json::json;

    #[test]
    fn an_answer_reaches_its_call_of_its_session_and_nothing_outlives_the_call() {
        let w = Waiting::default();
        let mut r = w.register("s1", "7".into(), 10, None).unwrap();
        let ok = Event::Answer {
            key: "a".into(),
            answer: Ok(json!({"action": "accept"})),
        };
        assert_eq!(w.deliver(r.id, "s2", ok), Err(Undelivered::OtherSession));
        let ok = Event::Answer {
            key: "a".into(),
            answer: Ok(json!({"action": "accept"})),
        };
        w.deliver(r.id, "s1", ok).unwrap();
        assert!(matches!(r.rx.try_recv(), Ok(Event::Answer { .. })));
        assert_eq!(w.cancel("s1", Some("8")), 0);
        assert_eq!(w.cancel("s1", Some("7")), 1);
        let id = r.id;
        drop(r);
        assert_eq!(w.len(), 0);
        assert_eq!(
            w.deliver(id, "s1", Event::Cancelled),
            Err(Undelivered::NotWaiting)
        );
    }

    #[test]
    fn waiting_calls_are_bounded() {
        let w = Waiting::default();
        let _a = w.register("s", "1".into(), 1, None).unwrap();
        assert!(w.register("s", "2".into(), 1, None).is_none());
    }

    #[test]
    fn an_answer_id_opens_only_as_one() {
        let sealer = Sealer::new(StateKeys::random());
        let a = AnswerId {
            replica: "http://127.0.0.1:1".into(),
            call: 5,
            key: "k".into(),
            session: "s".into(),
            expires_at_ms: u64::MAX,
        };
        let t = a.seal(&sealer);
        assert_eq!(AnswerId::open(&sealer, &t).unwrap(), a);
        assert!(AnswerId::open(&sealer, "7").is_err());
    }
}
