//! The resources a 2025-era session's client subscribed to (`resources/subscribe`), as this
//! replica knows them. A 2025 server keeps them in its session; a 2026 fleet takes them as the
//! `resourceSubscriptions` of a listen request, so the session's standalone stream asks for
//! them and opens its listen again whenever they change ([`Watch`]). Every replica of
//! `legacy.replicas` is told of each change, so the replica that holds the stream, or the one
//! a reconnecting stream reaches, knows them: soft state, kept per replica, never a shared
//! store.
//!
//! Bounded: at most [`MAX_SESSIONS`] sessions (past it the expired ones go, then the ones no
//! stream here follows) and [`MAX_URIS`] URIs of at most [`MAX_URI_LEN`] bytes per session.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

use super::session::LegacySession;
use crate::mcp::seal::now_ms;
use crate::mcp::{codes, Rejection};

/// Sessions with subscriptions (or a stream that follows them) on one replica, at most.
pub(crate) const MAX_SESSIONS: usize = 4096;
/// URIs one session subscribes to, at most.
pub(crate) const MAX_URIS: usize = 64;
/// Bytes of one subscribed URI, at most.
pub(crate) const MAX_URI_LEN: usize = 2048;

/// A session's subscribed URIs at one moment, and how many changes made them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Uris {
    pub(crate) list: Arc<[String]>,
    pub(crate) version: u64,
}

/// One session's entry: its URIs (watched by its streams here) and the latest version a stream
/// here has asked the fleet for.
struct Entry {
    uris: watch::Sender<Uris>,
    taken: Arc<watch::Sender<u64>>,
    expires_at_ms: u64,
}

/// What a standalone stream follows: its session's URIs as they change, and where it says a
/// version is asked for.
pub(crate) struct Watch {
    pub(crate) uris: watch::Receiver<Uris>,
    taken: Arc<watch::Sender<u64>>,
}

impl Drop for Watch {
    /// A stream that ends asks for nothing more: nobody waits on it.
    fn drop(&mut self) {
        let v = self.uris.borrow().version;
        self.took(v);
    }
}

impl Watch {
    /// The stream's listen now asks for `version` (or the stream ended trying).
    pub(crate) fn took(&self, version: u64) {
        self.taken.send_if_modified(|t| {
            let newer = version > *t;
            *t = (*t).max(version);
            newer
        });
    }
}

/// A change made here: the new version, and, when a stream here follows the session, where it
/// says it asked the fleet for it ([`Subscribed::live`]).
pub(crate) struct Changed {
    pub(crate) version: u64,
    followed: Option<watch::Receiver<u64>>,
}

/// The subscriptions of the sessions on this replica.
#[derive(Default)]
pub(crate) struct Subscribed {
    map: Mutex<HashMap<String, Entry>>,
}

impl Subscribed {
    /// Subscribe session `s` to `uri` (`on`), or unsubscribe it.
    pub(crate) fn change(
        &self,
        s: &LegacySession,
        uri: &str,
        on: bool,
    ) -> Result<Changed, Rejection> {
        if uri.is_empty() || uri.len() > MAX_URI_LEN {
            let msg =
                format!("Invalid params: params.uri must be a URI of 1 to {MAX_URI_LEN} bytes");
            return Err(Rejection::new(
                400,
                codes::INVALID_PARAMS,
                "invalid-params",
                msg,
            ));
        }
        let mut map = self.map.lock().expect("subscriptions lock");
        if !map.contains_key(&s.nonce) && !on {
            return Ok(Changed {
                version: 0,
                followed: None,
            });
        }
        let entry = entry(&mut map, s)?;
        let mut set: BTreeSet<String> = entry.uris.borrow().list.iter().cloned().collect();
        let changed = if on {
            set.insert(uri.to_owned())
        } else {
            set.remove(uri)
        };
        if set.len() > MAX_URIS {
            let msg = format!("This session already subscribes to {MAX_URIS} resources, the most a session may: unsubscribe from one first");
            return Err(Rejection::new(
                400,
                codes::INVALID_PARAMS,
                "too-many-subscriptions",
                msg,
            ));
        }
        if changed {
            entry.uris.send_modify(|u| {
                u.list = set.into_iter().collect();
                u.version += 1;
            });
        }
        let version = entry.uris.borrow().version;
        let followed = (entry.uris.receiver_count() > 0).then(|| entry.taken.subscribe());
        Ok(Changed { version, followed })
    }

    /// What a standalone stream of session `s` opened here follows (`None`: this replica holds
    /// the most sessions it may; the stream then asks for the URIs it starts with only).
    pub(crate) fn follow(&self, s: &LegacySession) -> Option<Watch> {
        let mut map = self.map.lock().expect("subscriptions lock");
        let entry = entry(&mut map, s).ok()?;
        Some(Watch {
            uris: entry.uris.subscribe(),
            taken: entry.taken.clone(),
        })
    }

    /// Session `s` ended (`DELETE`): its subscriptions go.
    pub(crate) fn end(&self, s: &LegacySession) {
        self.map
            .lock()
            .expect("subscriptions lock")
            .remove(&s.nonce);
    }

    /// Sessions with an entry here now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.lock().expect("subscriptions lock").len()
    }

    /// Wait (at most `within`) until every stream here that follows the change asks the fleet
    /// for it, or none follows it any more: a client that subscribes and then changes the
    /// resource hears of the change.
    pub(crate) async fn live(changed: Changed, within: std::time::Duration) {
        let Some(mut taken) = changed.followed else {
            return;
        };
        let v = changed.version;
        // An error: every stream went (the entry's sender too): nothing is left to wait for.
        let _ = tokio::time::timeout(within, taken.wait_for(|t| *t >= v)).await;
    }
}

