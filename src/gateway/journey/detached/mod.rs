//! Long streams outside the request pipeline. An SSE response (a `subscriptions/listen` stream,
//! a long tool call's progress) can stay open for hours, and while it does, pingora's
//! per-request pipeline would stay allocated with it: its boxed futures, the HTTP/1.1 session
//! and the request's own state, ~40 KiB a stream (see the memory goal in docs/benchmarks.md,
//! "What is left"). On the direct leg, once the response head is written, the rest of such a
//! response is handed over to the parked connection ([`crate::gateway::transport::parked::detach`]), which runs it
//! after the pipeline has returned and freed its state: the stream then holds only the client
//! connection, the upstream session and the request's context.
//!
//! What it keeps of the pipeline's behaviour:
//! - the body goes to the client chunk by chunk as it arrives (`Transfer-Encoding: chunked`,
//!   each chunk written and flushed at once), and the response stage sees every chunk and the
//!   end ([`response::on_body`]);
//! - a client that leaves (closes, or a read fails) ends the stream and drops the upstream
//!   request, whose connection closes; bytes a client sends meanwhile (a pipelined next request)
//!   are kept for the next request, as pingora's session keeps them;
//! - a write to the client is under `timeouts.downstream_write`, a read from the upstream under
//!   the pool's read timeout, as before;
//! - the request is counted, logged and traced when the stream ends ([`crate::gateway::journey::observe::finish_request`]),
//!   with the bytes sent, as pingora's `logging` phase does; an upstream failure mid-stream cuts
//!   the client connection (no last chunk: the client sees the response is incomplete);
//! - the connection is then kept for the next request under the same keep-alive settings.
//!
//! Only plain HTTP/1.1 client connections that wait parked take this; TLS and h2 clients keep
//! the stream inside the pipeline as before.

mod gone;
pub(crate) use gone::{stand_in_session_basics, Gone, Reader};

use bytes::{Bytes, BytesMut};
use pingora::apps::{HttpPersistentSettings, ReusedHttpStream};
use pingora::http::ResponseHeader;
use pingora::protocols::http::custom::client::Session as _;
use pingora::protocols::http::ServerSession;
use pingora::protocols::Stream;
use pingora::proxy::Session;
use pingora::{Error, ErrorType};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::response;
use crate::gateway::transport::parked;
use crate::gateway::transport::upstream_h1::{wire, H1Session, Pool};

/// Streams handed over since the process started.
static STREAMS_HANDED_OVER: AtomicU64 = AtomicU64::new(0);

/// How many responses went on outside the pipeline so far (the tests read it to tell the two
/// paths apart, which look the same on the wire).
pub fn handed_over() -> u64 {
    STREAMS_HANDED_OVER.load(Ordering::Relaxed)
}

/// Whether the rest of this response leaves the pipeline: an event stream without a declared
/// length, to a plain HTTP/1.1 client on a parked connection.
pub(crate) fn takes(session: &Session, head: &ResponseHeader) -> bool {
    let event_stream = head
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| crate::mcp::sse::is_event_stream(v.as_bytes()));
    event_stream
        && head.headers.get(http::header::CONTENT_LENGTH).is_none()
        && session.req_header().method != http::Method::HEAD
        && can_take(session)
}

/// Whether a response of this request can leave the pipeline: a plain HTTP/1.1 client on a
/// parked connection.
pub(crate) fn can_take(session: &Session) -> bool {
    matches!(&*session.downstream_session, ServerSession::H1(_)) && parked::can_detach()
}

/// Where the upstream connection goes back when the stream ends.
pub(crate) struct Upstream {
    pub session: H1Session,
    pub pool: Arc<Pool>,
    pub key: u64,
    pub idle_timeout: Option<Duration>,
}

/// Where a handed-over response's body comes from: the direct leg's upstream ([`Upstream`]), or
/// a stream the gateway writes itself (the bridge's relay of a 2025-era session's standalone
/// stream). Its `piece` must lose nothing when dropped unfinished (the pump drops it when the
/// client speaks first).
pub(crate) trait Source: Send + 'static {
    /// The next piece of the body, and whether the body ends with it; `Err`: the source
    /// failed (the client connection is cut).
    fn piece(
        &mut self,
        ctx: &mut RequestCtx,
    ) -> impl std::future::Future<Output = Result<(Option<Bytes>, bool), Cut>> + Send;
    /// Between pieces: buffers it may let go of.
    fn shed(&mut self) {}
    /// The body ran to its end: give back what can serve again.
    fn done(self);
}

impl Source for Upstream {
    async fn piece(&mut self, ctx: &mut RequestCtx) -> Result<(Option<Bytes>, bool), Cut> {
        let chunk = if self.session.response_finished() {
            None
        } else {
            self.session.read_response_body().await.map_err(|_| Cut)?
        };
        Ok(response::through_stage(ctx, &self.session, chunk))
    }

    fn shed(&mut self) {
        self.session.shed_buffer();
    }

    fn done(self) {
        if let Some(conn) = self.session.into_reusable() {
            self.pool.put(self.key, conn, self.idle_timeout);
        }
    }
}

/// What the finished request's observation needs from the pipeline it left.
struct End {
    status: u16,
    headers: http::HeaderMap,
}

