//! What the gateway keeps for 2025-era *servers* (a pool with `era: 2025-...`): the sessions it
//! holds with each instance, per caller, and the calls it paused when a server asked its client
//! something mid-call.
//!
//! - A session is per (pool, instance, caller): a legacy server may bind state to a session, so
//!   two callers never share one. Bounded in number (the least recently used goes first) and
//!   expired when idle; what is dropped is handed back so the caller can `DELETE` it.
//! - A paused call holds the upstream's open response stream, waiting for the client's retry
//!   (`input_required` → a new 2026 request carrying the answers and the sealed state). Bounded
//!   in number; a call not resumed within its timeout is taken out by its timer (and the server
//!   told it was cancelled, by the step that armed the timer).
//!
//! The sealed state that names a paused call ([`PausedState`]) says which replica holds it.

use crate::mcp::seal::{now_ms, SealError, Sealer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Who holds a session: the pool, the instance, the caller (digest).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SessionKey {
    pub pool: String,
    pub addr: SocketAddr,
    pub caller: String,
}

/// The requests a server sends on a session's standalone stream (`GET`) rather than on the
/// response stream of the call they belong to (the Python SDK 1.x sends `roots/list` there): a
/// call of that session reading its own stream takes them as its own questions.
pub(crate) type SideRequests =
    std::sync::Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Value>>>;

/// A session the gateway holds with a legacy instance.
#[derive(Clone)]
pub(crate) struct ServerSession {
    pub id: String,
    /// The server's `initialize` result (shared: a session is cloned out for each request).
    pub init: std::sync::Arc<Value>,
    pub side: Option<SideRequests>,
    /// The notifications of the session's standalone stream (list changes, resource updates),
    /// for the 2026 clients listening through it (`None`: the session has no standalone
    /// stream reader).
    pub notes: Option<Notes>,
    used: Instant,
}

/// The notifications a session's standalone stream carries, to every listener.
pub(crate) type Notes = tokio::sync::broadcast::Sender<Value>;

/// The sessions with legacy instances.
pub(crate) struct ServerSessions {
    map: Mutex<HashMap<SessionKey, ServerSession>>,
    max: usize,
    idle: Duration,
    /// The sessions being opened now, one turn each: requests that find no session wait for
    /// the one opening it rather than each opening their own.
    opening: Mutex<HashMap<SessionKey, std::sync::Arc<tokio::sync::Mutex<()>>>>,
}

impl ServerSessions {
    pub(crate) fn new(max: usize, idle: Duration) -> Self {
        ServerSessions {
            map: Mutex::default(),
            max,
            idle,
            opening: Mutex::default(),
        }
    }

    /// The turn to open the session of `key`: whoever holds it opens the session; the others
    /// wait, then find it held ([`ServerSessions::opened`] when done).
    pub(crate) fn turn(&self, key: &SessionKey) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        let mut o = self.opening.lock().expect("opening lock");
        o.entry(key.clone()).or_default().clone()
    }

    /// The session of `key` is open (or failed to open): its turn is no longer needed by
    /// requests arriving from now on (those waiting still hold it).
    pub(crate) fn opened(&self, key: &SessionKey) {
        self.opening.lock().expect("opening lock").remove(key);
    }

    /// The live session of `key`, if one is held (and marks it used). An idle one is not
    /// used again; it stays to be handed back for `DELETE` ([`ServerSessions::put`],
    /// [`ServerSessions::idle`]).
    pub(crate) fn get(&self, key: &SessionKey) -> Option<ServerSession> {
        let mut m = self.map.lock().expect("sessions lock");
        let s = m.get_mut(key)?;
        if s.used.elapsed() > self.idle {
            return None;
        }
        s.used = Instant::now();
        Some(s.clone())
    }

    /// Take out the sessions unused for the idle time, to `DELETE`.
    pub(crate) fn idle(&self) -> Vec<(SessionKey, String)> {
        let mut m = self.map.lock().expect("sessions lock");
        let idle = self.idle;
        let gone: Vec<SessionKey> = m
            .iter()
            .filter(|(_, s)| s.used.elapsed() > idle)
            .map(|(k, _)| k.clone())
            .collect();
        gone.into_iter()
            .filter_map(|k| m.remove(&k).map(|s| (k, s.id)))
            .collect()
    }

    /// Take out every session (the gateway stops), to `DELETE`.
    pub(crate) fn drain(&self) -> Vec<(SessionKey, String)> {
        let mut m = self.map.lock().expect("sessions lock");
        m.drain().map(|(k, s)| (k, s.id)).collect()
    }

    /// Keep a new session; the sessions dropped to make room or for being idle, to `DELETE`.
    pub(crate) fn put(
        &self,
        key: SessionKey,
        id: String,
        init: Value,
        (side, notes): (Option<SideRequests>, Option<Notes>),
    ) -> Vec<(SessionKey, String)> {
        let mut m = self.map.lock().expect("sessions lock");
        let idle = self.idle;
        let mut gone: Vec<(SessionKey, String)> = Vec::new();
        m.retain(|k, s| {
            let keep = s.used.elapsed() <= idle;
            if !keep {
                gone.push((k.clone(), s.id.clone()));
            }
            keep
        });
        while m.len() >= self.max {
            let oldest = m.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| k.clone());
            let Some(k) = oldest else { break };
            if let Some(s) = m.remove(&k) {
                gone.push((k, s.id));
            }
        }
        m.insert(
            key,
            ServerSession {
                id,
                init: std::sync::Arc::new(init),
                side,
                notes,
                used: Instant::now(),
            },
        );
        gone
    }

    /// Forget `key`'s session if it is still `id` (the server said it is gone).
    pub(crate) fn forget(&self, key: &SessionKey, id: &str) {
        let mut m = self.map.lock().expect("sessions lock");
        if m.get(key).is_some_and(|s| s.id == id) {
            m.remove(key);
        }
    }

    /// How many sessions are held.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().expect("sessions lock").len()
    }
}

