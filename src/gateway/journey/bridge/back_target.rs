//! Where a request to a pool of 2025-era servers goes, and with which headers, through the
//! proxy's phases ([`crate::gateway::journey::phases`]): the instance balanced by
//! `upstream_peer`, the headers the gateway sends upstream set by `upstream_request_filter` (its
//! credential or the caller's token, the asserted ones), for a new call ([`target`]) and for a
//! resumed one, whose instance is fixed ([`target_headers`]).

use pingora::prelude::*;
use pingora::proxy::Session;

use crate::gateway::journey::legacy_up::wire::Up;
use crate::gateway::journey::phases::Phases;
use crate::gateway::journey::request::RequestCtx;

/// The instance to call (balanced: the `upstream_peer` phase) and how to reach it: the upstream
/// head's path and the headers the gateway sends upstream (the `upstream_request_filter` phase:
/// its credential or the caller's token, asserted ones).
pub(super) async fn target(
    phases: &impl Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
    version: &'static str,
) -> Result<Up> {
    phases.upstream_peer(session, ctx).await?;
    let idx = ctx.instance.expect("choose sets the instance");
    let addr = ctx.gw.pools[ctx.pool].instances[idx].addr;
    let mut head = session.req_header().clone();
    phases
        .upstream_request_filter(session, &mut head, ctx)
        .await?;
    let skip = |k: &str| {
        k.starts_with("mcp-")
            || matches!(
                k,
                "host"
                    | "content-length"
                    | "content-type"
                    | "accept"
                    | "connection"
                    | "transfer-encoding"
                    | "expect"
                    | "te"
                    | "upgrade"
            )
    };
    let carry = head
        .headers
        .iter()
        .filter(|(k, _)| !skip(k.as_str()))
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let path = head.uri.path().to_owned();
    Ok(up_to(ctx, (addr, path), version, carry))
}

/// The way to the pool's instance at `addr` for requests on `path`, sending `carry`, with the
/// gateway's timeouts.
pub(super) fn up_to(
    ctx: &RequestCtx,
    (addr, path): (std::net::SocketAddr, String),
    version: &'static str,
    carry: Vec<(String, String)>,
) -> Up {
    let t = &ctx.gw.config.timeouts;
    let (instance, peers) = crate::gateway::journey::legacy_up::way_to(&ctx.gw, ctx.pool, addr);
    Up {
        addr,
        instance,
        peers,
        path,
        version,
        carry,
        connect: t.connect,
        read: t.upstream_read,
        idle: t.upstream_idle,
        counted: ctx.gw.metrics.bridge.connections.clone(),
    }
}

/// The upstream headers of this request (for a resumed call, whose instance is fixed).
pub(super) async fn target_headers(
    phases: &impl Phases,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<Vec<(String, String)>> {
    let mut head = session.req_header().clone();
    phases
        .upstream_request_filter(session, &mut head, ctx)
        .await?;
    let keep = |k: &str| {
        matches!(k, "authorization" | "traceparent" | "tracestate")
            || ctx.gw.asserted.iter().any(|a| a.as_str() == k)
    };
    Ok(head
        .headers
        .iter()
        .filter(|(k, _)| keep(k.as_str()))
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect())
}
