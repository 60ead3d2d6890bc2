//! Request-head deadline: the whole HTTP/1 request head must arrive within
//! `timeouts.request_head`, however it trickles.
//!
//! pingora reads the head before any `ProxyHttp` hook runs, with a timeout per read (60 s on a
//! new connection, the keep-alive timeout on a reused one), so a client that sends one byte of
//! head every 59 s holds its connection for ever. The hooks cannot help: they start after the
//! head. This stage therefore sits under pingora, as a wrapper around each accepted HTTP/1
//! stream ([`HeadDeadlineApp`] wraps the proxy service's app, [`Watched`] the stream):
//!
//! - a connection starts in [`Phase::Head`], with its deadline counted from the accept (like
//!   nginx's `client_header_timeout`, this also covers a client that connects and says nothing);
//! - the bytes read in `Head` are scanned for the blank line that ends a head (CRLF CRLF, or LF
//!   LF, which the HTTP parser accepts too); then the request is [`Phase::Busy`]: its body has
//!   its own deadline (`timeouts.request_body`, enforced by the gateway's hooks);
//! - writing a final response header (`HTTP/1.x` and a status that is not 1xx, so `100
//!   Continue` does not count) makes the connection [`Phase::Idle`]: the wait for the next
//!   request is the keep-alive timeout's (`timeouts.client_idle`), and its first byte starts
//!   the next head's deadline;
//! - HTTP/2 is not watched: a TLS connection that negotiated h2, or an h2c connection (its
//!   first bytes are the HTTP/2 preface), passes through untouched.
//!
//! When the deadline passes, the client gets `408` with a JSON-RPC error (-31005, the client's
//! fault, counted in `requests_total` like the body deadline) and `Connection: close`, and the
//! read fails so that pingora drops the connection. The scan touches head bytes only; a body
//! or a response is passed through without a look.
//!
//! Being the service's app, [`HeadDeadlineApp`] also decides when idle connections are dropped
//! after the listeners close (`shutdown.close_idle_after`, see its `cleanup`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pingora::apps::ServerApp;
use pingora::protocols::{Stream, ALPN};
use pingora::server::ShutdownWatch;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

mod delegate;

use crate::gateway::telemetry::metrics::Outcome;
use crate::mcp::error::{codes, error_body};

/// Where a watched connection is in its current request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Reading a request head, which must be complete by the deadline. `after_newline` is
    /// true when the last byte that was not CR was LF (one more LF ends the head).
    Head { after_newline: bool },
    /// The head is in; the body and the response are the hooks' business.
    Busy,
    /// The response is out; waiting (keep-alive) for the next request's first byte.
    Idle,
    /// Not HTTP/1 (h2c preface): never watched again.
    Pass,
    /// The deadline passed: the 408 is being written (`usize` bytes of it so far).
    Answering(usize),
    /// The 408 is out; every further read fails.
    Done,
}

/// What a chunk of bytes read in `Head` does to the phase. Pure, for unit tests.
pub(crate) fn scan_head(after_newline: bool, bytes: &[u8]) -> Phase {
    // From line end to line end (memchr), not byte by byte: a `\r` changes nothing, a `\n` after
    // a `\n` ends the head, any other byte starts a line.
    let mut rest = bytes;
    let mut nl = after_newline;
    loop {
        if nl {
            let cr = rest.iter().take_while(|&&b| b == b'\r').count();
            rest = &rest[cr..];
            match rest.first() {
                None => {
                    return Phase::Head {
                        after_newline: true,
                    }
                }
                Some(b'\n') => return Phase::Busy,
                Some(_) => {}
            }
        }
        match memchr::memchr(b'\n', rest) {
            Some(k) => {
                rest = &rest[k + 1..];
                nl = true;
            }
            None => {
                return Phase::Head {
                    after_newline: false,
                }
            }
        }
    }
}

/// Whether a write starts a final (non-1xx) HTTP/1 response header.
pub(crate) fn starts_final_response(buf: &[u8]) -> bool {
    buf.len() > 9 && buf.starts_with(b"HTTP/1.") && buf[9] != b'1'
}

/// The first bytes of an HTTP/2 connection (prior knowledge, h2c).
const H2_PREFACE_START: &[u8] = b"PRI * HTTP/2.0";

