//! The client a leg run on the client's own session sees ([`super::inline`]): while the leg runs,
//! the client's session is lent to a [`StandIn`] that takes its place in pingora's `Session`.
//! To the pipeline it is a client that sent the leg's 2026 request (its head and its body, in
//! hand) and reads the answer; to the bridge it is what that answer was:
//!
//! - a JSON answer is kept whole (at most [`MAX_ANSWER`] bytes), for the bridge to translate;
//! - an event stream's notifications (a leg's progress, its log messages) reach the client as
//!   they arrive, on the client's own event stream (opened by the first of them), and its
//!   JSON-RPC response is kept, as the loopback hop's reader does ([`super::call`]);
//! - the client leaving ends the leg as it would end any request (the pipeline watches for it
//!   through [`StandIn`]'s `read_body_or_idle`), and so do the leg's deadline and, once the
//!   response is in hand, [`DRAIN`] more for the stream's end.
//!
//! The client's session comes back when the stand-in is dropped ([`take_back`]), whatever the
//! pipeline did: nothing the pipeline does can close it or write to it but the notifications.

use async_trait::async_trait;
use bytes::Bytes;
use http::HeaderMap;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::custom::server::Session as CustomSession;
use pingora::protocols::http::{HttpTask, ServerSession};
use pingora::protocols::l4::socket::SocketAddr;
use pingora::protocols::Digest;
use pingora::proxy::Session;
use pingora::{Error, ErrorType, Result};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use crate::gateway::journey::detached::{stand_in_session_basics, Gone};
use crate::gateway::stages::bridge::messages::is_response;
use crate::mcp::{sse, sse_event};

/// The largest answer a leg may give the bridge (the loopback hop's bound).
pub(super) const MAX_ANSWER: usize = 32 * 1024 * 1024;

/// How long the end of an event stream is waited for once its response is in hand.
const DRAIN: Duration = Duration::from_secs(1);

/// What a leg left: the client's session, and the answer as the pipeline wrote it.
struct Lent {
    /// Boxed as pingora keeps it: only the pointer moves, never the session (680 bytes).
    client: Box<ServerSession>,
    /// The client's event stream is open (by this leg's notifications, or before it).
    streaming: bool,
    answer: Written,
}

/// The answer as the pipeline wrote it to the stand-in.
#[derive(Default)]
pub(super) struct Written {
    pub head: Option<ResponseHeader>,
    /// The head's `Content-Type` (read once, as the head came), and whether it is an event
    /// stream's.
    pub content_type: Option<std::borrow::Cow<'static, str>>,
    pub stream: bool,
    /// A JSON answer whole, or an event stream's JSON-RPC response.
    pub body: Vec<u8>,
    /// The answer was an event stream and its response came (`body` holds it).
    pub responded: bool,
    pub end: End,
}

/// How the leg ended, beyond its answer.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum End {
    #[default]
    Normal,
    /// The client went away (or sent something) while the leg ran.
    ClientLeft,
    /// The leg's deadline passed before its answer ended.
    Late,
    /// The answer was larger than [`MAX_ANSWER`].
    TooLarge,
    /// The pipeline gave up on an answer it had started.
    Abandoned,
}

/// Where the stand-in leaves the client's session when it is dropped.
pub(super) struct Back(Arc<Mutex<Option<Lent>>>);

/// Lend the client's session to a stand-in for a leg of `head` and `body`. With `relay`
/// (whether the client's event stream is already open), an event-stream answer's
/// notifications go to the client as they arrive; without, the answer is kept whole. What
/// comes back is read with [`take_back`]. The client's session stays where pingora boxed it:
/// the boxes are swapped.
pub(super) fn lend(
    session: &mut Session,
    (head, body): (RequestHeader, Bytes),
    relay: Option<bool>,
    deadline: Instant,
) -> Back {
    let back = Arc::new(Mutex::new(None));
    let vacant = Box::new(ServerSession::Custom(Box::new(Gone::vacant())));
    let client = std::mem::replace(&mut session.downstream_session, vacant);
    let stand_in = StandIn {
        req: head,
        body_len: body.len(),
        body: Some(body),
        read: 0,
        client: Some(client),
        relay: relay.is_some(),
        streaming: relay.unwrap_or(false),
        events: None,
        written: Written::default(),
        sent: 0,
        deadline,
        responded_at: None,
        timer: None,
        timeouts: [None; 3],
        back: back.clone(),
    };
    *session.downstream_session = ServerSession::Custom(Box::new(stand_in));
    Back(back)
}

