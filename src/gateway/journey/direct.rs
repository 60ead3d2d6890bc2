//! The direct leg: a request whose body is in hand (read in `request_filter`: checked, or
//! sampled out and small enough to read whole) and
//! whose pool is plain HTTP/1.1 is forwarded from `request_filter` itself, on the gateway's own
//! upstream connection ([`crate::gateway::transport::upstream_h1`]), and its response is written to the client
//! there. pingora's proxy pipe (its second session, task channels, joined futures and the retry
//! loop around them) is not built for it: that machinery was most of the gateway's CPU per
//! request beyond the system calls (the profile in
//! docs/benchmarks-history.md).
//!
//! It is not a replay of pingora's later phases: it **calls them**, the proxy's own phases
//! through pingora's `ProxyHttp` trait ([`super::phases`]), in the order pingora's pipe does, so
//! each step has one caller, its phase, and a change to a phase changes both legs (a unit test,
//! `pipeline::tests::the_direct_leg_runs_the_phases_pingoras_pipe_runs`, compares the phases each
//! leg ran, for an answered call and for an instance that refuses connections):
//!
//! | phase                      | its step                                    | on the direct leg |
//! |----------------------------|---------------------------------------------|-------------------|
//! | `upstream_peer`            | balance: [`super::forward::choose`]         | each attempt      |
//! | `upstream_request_filter`  | the upstream head: [`super::forward::upstream_headers`] | once, on the first connection |
//! | `fail_to_connect`          | [`super::failure::connect_failed`]          | each failed connect |
//! | `response_filter`, `response_body_filter` | [`super::response::on_header`], [`super::response::on_body`] | the head, each chunk |
//! | `fail_to_proxy`            | a failure's answer: [`super::failure::answer`] | an error returned from here |
//! | `logging`                  | observe: `observe::finish_request`          | when the request ends |
//!
//! What is the direct leg's own is the driver around those phases: the attempt loop, the
//! connection (the gateway's own pool, head and body in one write) and the response's framing
//! for the client; pingora's pipe has its own driver (its proxy loop, its connector, its retry
//! buffer). Merging the two drivers would mean either the direct leg's speed for TLS and h2
//! pools (the own client speaks plain HTTP/1.1 only) or pingora's pipe for plain ones (the
//! profile that made this leg); so two drivers stay, over one set of phases. The body in hand
//! is written with the head (no `request_body_filter`: it was checked before the phases).

//! Differences from pingora's pipe, on purpose:
//! - a request is re-sent only if it never left: when writing it to a pooled connection fails
//!   (the upstream had closed it), once, on a fresh connection to the **same** instance. A
//!   request written whole is never re-sent, even when the connection was pooled and no
//!   response byte came back (the instance may have run the call: tools/call has side
//!   effects); pingora's pipe re-sends that case, on another instance;
//! - informational (1xx) upstream responses are not forwarded (the gateway answered the
//!   client's `Expect` itself, and strips `Expect` from what goes upstream).
//!
//! A response of a declared length whose body a response stage rewrites (it drops the length:
//! a sealed `requestState`, a filtered or pinned list) is read whole first and written with its
//! new `Content-Length`, head and body in one write, instead of chunked (three writes: the
//! seal cost a quarter of the throughput that way).
//!
//! An event-stream response to a plain HTTP/1.1 client on a parked connection goes on outside
//! the pipeline once its head is written ([`detached`]): `exchange` hands it over and answers
//! the pipeline as done.

use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::custom::client::Session as _;
use pingora::proxy::Session;
use pingora::upstreams::peer::{HttpPeer, Peer};
use pingora::{Error, ErrorType, Result, RetryType};
use std::future::Future;
use std::sync::Arc;

use crate::config::UpstreamLeg;
use crate::gateway::journey::detached;
use crate::gateway::journey::phases::Phases;
use crate::gateway::journey::request::Progress;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::transport::upstream_h1::{self, Conn, H1Session, Pool};

/// Whether the direct leg takes this request: its body is in hand (read whole before an
/// upstream was chosen: checked, or sampled out), and its route's leg is the direct one.
pub(crate) fn takes(session: &Session, ctx: &RequestCtx) -> bool {
    matches!(ctx.progress, Progress::Checked(_) | Progress::Unchecked) && leg_for(session, ctx)
}

/// Whether the direct leg carries this request's route: a plain HTTP/1.1 pool, the
/// configuration's leg, and not a protocol upgrade.
pub(crate) fn leg_for(session: &Session, ctx: &RequestCtx) -> bool {
    ctx.gw.config.connections.upstream_leg == UpstreamLeg::Direct
        && ctx.gw.peers[ctx.pool].is_plain_h1()
        && !session.is_upgrade_req()
}