/// A call the server paused by asking its client something.
pub(crate) struct PausedCall {
    /// The upstream's response stream, read up to the question(s).
    pub stream: super::messages::Messages,
    pub key: SessionKey,
    pub session_id: String,
    /// The session's standalone-stream requests, read beside the call's own stream.
    pub side: Option<SideRequests>,
    /// The upstream path the call was POSTed to.
    pub path: String,
    /// The JSON-RPC id the gateway gave the call upstream.
    pub upstream_id: Value,
    /// The questions asked and not answered yet: the `inputRequests` key → the server's
    /// request id and the question itself (asked again if the retry lacks its answer).
    pub pending: Vec<(String, Value, Value)>,
    /// Events read past the question(s), not yet handled.
    pub backlog: Vec<Value>,
    /// Questions asked so far in this call.
    pub rounds: u32,
}

/// The paused calls of this replica.
#[derive(Default)]
pub(crate) struct PausedCalls {
    map: Mutex<HashMap<u64, PausedCall>>,
}

impl PausedCalls {
    /// Park `call` (`Err(call)` back when `max` calls are already paused); its number.
    pub(crate) fn park(&self, call: PausedCall, max: usize) -> Result<u64, Box<PausedCall>> {
        let mut m = self.map.lock().expect("paused lock");
        if m.len() >= max {
            return Err(Box::new(call));
        }
        let id = loop {
            let id = rand::random::<u64>();
            if !m.contains_key(&id) {
                break id;
            }
        };
        m.insert(id, call);
        Ok(id)
    }

    /// Take call `id` out (to resume it, or because its time is up).
    pub(crate) fn take(&self, id: u64) -> Option<PausedCall> {
        self.map.lock().expect("paused lock").remove(&id)
    }

    pub(crate) fn len(&self) -> usize {
        self.map.lock().expect("paused lock").len()
    }
}

/// The token kind of the `requestState` that names a paused call.
const KIND: &str = "elr1";
const MAX_LEN: usize = 2048;

/// What the sealed `requestState` of a paused call says.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct PausedState {
    /// The replica that holds the call (`legacy.advertise`).
    #[serde(rename = "r")]
    pub replica: String,
    #[serde(rename = "c")]
    pub call: u64,
    /// The caller it was issued to.
    #[serde(rename = "w")]
    pub caller: String,
    /// Digest of the method, name and arguments of the call.
    #[serde(rename = "d")]
    pub digest: String,
    #[serde(rename = "e")]
    pub expires_at_ms: u64,
}

/// Why a presented state was refused (each answered -32602 before any upstream).
#[derive(Debug, PartialEq)]
pub(crate) enum StateRefused {
    Seal(SealError),
    OtherCaller,
    OtherRequest,
    Expired,
}

impl StateRefused {
    pub(crate) fn message(&self) -> String {
        let why = match self {
            StateRefused::Seal(e) => e.describe("requestState"),
            StateRefused::OtherCaller => "the requestState was issued to another caller".into(),
            StateRefused::OtherRequest => {
                "the requestState was issued for another request (method, name or arguments differ)"
                    .into()
            }
            StateRefused::Expired => "the requestState expired".into(),
        };
        format!("Invalid requestState: {why}; send the request again without requestState and inputResponses")
    }
}