/// The client's session back in its place; what the leg left, and whether the client's event
/// stream is open now.
pub(super) fn take_back(session: &mut Session, back: Back) -> (Written, bool) {
    // Dropping the stand-in leaves the client's session in `back`.
    *session.downstream_session = ServerSession::Custom(Box::new(Gone::vacant()));
    let lent = back
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .expect("a dropped stand-in leaves the client's session");
    session.downstream_session = lent.client;
    (lent.answer, lent.streaming)
}

/// The client, as a leg's pipeline sees it.
struct StandIn {
    req: RequestHeader,
    /// The leg's body, until the pipeline reads it.
    body: Option<Bytes>,
    body_len: usize,
    read: usize,
    client: Option<Box<ServerSession>>,
    /// An event-stream answer's notifications go to the client as they arrive.
    relay: bool,
    streaming: bool,
    /// The answer is an event stream whose notifications are relayed: its parser.
    events: Option<sse::Parser>,
    written: Written,
    sent: usize,
    deadline: Instant,
    responded_at: Option<Instant>,
    /// The timer [`CustomSession::read_body_or_idle`] waits on (made at its first call).
    timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// Read, write and drain timeouts, as the pipeline set them (kept, not used: the client's
    /// own session keeps its own).
    timeouts: [Option<Duration>; 3],
    back: Arc<Mutex<Option<Lent>>>,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let lent = Lent {
                client,
                streaming: self.streaming,
                answer: std::mem::take(&mut self.written),
            };
            *self.back.lock().unwrap_or_else(|e| e.into_inner()) = Some(lent);
        }
    }
}

fn stand_in_error<T>(why: &'static str) -> Result<T> {
    Error::e_explain(ErrorType::WriteError, why)
}

impl StandIn {
    fn client(&mut self) -> &mut ServerSession {
        self.client
            .as_mut()
            .expect("the client's session is lent until the drop")
    }

    /// A piece of the answer's body.
    async fn take(&mut self, data: &[u8], end: bool) -> Result<()> {
        self.sent += data.len();
        if self.sent > MAX_ANSWER {
            self.written.end = End::TooLarge;
            return stand_in_error("the answer is larger than the bridge reads");
        }
        let Some(parser) = self.events.as_mut() else {
            self.written.body.extend_from_slice(data);
            return Ok(());
        };
        let mut done = Vec::new();
        parser.feed(data, &mut done);
        if end {
            if let Some(p) = self.events.take() {
                p.finish(&mut done);
            }
        }
        for ev in done {
            self.on_event(&ev.data).await?;
        }
        Ok(())
    }

    /// One event of an event-stream answer: a notification goes to the client now; the
    /// response is kept (a request of the server's, which no 2026 server sends, is dropped).
    async fn on_event(&mut self, data: &[u8]) -> Result<()> {
        let Ok(m) = serde_json::from_slice::<Value>(data) else {
            return Ok(());
        };
        if is_response(&m) {
            self.written.body = serde_json::to_vec(&m).expect("a JSON value serializes");
            self.written.responded = true;
            self.responded_at.get_or_insert_with(Instant::now);
            return Ok(());
        }
        if m.get("method").is_some() && m.get("id").is_none() && !self.written.responded {
            self.relay(m.to_string().as_bytes()).await?;
        }
        Ok(())
    }

    /// A notification on the client's event stream, opened first when it is not yet.
    async fn relay(&mut self, message: &[u8]) -> Result<()> {
        if !self.streaming {
            let head = super::out::stream_head()?;
            self.client().write_response_header(Box::new(head)).await?;
            self.streaming = true;
        }
        let ev = Bytes::from(sse_event(message));
        self.client().write_response_body(ev, false).await
    }
}