/// Forward the request and write its response, through the proxy's `phases`; `Ok(true)`: the
/// client got its answer.
pub(crate) async fn forward(
    phases: &impl Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    pool: &Arc<Pool>,
) -> Result<bool> {
    let body = ctx.in_hand.clone();
    let mut head = None;
    loop {
        let peer = *phases.upstream_peer(session, ctx).await?;
        let key = peer.reuse_hash();
        let (conn, reused) = match pool.take(key) {
            Some(conn) => (conn, true),
            None => match upstream_h1::connect(&peer).await {
                Ok(conn) => (Arc::new(conn), false),
                Err(e) => match retry_connect(phases, session, &peer, ctx, e) {
                    Ok(()) => continue,
                    Err(e) => return Err(e),
                },
            },
        };
        // The upstream's head, once there is a connection (where pingora's pipe runs the
        // phase), and once whatever the attempts.
        let head = match &mut head {
            Some(h) => &*h,
            None => &*head.insert(upstream_head(phases, session, ctx, body.len()).await?),
        };
        let mut written = false;
        let sent = (head, &body);
        let back = (pool, key);
        let mut outcome = exchange(
            (phases, session),
            ctx,
            &peer,
            conn,
            reused,
            sent,
            back,
            &mut written,
        )
        .await;
        let unsent = |e: &Error| e.etype() == &ErrorType::WriteError;
        if matches!(&outcome, Err(e) if reused && !written && unsent(e)) {
            // A pooled connection the upstream had closed: the request never left; once more,
            // on a fresh connection to the same instance.
            outcome = match upstream_h1::connect(&peer).await {
                Ok(conn) => {
                    let conn = Arc::new(conn);
                    let via = (phases, &mut *session);
                    exchange(via, ctx, &peer, conn, false, sent, back, &mut written).await
                }
                Err(e) => match retry_connect(phases, session, &peer, ctx, e) {
                    Ok(()) => continue,
                    Err(e) => Err(e),
                },
            };
        }
        if written {
            ctx.count_delivery();
        }
        return match outcome {
            Ok(reusable) => {
                if let Some(conn) = reusable {
                    pool.put(key, conn, peer.options.idle_timeout);
                }
                Ok(true)
            }
            Err(e) => Err(e),
        };
    }
}

/// The upstream's head (the `upstream_request_filter` phase): a copy of the client's, framed for
/// a body of `len` bytes. The client's stays as it came: each attempt chooses its instance on
/// it, as pingora's pipe does (a shard key may be a header the edits remove).
async fn upstream_head(
    phases: &impl Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    len: usize,
) -> Result<RequestHeader> {
    let mut head = session.req_header().clone();
    phases
        .upstream_request_filter(session, &mut head, ctx)
        .await?;
    upstream_h1::wire::to_http11(&mut head, false)?;
    upstream_h1::wire::frame_whole(&mut head, len)?;
    Ok(head)
}

/// A connect failure (the `fail_to_connect` phase: counted against the instance); `Ok` when
/// another instance may be tried.
fn retry_connect(
    phases: &impl Phases,
    session: &mut Session,
    peer: &HttpPeer,
    ctx: &mut RequestCtx,
    e: Box<Error>,
) -> Result<()> {
    let e = phases.fail_to_connect(session, peer, ctx, e.into_up());
    if matches!(e.retry, RetryType::Decided(true)) {
        Ok(())
    } else {
        Err(e)
    }
}

/// One request and its response on `conn`; the connection back when it may be reused (a
/// response handed over to go on outside the pipeline gives it back to `pool` itself).
#[allow(clippy::too_many_arguments)]
async fn exchange(
    (phases, session): (&impl Phases, &mut Session),
    ctx: &mut RequestCtx,
    peer: &HttpPeer,
    conn: Arc<Conn>,
    reused: bool,
    (request, body): (&RequestHeader, &Bytes),
    (pool, key): (&Arc<Pool>, u64),
    written: &mut bool,
) -> Result<Option<Arc<Conn>>> {
    let mut up = H1Session::new(conn, reused);
    up.set_read_timeout(peer.options.read_timeout);
    up.set_write_timeout(peer.options.write_timeout);

    // The request: head and body in one write.
    up.send_request(request, body)
        .await
        .map_err(|e| e.into_up())?;
    *written = true;

    let mut head = read_head(session, &mut up).await?;
    let declared = content_length(&head);
    phases.response_filter(session, &mut head, ctx).await?;
    if let Some(n) = declared.filter(|_| content_length(&head).is_none()) {
        // A response stage dropped the declared length to rewrite the body (a sealed state, a
        // filtered list): a body of a known, bounded length is read and rewritten whole first,
        // then written with its new length, head and body together, not chunked.
        let no_body = session.req_header().method == http::Method::HEAD
            || matches!(head.status.as_u16(), 204 | 304);
        if n <= WHOLE_MAX && !no_body {
            whole_body((phases, session), ctx, &mut up, head).await?;
            return Ok(up.into_reusable());
        }
    }
    frame_for_client(session, &mut head)?;
    let hand_over = detached::takes(session, &head);
    session
        .write_response_header(Box::new(head), false)
        .await
        .map_err(|e| e.into_down())?;
    if hand_over {
        let pool = pool.clone();
        let idle_timeout = peer.options.idle_timeout;
        let up = detached::Upstream {
            session: up,
            pool,
            key,
            idle_timeout,
        };
        detached::hand_over(session, ctx, up)
            .await
            .map_err(|e| e.into_down())?;
        return Ok(None);
    }

    stream_body((phases, session), ctx, &mut up).await?;
    Ok(up.into_reusable())
}

