//! Forward stage: the header policy of the request that goes upstream, and the peer it goes to.
//!
//! The body is never touched here: it leaves exactly as the client sent it. Headers leave as
//! the client sent them minus the hop-by-hop ones (RFC 9110 §7.6.1): the fixed list below and
//! every name the client listed in `Connection`. Unknown headers and `Mcp-Param-*` pass through.
//! The instance is chosen here too ([`choose`]): both legs (pingora's pipe and the direct one)
//! pick and prepare a request the same way.

use pingora::http::RequestHeader;
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error, ErrorType, Result};
use std::time::Instant;

use crate::gateway::journey::auth;

use crate::gateway::telemetry::trace;

use crate::config::{RetryLanding, Timeouts};
use crate::gateway::balance::stages::{Landing, Steer};
use crate::gateway::journey::request::RequestCtx;
use crate::mcp::header;

/// Headers that belong to one connection and are never forwarded.
pub(crate) const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

/// The headers to remove from a request going upstream: the hop-by-hop ones present, and those
/// named in `Connection`. Empty (and no allocation) in the common case.
pub(crate) fn hop_by_hop_names(headers: &http::HeaderMap) -> Vec<String> {
    // One pass over the names instead of a lookup per hop-by-hop name (names listed in
    // `Connection` need a `Connection` header).
    if !headers.keys().any(|k| HOP_BY_HOP.contains(&k.as_str())) {
        return Vec::new();
    }
    let mut names: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .filter(|s| !s.is_empty() && s != "close" && s != "keep-alive")
        .collect();
    names.extend(
        HOP_BY_HOP
            .iter()
            .filter(|n| headers.contains_key(**n))
            .map(|n| n.to_string()),
    );
    names
}

/// The peer for one instance (as its pool reaches it: plain or TLS, h1 or h2), with the
/// configured timeouts.
pub(crate) fn peer(mut peer: HttpPeer, t: &Timeouts) -> HttpPeer {
    peer.options.connection_timeout = Some(t.connect);
    peer.options.total_connection_timeout = Some(t.connect);
    peer.options.read_timeout = Some(t.upstream_read);
    peer.options.write_timeout = Some(t.upstream_write);
    peer.options.idle_timeout = Some(t.upstream_idle);
    peer
}

/// Balance: pick an instance of the request's pool (one it has not tried yet), note it in the
/// request and the instance's metrics, and return the peer that reaches it.
pub(crate) fn choose(headers: &http::HeaderMap, ctx: &mut RequestCtx) -> Result<HttpPeer> {
    use crate::gateway::stages::pipeline::{index_of, Step};
    ctx.ran.mark(index_of(Step::Balance));
    let gw = ctx.gw.clone();
    let pool = &gw.pools[ctx.pool];
    let idx = match ctx.pass.as_ref().map(|p| p.instance) {
        // A passed-through session's instance, and no other (it holds the session).
        Some(Some(i)) if ctx.tried.count() == 0 => i,
        Some(Some(i)) => {
            let msg = format!(
                "instance {} of pool {} did not answer",
                pool.instances[i].name, pool.name
            );
            return Err(Error::explain(ErrorType::ConnectNoRoute, msg));
        }
        _ => pick(headers, ctx)?,
    };
    ctx.release_instance();
    ctx.instance = Some(idx);
    ctx.tried.add(idx);
    ctx.upstream_since = Some(Instant::now());
    gw.upstream_metrics(ctx.pool, idx).in_flight.inc();
    pool.loads[idx].begin();
    ctx.loading = true;
    let inst = &pool.instances[idx];
    let base = gw.peers[ctx.pool].peer(inst.addr, &inst.name);
    let mut peer = peer(base, &gw.config.timeouts);
    if let Some(p) = &ctx.pass {
        // A session's standalone stream idles as long as the session has nothing to say; a
        // call's stream idles while its instance waits for the client's answer.
        let t = &gw.config;
        peer.options.read_timeout = match p.stream {
            true => None,
            false => Some(t.timeouts.upstream_read.max(t.legacy.answer_timeout)),
        };
    }
    Ok(peer)
}

/// The balancer's pick of an instance of the request's pool (one it has not tried yet).
fn pick(headers: &http::HeaderMap, ctx: &mut RequestCtx) -> Result<usize> {
    let gw = ctx.gw.clone();
    let pool = &gw.pools[ctx.pool];
    let steer = retry_steer(ctx);
    let picked = pool.pick_steered(
        ctx.method.as_deref(),
        ctx.name.as_deref(),
        headers,
        ctx.identity.as_deref(),
        ctx.tried,
        steer.unwrap_or_default(),
    );
    if steer.is_some() {
        let landing = picked.landing.unwrap_or(Landing::Untracked);
        ctx.landing = Some(landing);
        let labels = [pool.name.as_str(), landing.label()];
        gw.metrics
            .balance
            .retry_landing
            .with_label_values(&labels)
            .inc();
    }
    if let Some(r) = picked.task {
        let labels = [pool.name.as_str(), r.label()];
        gw.metrics.task_routing.with_label_values(&labels).inc();
    }
    if picked.moved {
        gw.metrics
            .balance
            .moved
            .with_label_values(&[&pool.name])
            .inc();
    }
    let idx = picked.index.ok_or_else(|| {
        let msg = format!("pool {} has no usable instance left", pool.name);
        Error::explain(ErrorType::ConnectNoRoute, msg)
    })?;
    if picked.probe {
        let labels = [pool.name.as_str(), pool.instances[idx].name.as_str()];
        gw.metrics.balance.probes.with_label_values(&labels).inc();
    }
    Ok(idx)
}