/// Session `s`'s entry, made when it has none; `Err` when this replica holds the most it may.
fn entry<'a>(
    map: &'a mut HashMap<String, Entry>,
    s: &LegacySession,
) -> Result<&'a mut Entry, Rejection> {
    if !map.contains_key(&s.nonce) && map.len() >= MAX_SESSIONS {
        let now = now_ms();
        map.retain(|_, e| e.expires_at_ms > now);
        if map.len() >= MAX_SESSIONS {
            // Sessions no stream here follows: their own stream's replica keeps them too.
            map.retain(|_, e| e.uris.receiver_count() > 0);
        }
        if map.len() >= MAX_SESSIONS {
            let msg = format!("This replica follows the resource subscriptions of {MAX_SESSIONS} sessions, the most it may: retry later");
            return Err(Rejection::new(
                503,
                codes::GATEWAY_OVERLOADED,
                "legacy-subscriptions-full",
                msg,
            ));
        }
    }
    Ok(map.entry(s.nonce.clone()).or_insert_with(|| Entry {
        uris: watch::Sender::new(Uris::default()),
        taken: Arc::new(watch::Sender::new(0)),
        expires_at_ms: s.expires_at_ms,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new session (its own random nonce) for a minute; `_n` names it in the test only.
    fn session(_n: &str) -> LegacySession {
        let (caps, info) = (serde_json::json!({}), serde_json::json!({}));
        LegacySession::open("2025-11-25", caps, info, "c".into(), "/mcp", 60_000)
    }

    #[test]
    fn subscriptions_change_the_uris_a_stream_follows() {
        let subs = Subscribed::default();
        let s = session("a");
        let w = subs.follow(&s).unwrap();
        let c = subs.change(&s, "charges://c1", true).unwrap();
        assert_eq!(c.version, 1);
        assert!(c.followed.is_some(), "a stream here follows the session");
        // The same URI again changes nothing; another one does.
        assert_eq!(subs.change(&s, "charges://c1", true).unwrap().version, 1);
        subs.change(&s, "charges://c2", true).unwrap();
        assert_eq!(&*w.uris.borrow().list, ["charges://c1", "charges://c2"]);
        subs.change(&s, "charges://c1", false).unwrap();
        assert_eq!(&*w.uris.borrow().list, ["charges://c2"]);
        assert_eq!(w.uris.borrow().version, 3);
        // Another session's are its own.
        assert!(subs
            .follow(&session("b"))
            .unwrap()
            .uris
            .borrow()
            .list
            .is_empty());
        subs.end(&s);
        assert_eq!(subs.len(), 1);
    }

    #[test]
    fn uris_are_bounded_in_length_and_number() {
        let subs = Subscribed::default();
        let s = session("a");
        let long = format!("x://{}", "a".repeat(MAX_URI_LEN));
        assert_eq!(
            subs.change(&s, &long, true).err().unwrap().code,
            codes::INVALID_PARAMS
        );
        assert!(subs.change(&s, "", true).is_err());
        for i in 0..MAX_URIS {
            subs.change(&s, &format!("x://{i}"), true).unwrap();
        }
        let e = subs.change(&s, "x://one-more", true).err().unwrap();
        assert!(e.message.contains("unsubscribe"), "{}", e.message);
        // Unsubscribing from what was never subscribed is no error, and keeps no entry.
        let t = session("t");
        assert_eq!(subs.change(&t, "x://0", false).unwrap().version, 0);
        assert_eq!(subs.len(), 1);
    }

    #[test]
    fn a_full_replica_drops_unfollowed_sessions_first_then_refuses() {
        let subs = Subscribed::default();
        let mut followed = Vec::new();
        for i in 0..MAX_SESSIONS {
            let s = session(&format!("s{i}"));
            if i % 2 == 0 {
                followed.push(subs.follow(&s).unwrap());
            } else {
                subs.change(&s, "x://u", true).unwrap();
            }
        }
        // Full: the sessions no stream here follows go.
        subs.change(&session("new"), "x://u", true).unwrap();
        assert_eq!(subs.len(), MAX_SESSIONS / 2 + 1);
        for i in 0..MAX_SESSIONS / 2 {
            followed.push(subs.follow(&session(&format!("more{i}"))).unwrap());
        }
        assert_eq!(
            subs.len(),
            MAX_SESSIONS,
            "the last one took the unfollowed one's place"
        );
        // Every session followed by a stream here: a new one is refused, for a stream too.
        let e = subs.change(&session("late"), "x://u", true).err().unwrap();
        assert_eq!(e.code, codes::GATEWAY_OVERLOADED);
        assert!(subs.follow(&session("late")).is_none());
        drop(followed);
        subs.change(&session("late"), "x://u", true).unwrap();
    }

    #[tokio::test]
    async fn a_change_is_live_once_the_stream_took_it_or_went() {
        let subs = Subscribed::default();
        let s = session("a");
        let w = subs.follow(&s).unwrap();
        let c = subs.change(&s, "x://1", true).unwrap();
        let v = c.version;
        let waiting = tokio::spawn(Subscribed::live(c, std::time::Duration::from_secs(30)));
        w.took(v);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("live once taken")
            .unwrap();
        // A stream that goes holds nobody up.
        let c = subs.change(&s, "x://2", true).unwrap();
        let waiting = tokio::spawn(Subscribed::live(c, std::time::Duration::from_secs(30)));
        drop(w);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("live once the stream went")
            .unwrap();
        // Nobody follows: live at once.
        let c = subs.change(&session("b"), "x://1", true).unwrap();
        assert!(c.followed.is_none());
        Subscribed::live(c, std::time::Duration::from_secs(30)).await;
    }
}