/// The handed-over stream's task: pump the rest of the response, observe the request, return
/// the upstream connection to its pool, and give the client's connection back for its next
/// request (`None`: it closes). A plain function returning an `async move` block, not an
/// `async fn`: an `async fn` keeps a second copy of its arguments in its future (rust-lang/rust
/// issue 62958), here a whole `RequestCtx` for as long as the stream lasts (+1.9 KiB per open
/// SSE stream in `bench/conns.sh`).
#[allow(clippy::manual_async_fn)]
fn carry_on<S: Source>(
    client: Stream,
    keep: Option<(HttpPersistentSettings, Option<BytesMut>)>,
    mut up: S,
    mut owned: RequestCtx,
    write_timeout: Duration,
    end: End,
) -> impl std::future::Future<Output = Option<ReusedHttpStream>> + Send {
    async move {
        let mut stream = Client {
            client,
            sent: 0,
            write_timeout,
        };
        let mut keep = keep;
        // A client that pipelined its next request already is not read again until then.
        let watch = keep.as_ref().is_none_or(|(_, prefix)| prefix.is_none());
        let outcome = stream.pump(&mut up, &mut owned, watch, &mut keep).await;
        let (status, sent) = (end.status, stream.sent);
        crate::gateway::journey::observe::finish_request(&mut owned, status, sent, &end.headers);
        drop(owned);
        if outcome.is_err() {
            return None;
        }
        up.done();
        let (mut settings, prefix) = keep?;
        if let Some(prefix) = prefix {
            settings.set_pipelined_prefix(prefix);
        }
        Some(ReusedHttpStream::new(stream.client, Some(settings)))
    }
}

/// Hand the rest of the response over (its head is written): the client's session is taken
/// out of the pipeline, and the request's context with it (the pipeline keeps an empty one
/// that records nothing). The caller answers the pipeline as done.
pub(crate) async fn hand_over<S: Source>(
    session: &mut Session,
    ctx: &mut RequestCtx,
    up: S,
) -> pingora::Result<()> {
    let settings = HttpPersistentSettings::for_session(&session.downstream_session);
    let placeholder = gone::Gone::new(&session.downstream_session);
    let taken = std::mem::replace(
        &mut *session.downstream_session,
        ServerSession::new_custom(Box::new(placeholder)),
    );
    let ServerSession::H1(h1) = taken else {
        unreachable!("takes() only lets HTTP/1.1 sessions through")
    };
    let write_timeout = ctx.gw.config.timeouts.downstream_write;
    // The headers are read at the end only to start a trace the request does not have yet.
    let headers = match (&ctx.trace, &ctx.gw.tracing) {
        (None, Some(_)) => session.req_header().headers.clone(),
        _ => http::HeaderMap::new(),
    };
    let status = session.response_written().map_or(0, |r| r.status.as_u16());
    // The connection stays for the next request as pingora's session would keep it; it is kept
    // only where pipelined bytes may be (pingora refuses to reuse it otherwise).
    let (client, keep) = if h1.will_keepalive() && h1.pipelining_enabled() {
        let Some(reusable) = h1.reuse().await? else {
            return Error::e_explain(ErrorType::WriteError, "the client connection closed");
        };
        let (stream, prefix) = reusable.into_parts();
        (stream, Some((settings, prefix)))
    } else {
        (h1.into_inner(), None)
    };
    let owned = std::mem::replace(ctx, RequestCtx::new(ctx.gw.clone()));
    ctx.detached = true;
    // Counted here: the pipeline's context (where the direct leg counts it) is the empty one now.
    owned.count_delivery();
    let end = End { status, headers };
    let rest = Box::pin(carry_on(client, keep, up, owned, write_timeout, end));
    if !parked::detach(rest) {
        unreachable!("takes() checked that the connection is parked");
    }
    STREAMS_HANDED_OVER.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The client's side of a handed-over stream.
struct Client {
    client: Stream,
    /// Body bytes written to the client (the chunks' payload, as pingora counts them).
    sent: usize,
    write_timeout: Duration,
}

/// The stream ended early: the client left, a write to it failed or timed out, or the
/// upstream failed.
pub(crate) struct Cut;

impl Client {
    /// Copy the body to the client until its end, the client's leaving or a failure.
    /// `watch`: read the client meanwhile (it has sent nothing past its request yet); bytes
    /// it sends go to `keep`'s pipelined prefix.
    async fn pump<S: Source>(
        &mut self,
        up: &mut S,
        ctx: &mut RequestCtx,
        mut watch: bool,
        keep: &mut Option<(HttpPersistentSettings, Option<BytesMut>)>,
    ) -> Result<(), Cut> {
        self.flush().await?;
        // A pipelined request is read once, a few bytes of it (the rest stays in the socket).
        let mut probe = [0u8; 64];
        loop {
            let (chunk, end) = loop {
                tokio::select! {
                    biased;
                    r = up.piece(ctx) => break r?,
                    n = self.client.read(&mut probe), if watch => match n {
                        Ok(0) | Err(_) => return Err(Cut),
                        // The next request, sent early: kept for after the stream (on a
                        // connection that closes after it, dropped).
                        Ok(n) => if let Some((_, prefix)) = keep {
                            prefix.get_or_insert_with(BytesMut::new).extend_from_slice(&probe[..n]);
                            watch = false;
                        },
                    },
                }
            };
            let mut out = BytesMut::new();
            if let Some(data) = chunk.filter(|d| !d.is_empty()) {
                out.extend_from_slice(wire::chunk_size_line(data.len()).as_bytes());
                out.extend_from_slice(&data);
                out.extend_from_slice(b"\r\n");
                self.sent += data.len();
            }
            if end {
                out.extend_from_slice(wire::LAST_CHUNK);
            }
            if !out.is_empty() {
                self.write(out.freeze()).await?;
            }
            up.shed();
            if end {
                return Ok(());
            }
        }
    }

    async fn write(&mut self, data: Bytes) -> Result<(), Cut> {
        let write = async {
            self.client.write_all(&data).await?;
            self.client.flush().await
        };
        match tokio::time::timeout(self.write_timeout, write).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Cut),
        }
    }

    async fn flush(&mut self) -> Result<(), Cut> {
        match tokio::time::timeout(self.write_timeout, self.client.flush()).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Cut),
        }
    }
}