/// The full 408 answer, written below pingora (so it is a complete HTTP/1.1 response).
pub(crate) fn timeout_answer(limit: Duration) -> Vec<u8> {
    let message = format!(
        "the request head did not arrive within {} (timeouts.request_head); the connection is closed",
        humantime::format_duration(limit)
    );
    let body = error_body(None, codes::GATEWAY_REQUEST_INCOMPLETE, &message, None);
    let mut out = format!(
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

/// What the deadline reads of the live gateway, at each connection (implemented by
/// `journey::live::Live`, so that a reload's timeouts apply to the next connection).
pub(crate) trait Settings: Send + Sync + 'static {
    /// How long a request head may take (`timeouts.request_head`).
    fn request_head(&self) -> Duration;
    /// How long [`HeadDeadlineApp::cleanup`] waits before pingora drops idle connections
    /// (`shutdown.close_idle_after`, within `shutdown.grace_period`).
    fn close_idle_after(&self) -> Duration;
    /// Count an answer the deadline wrote (a 408).
    fn record(&self, outcome: &Outcome);
}

/// The proxy service's app, with every HTTP/1 connection's head under a deadline.
pub(crate) struct HeadDeadlineApp<A> {
    pub inner: Arc<A>,
    live: Arc<dyn Settings>,
}

impl<A> HeadDeadlineApp<A> {
    pub(crate) fn new(inner: A, live: Arc<dyn Settings>) -> Self {
        HeadDeadlineApp {
            inner: Arc::new(inner),
            live,
        }
    }

    /// The wrapped app, while the service is being built (before it is shared).
    pub(crate) fn inner_mut(&mut self) -> &mut A {
        Arc::get_mut(&mut self.inner).expect("the app is not shared before the server starts")
    }
}

#[async_trait]
impl<A: ServerApp + Send + Sync + 'static> ServerApp for HeadDeadlineApp<A> {
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        if matches!(stream.selected_alpn_proto(), Some(ALPN::H2)) {
            return self.inner.process_new(stream, shutdown).await;
        }
        let limit = self.live.request_head();
        let watched = Watched::new(stream, limit, self.live.clone());
        self.inner.process_new(Box::new(watched), shutdown).await
    }

    /// The listeners have closed. pingora's own cleanup drops every connection that waits for
    /// a request at once, including one whose TLS handshake just finished and whose first
    /// request is on its way, so that request is reset. The drop is deferred by
    /// `shutdown.close_idle_after`: meanwhile, requests that arrive are served and answered
    /// `Connection: close` (pingora does that once shutdown has begun).
    async fn cleanup(&self) {
        tokio::time::sleep(self.live.close_idle_after()).await;
        self.inner.cleanup().await
    }
}

/// An accepted stream whose request heads are under a deadline (see the module doc).
pub(crate) struct Watched {
    io: Stream,
    phase: Phase,
    /// Nothing has been read yet (the h2c preface can only come first).
    fresh: bool,
    limit: Duration,
    head_started: Instant,
    /// Armed only while a read of a head waits; allocated once per connection.
    timer: Option<Pin<Box<Sleep>>>,
    live: Arc<dyn Settings>,
}

impl Watched {
    fn new(io: Stream, limit: Duration, live: Arc<dyn Settings>) -> Self {
        Watched {
            io,
            phase: Phase::Head {
                after_newline: false,
            },
            fresh: true,
            limit,
            head_started: Instant::now(),
            timer: None,
            live,
        }
    }

    fn deadline(&self) -> Instant {
        self.head_started + self.limit
    }

    /// Account for bytes that were just read.
    fn saw(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if std::mem::take(&mut self.fresh) && bytes.starts_with(H2_PREFACE_START) {
            self.phase = Phase::Pass;
            return;
        }
        if self.phase == Phase::Idle {
            self.head_started = Instant::now();
            self.phase = Phase::Head {
                after_newline: false,
            };
        }
        if let Phase::Head { after_newline } = self.phase {
            self.phase = scan_head(after_newline, bytes);
        }
    }

    /// Whether the head's deadline passed while its read waits (registers the timer's waker).
    fn timed_out(&mut self, cx: &mut Context<'_>) -> bool {
        let deadline = tokio::time::Instant::from_std(self.deadline());
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        timer.as_mut().poll(cx).is_ready()
    }

    /// A peek (how a parked connection waits for its first byte, or pingora for the h2c
    /// preface) waits no longer than the head's deadline either.
    async fn peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        if !matches!(self.phase, Phase::Head { .. }) {
            return self.io.try_peek(buf).await;
        }
        let deadline = tokio::time::Instant::from_std(self.deadline());
        match tokio::time::timeout_at(deadline, self.io.try_peek(buf)).await {
            Ok(peeked) => peeked,
            Err(_) => {
                self.phase = Phase::Answering(0);
                std::future::poll_fn(|cx| self.answer(cx))
                    .await
                    .map(|()| false)
            }
        }
    }

    /// Write the 408 and then fail the read.
    fn answer(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let answer = timeout_answer(self.limit);
        while let Phase::Answering(done) = self.phase {
            if done == answer.len() {
                break;
            }
            match Pin::new(&mut self.io).poll_write(cx, &answer[done..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => break,
                Poll::Ready(Ok(n)) => self.phase = Phase::Answering(done + n),
                Poll::Pending => return Poll::Pending,
            }
        }
        if Pin::new(&mut self.io).poll_flush(cx).is_pending() {
            return Poll::Pending;
        }
        if matches!(self.phase, Phase::Answering(_)) {
            self.live.record(&Outcome {
                status: 408,
                gateway_code: Some(codes::GATEWAY_REQUEST_INCOMPLETE),
                reason: Some("request_head_timeout"),
                duration: self.head_started.elapsed(),
                ..Outcome::default()
            });
            tracing::debug!(limit = ?self.limit, "request head deadline passed; answered 408");
        }
        self.phase = Phase::Done;
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "request head deadline (timeouts.request_head)",
        )))
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match this.phase {
            Phase::Answering(_) | Phase::Done => return this.answer(cx),
            Phase::Head { .. } if Instant::now() >= this.deadline() => {
                this.phase = Phase::Answering(0);
                return this.answer(cx);
            }
            _ => {}
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        match polled {
            Poll::Ready(Ok(())) => this.saw(&buf.filled()[before..]),
            Poll::Pending if matches!(this.phase, Phase::Head { .. }) && this.timed_out(cx) => {
                this.phase = Phase::Answering(0);
                return this.answer(cx);
            }
            _ => {}
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.phase != Phase::Pass && starts_final_response(buf) {
            this.phase = Phase::Idle;
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let first = bufs.iter().find(|b| !b.is_empty());
        if this.phase != Phase::Pass && first.is_some_and(|b| starts_final_response(b)) {
            this.phase = Phase::Idle;
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