impl PausedState {
    pub(crate) fn is_ours(text: &str) -> bool {
        Sealer::is_kind(KIND, text)
    }

    pub(crate) fn seal(&self, sealer: &Sealer) -> String {
        sealer.seal(KIND, self)
    }

    /// Open `text` and check it belongs to `caller` and this request, now.
    pub(crate) fn verify(
        sealer: &Sealer,
        text: &str,
        caller: &str,
        digest: &str,
    ) -> Result<PausedState, StateRefused> {
        let s: PausedState = sealer
            .open(KIND, text, MAX_LEN)
            .map_err(StateRefused::Seal)?;
        if s.caller != caller {
            return Err(StateRefused::OtherCaller);
        }
        if s.digest != digest {
            return Err(StateRefused::OtherRequest);
        }
        if now_ms() >= s.expires_at_ms {
            return Err(StateRefused::Expired);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::seal::StateKeys;
    use serde_json::json;

    fn key(caller: &str) -> SessionKey {
        SessionKey {
            pool: "p".into(),
            addr: "127.0.0.1:1".parse().unwrap(),
            caller: caller.into(),
        }
    }

    #[test]
    fn sessions_are_per_caller_bounded_and_forgotten_when_gone() {
        let s = ServerSessions::new(2, Duration::from_secs(60));
        assert!(s
            .put(key("a"), "s-a".into(), json!({}), (None, None))
            .is_empty());
        assert!(s
            .put(key("b"), "s-b".into(), json!({}), (None, None))
            .is_empty());
        assert_eq!(s.get(&key("a")).unwrap().id, "s-a");
        let gone = s.put(key("c"), "s-c".into(), json!({}), (None, None));
        assert_eq!(
            gone,
            vec![(key("b"), "s-b".to_string())],
            "the least recently used goes"
        );
        assert!(s.get(&key("b")).is_none());
        s.forget(&key("a"), "other");
        assert!(s.get(&key("a")).is_some());
        s.forget(&key("a"), "s-a");
        assert!(s.get(&key("a")).is_none());
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn idle_sessions_are_handed_back_not_used_and_all_go_at_the_end() {
        let s = ServerSessions::new(10, Duration::from_millis(30));
        s.put(key("a"), "s-a".into(), json!({}), (None, None));
        assert!(s.idle().is_empty());
        std::thread::sleep(Duration::from_millis(60));
        s.put(key("b"), "s-b".into(), json!({}), (None, None));
        // a went idle when b came: handed back by that put, not used again.
        assert!(s.get(&key("a")).is_none());
        std::thread::sleep(Duration::from_millis(60));
        assert!(
            s.get(&key("b")).is_none(),
            "an idle session is not used again"
        );
        assert_eq!(s.idle(), vec![(key("b"), "s-b".to_string())]);
        assert_eq!(s.len(), 0);
        s.put(key("c"), "s-c".into(), json!({}), (None, None));
        assert_eq!(s.drain(), vec![(key("c"), "s-c".to_string())]);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn a_paused_state_opens_for_its_caller_and_request_only() {
        let sealer = Sealer::new(StateKeys::random());
        let st = PausedState {
            replica: "http://r".into(),
            call: 3,
            caller: "alice".into(),
            digest: "d1".into(),
            expires_at_ms: u64::MAX,
        };
        let t = st.seal(&sealer);
        assert!(PausedState::is_ours(&t));
        assert_eq!(PausedState::verify(&sealer, &t, "alice", "d1").unwrap(), st);
        assert_eq!(
            PausedState::verify(&sealer, &t, "bob", "d1"),
            Err(StateRefused::OtherCaller)
        );
        assert_eq!(
            PausedState::verify(&sealer, &t, "alice", "d2"),
            Err(StateRefused::OtherRequest)
        );
        let old = PausedState {
            expires_at_ms: 1,
            ..st
        };
        assert_eq!(
            PausedState::verify(&sealer, &old.seal(&sealer), "alice", "d1"),
            Err(StateRefused::Expired)
        );
        let mut b = t.into_bytes();
        let i = b.len() - 4;
        b[i] = if b[i] == b'A' { b'B' } else { b'A' };
        assert!(matches!(
            PausedState::verify(&sealer, &String::from_utf8(b).unwrap(), "alice", "d1"),
            Err(StateRefused::Seal(_))
        ));
    }
}
