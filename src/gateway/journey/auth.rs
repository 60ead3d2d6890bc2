//! Auth stage glue: where the pingora phases call into [`crate::auth`]. Each function is one
//! call site in `mod.rs`: the metadata document and admission in `request_filter`, the upstream
//! header edits in `upstream_request_filter`, and the per-caller list filter in the response
//! filters. The decisions themselves are plain functions in `crate::auth`.

use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::Session;

use crate::auth::filter::{self, ListFilter};
use crate::auth::HeaderEdit;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::answer::respond;
use crate::gateway::stages::route::RouteRef;
use crate::mcp::Rejection;

/// Serve the Protected Resource Metadata (RFC 9728) on its well-known paths. `Some(answered)`
/// when the path was one of them.
pub(crate) async fn metadata(session: &mut Session, gw: &Gateway) -> Result<Option<bool>> {
    let Some(auth) = &gw.auth else {
        return Ok(None);
    };
    let path = session.req_header().uri.path();
    let Some(doc) = auth.metadata(path, &gw.config.endpoint) else {
        return Ok(None);
    };
    let doc = doc.to_vec();
    let extra = [("cache-control", "max-age=300".to_string())];
    respond(session, 200, doc, &extra).await?;
    Ok(Some(true))
}

/// Authenticate and authorize on the claimed headers: the caller's identity goes into `ctx`,
/// or the refusal comes back (its challenge already among the answer's headers).
pub(crate) async fn admit(
    session: &Session,
    ctx: &mut RequestCtx,
    gw: &Gateway,
    route: RouteRef,
) -> Result<(), Rejection> {
    let Some(auth) = &gw.auth else {
        return Ok(());
    };
    let req = session.req_header();
    let verdict = auth
        .admit(
            &req.headers,
            req.uri.query(),
            route,
            ctx.method.as_deref(),
            ctx.name.as_deref(),
        )
        .await;
    match verdict {
        Ok(identity) => {
            ctx.identity = identity;
            Ok(())
        }
        Err(refusal) => {
            if let Some(c) = refusal.challenge {
                ctx.extra_headers.push(("www-authenticate", c));
            }
            Err(refusal.rejection)
        }
    }
}

/// `Authorization` stripped (unless the pool is the token's audience), identity headers set;
/// list requests that will be filtered ask for uncompressed JSON only.
pub(crate) fn upstream_headers(ctx: &RequestCtx, upstream: &mut RequestHeader) -> Result<()> {
    let Some(auth) = &ctx.gw.auth else {
        return Ok(());
    };
    let pool = &ctx.gw.pools[ctx.pool].name;
    for edit in auth.upstream_edits(ctx.identity.as_deref(), pool) {
        match edit {
            HeaderEdit::Remove(h) => {
                upstream.remove_header(&h);
            }
            HeaderEdit::Set(h, v) => upstream.insert_header(h, v)?,
        }
    }
    if ctx.list_filter.is_some() {
        // The filter reads the result: plain JSON, not an SSE stream or a compressed body.
        upstream.insert_header(http::header::ACCEPT, "application/json")?;
        upstream.insert_header(http::header::ACCEPT_ENCODING, "identity")?;
    }
    Ok(())
}

/// The list filter's state when this request's list result is filtered for its caller
/// (decided in `request_filter`).
pub(crate) fn list_filter(gw: &Gateway, method: Option<&str>) -> Option<ListFilter> {
    let filters = gw.auth.as_ref().is_some_and(|a| a.filters(method));
    filters.then(ListFilter::default)
}

/// A list response to filter: hold its body (its length will change).
pub(crate) fn on_response_header(ctx: &mut RequestCtx, resp: &mut ResponseHeader) {
    let Some(lf) = ctx.list_filter.as_mut() else {
        return;
    };
    resp.remove_header(&http::header::CONTENT_LENGTH);
    // pingora drops this for HTTP/2 clients; HTTP/1.1 clients get a chunked body.
    let _ = resp.insert_header(http::header::TRANSFER_ENCODING, "chunked");
    let json = resp
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| crate::mcp::media::is_json(v.as_bytes()));
    if !json {
        // Whatever it is, the caller must not see it unfiltered: it is replaced by an error.
        lf.unreadable = true;
        let _ = resp.insert_header(http::header::CONTENT_TYPE, "application/json");
    }
}

/// Hold the list response's chunks; at its end, send the caller's own view instead.
pub(crate) fn on_response_body(ctx: &mut RequestCtx, body: &mut Option<Bytes>, end: bool) {
    let Some(lf) = ctx.list_filter.as_mut() else {
        return;
    };
    let hold = &mut lf.hold;
    let Some(auth) = ctx.gw.auth.as_ref() else {
        return;
    };
    let max = auth.config.list_filter.max_bytes;
    if let Some(chunk) = body.take() {
        hold.push(&chunk, max);
    }
    if !end {
        return;
    }
    let method = ctx.method.as_deref().unwrap_or("");
    let id = ctx.progress.envelope().and_then(|e| e.id.as_deref());
    let full = hold.take();
    let out = if hold.overflowed {
        let why = format!("larger than auth.list_filter.max_bytes = {max}");
        filter::unfilterable(id, method, &why)
    } else if lf.unreadable {
        filter::unfilterable(id, method, "the upstream did not answer with JSON")
    } else {
        let anonymous = crate::auth::Identity::anonymous();
        let who = ctx.identity.as_deref().unwrap_or(&anonymous);
        let table = &ctx.gw.table;
        let allowed =
            |m: &str, n: &str| auth.may_see(who, table.select_ref(Some(m), Some(n)), m, n);
        match filter::filter_list(&full, method, allowed) {
            Ok(Some(rewritten)) => rewritten,
            Ok(None) => full,
            Err(why) => filter::unfilterable(id, method, &why),
        }
    };
    *body = Some(Bytes::from(out));
}
