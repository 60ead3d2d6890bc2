//! The bridge's hop carried inside the process: a translated 2026 request enters the gateway's
//! own pipeline as a pingora subrequest (pingora's public `SubrequestSpawner`: an in-memory
//! session whose request and answer travel as `HttpTask`s on two channels), not as a second
//! HTTP exchange on a loopback connection. Every stage still runs, in the order of the one list,
//! with no stage knowing about eras; what goes is the loopback's writes, reads and wake-ups and
//! the second parse of an HTTP head (measured in docs/benchmarks.md, "The protocol bridge").
//! It carries the legs [`super::inline`] cannot run on the client's own session (those that need
//! pingora's pipe) and the session's side requests (`initialize`'s `server/discover`, a
//! `tools/list` read to learn marks).
//!
//! How a leg gets its own head: pingora starts a subrequest from a copy of the client's raw
//! head (the 2025-era request's), so the leg's 2026 head rides in the subrequest's context
//! ([`Head`], which only this module creates: a client cannot send one) and replaces the copy
//! in the pipeline's first phase ([`adopt`]), before anything reads it or the body.
//!
//! What it keeps of the loopback hop's behaviour:
//! - the pipeline sees the client's own address (the subrequest copies the client's
//!   connection digest), so limits keyed on `client_ip` see the client, as through the hop;
//! - a leg dropped before its response (the client left, the call was cancelled) drops both
//!   channels: the pipeline on the other end sees its client leave and drops the upstream
//!   request, so the instance sees the close, as it saw the hop's close;
//! - a leg dropped once its response was handed out, before its stream ended, has the rest
//!   read in the background (at most [`DRAIN`]), so the pipeline ends the request normally
//!   (counted, logged, its upstream connection kept).

use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::HttpTask;
use pingora::proxy::subrequest::{BodyMode, Ctx};
use pingora::proxy::Session;
use std::time::Duration;
use tokio::sync::mpsc;

/// The longest the rest of a stream is read after the leg was dropped.
const DRAIN: Duration = Duration::from_secs(1);

/// A leg's own head, carried to the pipeline's first phase in the subrequest's context.
struct Head(Option<RequestHeader>);

/// Whether this request may start legs inside: a client's request that is no leg itself and
/// may be a 2025-era client's (the only requests that start any).
pub(crate) fn may_spawn(session: &Session) -> bool {
    session.subrequest_ctx.is_none() && super::may_be_legacy(session)
}

/// The pipeline's first phase, on a leg carried inside: its own 2026 head replaces the copy of
/// the client's. Any other request is left as it is.
pub(crate) fn adopt(session: &mut Session) {
    let Some(sub) = session.subrequest_ctx.as_mut() else {
        return;
    };
    let head = sub
        .user_ctx_mut()
        .and_then(|u| u.downcast_mut::<Head>())
        .and_then(|h| h.0.take());
    if let Some(head) = head {
        *session.req_header_mut() = head;
    }
}

/// An answer of a leg carried inside: its head, then its body as the pipeline writes it.
pub(crate) struct Answer {
    pub head: ResponseHeader,
    /// The leg's two channels (`None` once dropped or handed to the background read). The
    /// sender is held: dropping it is what tells the pipeline its client left.
    chan: Option<(mpsc::Sender<HttpTask>, mpsc::Receiver<HttpTask>)>,
    /// The pipeline's error, when it failed the request after its head.
    failed: tokio::sync::oneshot::Receiver<Box<pingora::Error>>,
    ended: bool,
}

/// A leg started inside a client's pipeline, its answer not read yet.
pub(crate) struct Started {
    handle: pingora::protocols::http::subrequest::server::SubrequestHandle,
}

/// Start a leg inside `session`'s own pipeline with `head` and `body` (it runs on a task of its
/// own); `None` when this request cannot start one (it is itself a leg).
pub(crate) fn start(session: &Session, head: RequestHeader, body: Bytes) -> Option<Started> {
    let spawner = session.subrequest_spawner.as_ref()?;
    let ctx = Ctx::builder()
        .body_mode(BodyMode::ExpectBody)
        .user_ctx(Box::new(Head(Some(head))))
        .build();
    let (leg, handle) = spawner.create_subrequest(session.as_downstream(), ctx);
    // A new channel has room: the whole body goes at once.
    handle
        .tx
        .try_send(HttpTask::Body(Some(body), true))
        .expect("a new channel has room for one task");
    tokio::spawn(leg.run());
    Some(Started { handle })
}

impl Started {
    /// The answer's head, read by `deadline`.
    pub(crate) async fn answer(self, deadline: tokio::time::Instant) -> Result<Answer, String> {
        let mut handle = self.handle;
        let first = tokio::time::timeout_at(deadline, handle.rx.recv())
            .await
            .map_err(|_| "no answer from this gateway's pipeline in time".to_string())?;
        let (head, ended) = match first {
            Some(HttpTask::Header(h, end)) => (*h, end),
            Some(HttpTask::Failed(e)) => return Err(format!("the pipeline failed: {e}")),
            Some(_) => return Err("the pipeline answered a body before a head".into()),
            None => return Err("the pipeline ended without an answer".into()),
        };
        Ok(Answer {
            head,
            chan: Some((handle.tx, handle.rx)),
            failed: handle.subreq_proxy_error,
            ended,
        })
    }
}

impl Answer {
    /// The next piece of the body (`None`: it ended).
    pub(crate) async fn next(&mut self) -> Result<Option<Bytes>, String> {
        loop {
            let Some((_, rx)) = self.chan.as_mut().filter(|_| !self.ended) else {
                return Ok(None);
            };
            match rx.recv().await {
                Some(HttpTask::Body(piece, end)) => {
                    self.ended = end;
                    match piece {
                        Some(p) if !p.is_empty() => return Ok(Some(p)),
                        _ => continue,
                    }
                }
                Some(HttpTask::Failed(e)) => return Err(format!("the pipeline failed: {e}")),
                Some(HttpTask::Done) => self.ended = true,
                Some(_) => continue,
                None => {
                    // The pipeline let go of the leg: the end, unless it failed the request.
                    self.ended = true;
                    if let Ok(e) = self.failed.try_recv() {
                        return Err(format!("the pipeline failed mid-answer: {e}"));
                    }
                }
            }
        }
    }

    /// The leg is dropped: once its response was handed out (`responded`), the rest is read
    /// in the background so that the pipeline ends the request normally; before it, both
    /// channels go at once and the pipeline sees its client leave.
    pub(crate) fn finish(&mut self, responded: bool) {
        let Some((tx, mut rx)) = self.chan.take() else {
            return;
        };
        if self.ended || !responded {
            return;
        }
        tokio::spawn(async move {
            let _tx = tx;
            let rest = async { while rx.recv().await.is_some() {} };
            let _ = tokio::time::timeout(DRAIN, rest).await;
        });
    }
}