#[async_trait]
impl CustomSession for StandIn {
    fn req_header(&self) -> &RequestHeader {
        &self.req
    }
    fn req_header_mut(&mut self) -> &mut RequestHeader {
        &mut self.req
    }
    async fn read_body_bytes(&mut self) -> Result<Option<Bytes>> {
        let body = self.body.take().filter(|b| !b.is_empty());
        self.read += body.as_ref().map_or(0, Bytes::len);
        Ok(body)
    }
    async fn drain_request_body(&mut self) -> Result<()> {
        self.body = None;
        Ok(())
    }
    async fn write_response_header(&mut self, resp: Box<ResponseHeader>, _: bool) -> Result<()> {
        if self.written.head.is_none() {
            let ct = resp.headers.get(http::header::CONTENT_TYPE);
            self.written.stream = ct.is_some_and(|c| sse::is_event_stream(c.as_bytes()));
            if self.relay && self.written.stream {
                self.events = Some(sse::Parser::new());
            }
            self.written.content_type = ct.and_then(super::hop::content_type_of);
            self.written.head = Some(*resp);
        }
        Ok(())
    }
    async fn write_response_header_ref(&mut self, resp: &ResponseHeader, end: bool) -> Result<()> {
        self.write_response_header(Box::new(resp.clone()), end)
            .await
    }
    async fn write_body(&mut self, data: Bytes, end: bool) -> Result<()> {
        self.take(&data, end).await
    }
    async fn write_trailers(&mut self, _: HeaderMap) -> Result<()> {
        Ok(())
    }
    async fn response_duplex_vec(&mut self, tasks: Vec<HttpTask>) -> Result<bool> {
        let mut ended = false;
        for task in tasks {
            match task {
                HttpTask::Header(h, end) => {
                    self.write_response_header(h, end).await?;
                    ended |= end;
                }
                HttpTask::Body(b, end) => {
                    self.take(b.as_deref().unwrap_or_default(), end).await?;
                    ended |= end;
                }
                HttpTask::Done => ended = true,
                HttpTask::Failed(e) => return Err(e),
                _ => {}
            }
        }
        Ok(ended)
    }
    fn request_summary(&self) -> String {
        format!("{} {} (a bridged leg)", self.req.method, self.req.uri)
    }
    fn response_written(&self) -> Option<&ResponseHeader> {
        self.written.head.as_ref()
    }
    async fn shutdown(&mut self, _: u32, _: &str) {
        if self.written.end == End::Normal {
            self.written.end = End::Abandoned;
        }
    }
    fn is_body_done(&mut self) -> bool {
        self.body.is_none()
    }
    async fn finish(&mut self) -> Result<()> {
        Ok(())
    }
    fn is_body_empty(&mut self) -> bool {
        self.body_len == 0
    }
    /// The leg's client leaves when the client does; past the leg's deadline, or [`DRAIN`]
    /// after its response, the stand-in leaves in its place.
    async fn read_body_or_idle(&mut self, _: bool) -> Result<Option<Bytes>> {
        let drained = self.responded_at.map(|t| t + DRAIN);
        let until = drained.map_or(self.deadline, |d| d.min(self.deadline));
        let client = self.client.as_mut().expect("lent until the drop");
        // One timer for the leg, kept across the pipeline's calls (set again only when the
        // drain moves its end): registered with the runtime once, not on every call.
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(until)));
        if timer.deadline() != until {
            timer.as_mut().reset(until);
        }
        let left = tokio::select! {
            _ = client.read_body_or_idle(true) => true,
            _ = timer.as_mut() => false,
        };
        if left {
            self.written.end = End::ClientLeft;
            return Error::e_explain(ErrorType::ConnectionClosed, "the client went away");
        }
        if !self.written.responded {
            self.written.end = End::Late;
        }
        Error::e_explain(
            ErrorType::ConnectionClosed,
            "the bridge stopped reading the leg",
        )
    }
    fn body_bytes_sent(&self) -> usize {
        self.sent
    }
    fn body_bytes_read(&self) -> usize {
        self.read
    }
    fn digest(&self) -> Option<&Digest> {
        self.client.as_ref()?.digest()
    }
    fn digest_mut(&mut self) -> Option<&mut Digest> {
        self.client.as_mut()?.digest_mut()
    }
    fn client_addr(&self) -> Option<&SocketAddr> {
        self.client.as_ref()?.client_addr()
    }
    fn server_addr(&self) -> Option<&SocketAddr> {
        self.client.as_ref()?.server_addr()
    }
    async fn finish_custom(&mut self) -> Result<()> {
        Ok(())
    }
    stand_in_session_basics!();
}