/// For a retry leg (a checked body with `requestState`) of a pool with
/// `mrtr.retry_landing: elsewhere`: the instances of its flow's previous leg and leg 1, as the
/// flows this replica follows know them (an empty steer when they do not). `None` for any other
/// request.
fn retry_steer(ctx: &RequestCtx) -> Option<Steer> {
    if ctx.gw.pools[ctx.pool].retry_landing != RetryLanding::Elsewhere {
        return None;
    }
    let digest = ctx.progress.envelope()?.request_state_digest?;
    let placement = ctx.gw.flows.as_ref().and_then(|f| f.placement(digest));
    let here = |at: Option<(usize, usize)>| at.filter(|(p, _)| *p == ctx.pool).map(|(_, i)| i);
    Some(
        placement.map_or_else(Steer::default, |(previous, first)| Steer {
            previous: here(previous),
            first: here(first),
        }),
    )
}

/// The request head that goes upstream: hop-by-hop headers removed, then the headers the
/// gateway asserts (auth's identity headers, the trace context: the request's trace ids are
/// chosen here, from the client's `traceparent`) cleared of every client spelling and set.
/// `upstream` starts as a copy of the client's head (once per attempt in pingora's pipe, once
/// per request on the direct leg); the client's own head is left as it came.
pub(crate) fn upstream_headers(upstream: &mut RequestHeader, ctx: &mut RequestCtx) -> Result<()> {
    let mut parent = None;
    if let Some(tracing) = &ctx.gw.tracing {
        let ratio = tracing.config.sample_ratio;
        let headers = &upstream.headers;
        let leg = ctx
            .trace
            .get_or_insert_with(|| trace::begin_request(headers, ctx.progress.envelope(), ratio));
        if tracing.config.propagate {
            parent = Some((leg.traceparent(), leg.tracestate.clone()));
        }
    }
    // The client's hop-by-hop headers go first, then every field a reader could take for a
    // header the gateway asserts: nothing the client lists in `Connection` can remove what
    // the gateway sets below, and nothing it sends can stand beside it.
    for name in hop_by_hop_names(&upstream.headers) {
        upstream.remove_header(name.as_str());
    }
    for name in header::shadows_of(&upstream.headers, &ctx.gw.asserted) {
        upstream.remove_header(&name);
    }
    auth::upstream_headers(ctx, upstream)?;
    crate::gateway::journey::pins::upstream_headers(ctx, upstream)?;
    crate::gateway::journey::seal::upstream_headers(ctx, upstream);
    crate::gateway::journey::credentials::apply(ctx, upstream)?;
    if let Some(f) = &ctx.federated {
        federated_head(upstream, ctx, f)?;
    }
    if ctx.pass.is_some() {
        // A 2025-era client's request goes on as it came: the claims the gateway wrote from
        // its body for the stages are not the instance's (`journey::bridge::pass`).
        upstream.remove_header(header::METHOD);
        upstream.remove_header(header::NAME);
    }
    crate::gateway::transport::h2_to_h1::join_cookies(upstream)?;
    if let Some((traceparent, tracestate)) = parent {
        upstream.insert_header(crate::mcp::header::TRACEPARENT, traceparent)?;
        if let Some(ts) = tracestate {
            upstream.insert_header(crate::mcp::header::TRACESTATE, ts.as_str())?;
        }
    }
    Ok(())
}

/// On a federated endpoint: the instance is asked at the gateway's `endpoint` path (a virtual
/// endpoint's path is the gateway's, not the servers'), and a prefixed call carries the
/// server's own name in `Mcp-Name`, as its body now does.
fn federated_head(
    upstream: &mut RequestHeader,
    ctx: &RequestCtx,
    f: &crate::gateway::federation::stages::Federated,
) -> Result<()> {
    let endpoint = ctx.gw.config.endpoint.as_str();
    if upstream.uri.path() != endpoint {
        let uri = match upstream.uri.query() {
            Some(q) => format!("{endpoint}?{q}"),
            None => endpoint.to_string(),
        };
        let uri: http::Uri = uri.parse().map_err(|e| {
            pingora::Error::explain(
                pingora::ErrorType::InternalError,
                format!("endpoint path: {e}"),
            )
        })?;
        upstream.set_uri(uri);
    }
    if let Some(name) = &f.rename {
        let value = header::encode_value(name);
        upstream.insert_header(header::NAME, value.as_ref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn hop_by_hop_and_connection_listed_headers_are_removed() {
        let mut h = map(&[
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("te", "trailers"),
            ("mcp-param-region", "eu"),
            ("x-other", "kept"),
        ]);
        for n in hop_by_hop_names(&h) {
            h.remove(n.as_str());
        }
        let names: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["mcp-param-region", "x-other"]);
    }

    #[test]
    fn a_request_without_hop_by_hop_headers_is_untouched() {
        let h = map(&[("mcp-method", "tools/call"), ("x-other", "kept")]);
        assert!(hop_by_hop_names(&h).is_empty());
    }
}