/// The response head (informational ones are skipped), while watching for the client leaving.
async fn read_head(session: &mut Session, up: &mut H1Session) -> Result<ResponseHeader> {
    loop {
        until_client_leaves(session, up.read_response_header()).await?;
        if !up.informational() {
            return up.take_response().ok_or_else(|| {
                Error::explain(ErrorType::InvalidHTTPHeader, "no response head").into_up()
            });
        }
    }
}

/// The body, chunk by chunk as it arrives (SSE events are not held back); the response stage
/// sees its end also when there is no body (the list filter may answer then).
async fn stream_body(
    (phases, session): (&impl Phases, &mut Session),
    ctx: &mut RequestCtx,
    up: &mut H1Session,
) -> Result<()> {
    loop {
        let chunk = match up.response_finished() {
            true => None,
            false => until_client_leaves(session, up.read_response_body()).await?,
        };
        let (chunk, end) = through_phase((phases, session), ctx, up, chunk)?;
        if chunk.as_ref().is_some_and(|d| !d.is_empty()) || end {
            let wrote = session.write_response_body(chunk, end).await;
            wrote.map_err(|e| e.into_down())?;
        }
        if end {
            return Ok(());
        }
    }
}

/// A piece of the upstream's body (`None`: the body had ended, or ends now) through the
/// `response_body_filter` phase, and whether the body ends with it.
fn through_phase(
    (phases, session): (&impl Phases, &mut Session),
    ctx: &mut RequestCtx,
    up: &H1Session,
    mut chunk: Option<Bytes>,
) -> Result<(Option<Bytes>, bool)> {
    let end = chunk.is_none() || up.response_finished();
    phases.response_body_filter(session, &mut chunk, end, ctx)?;
    Ok((chunk, end))
}

/// The longest declared body [`whole_body`] reads before writing the head (the seal's JSON
/// hold, `stages::seal::JSON_HOLD_MAX`).
const WHOLE_MAX: u64 = 1024 * 1024;

/// The upstream's declared `Content-Length`.
fn content_length(head: &ResponseHeader) -> Option<u64> {
    let v = head.headers.get(http::header::CONTENT_LENGTH)?;
    v.to_str().ok()?.trim().parse().ok()
}

/// A body of a declared length that a response stage rewrites: read whole through the response
/// stage, then written to the client with the head, under its new length.
async fn whole_body(
    (phases, session): (&impl Phases, &mut Session),
    ctx: &mut RequestCtx,
    up: &mut H1Session,
    mut head: ResponseHeader,
) -> Result<()> {
    let mut out: Vec<Bytes> = Vec::new();
    loop {
        let chunk = match up.response_finished() {
            true => None,
            false => until_client_leaves(session, up.read_response_body()).await?,
        };
        let (chunk, end) = through_phase((phases, session), ctx, up, chunk)?;
        out.extend(chunk.filter(|c| !c.is_empty()));
        if end {
            break;
        }
    }
    let body = match out.len() {
        1 => out.pop().unwrap_or_default(),
        _ => Bytes::from(out.concat()),
    };
    head.set_version(http::Version::HTTP_11);
    head.remove_header(&http::header::TRANSFER_ENCODING);
    head.insert_header(http::header::CONTENT_LENGTH, body.len())?;
    let wrote = session.write_response_header(Box::new(head), false).await;
    wrote.map_err(|e| e.into_down())?;
    let wrote = session.write_response_body(Some(body), true).await;
    wrote.map_err(|e| e.into_down())
}

/// The response head as the client gets it: HTTP/1.1 (the client's session writes its own
/// version), and chunked when there is a body without a declared length.
fn frame_for_client(session: &Session, head: &mut ResponseHeader) -> Result<()> {
    head.set_version(http::Version::HTTP_11);
    let no_body = session.req_header().method == http::Method::HEAD
        || matches!(head.status.as_u16(), 204 | 304);
    if !no_body && head.headers.get(http::header::CONTENT_LENGTH).is_none() {
        head.insert_header(http::header::TRANSFER_ENCODING, "chunked")?;
    }
    Ok(())
}

/// `upstream`, unless the client goes away first (then the upstream request is dropped, and its
/// connection with it: the instance sees the close).
async fn until_client_leaves<T>(
    session: &mut Session,
    upstream: impl Future<Output = Result<T>>,
) -> Result<T> {
    tokio::select! {
        biased;
        r = upstream => r.map_err(|e| e.into_up()),
        gone = session.downstream_session.read_body_or_idle(true) => Err(match gone {
            Err(e) => e.into_down(),
            Ok(_) => Error::explain(ErrorType::ConnectionClosed, "the client went away").into_down(),
        }),
    }
}
