//! Pinned definitions on a request (`gateway::stages::pins`): the `pins` step and the lists.
//!
//! - **Calls** (`tools/call`, `prompts/get`) to a `hold` pool are judged on the head, after
//!   auth and limits, by the name the server knows (federation's rename applied): a changed
//!   definition is refused (-31017) before any upstream, the body never read past its id. The
//!   claimed name is safe to judge: on a `hold` pool the header↔body check always runs
//!   ([`crate::gateway::journey::pipeline::body::check_runs`]), so a body naming another tool
//!   is refused there.
//! - **A single pool's lists** (`tools/list`, `prompts/list` passing through to a pinning
//!   pool) are read whole at the end of the response (bounded like auth's list filter), the
//!   book learns them, and on a `hold` pool the changed entries are taken out. Such a list is
//!   asked for as plain JSON and is never served from, nor stored in, the edge cache.
//! - Federated pools are read from their catalogs (`federation::journey::refresh`) and their
//!   parts of merged lists (`federation::journey::answer`).

use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::Result;
use serde_json::Value;

use crate::config::pins::PinPolicy;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::pins::PinList;
use crate::mcp::lists::Kind;
use crate::mcp::{methods, Rejection};

/// The most bytes of a list response read for pins (past it, a `hold` pool's list is withheld,
/// a `flag` pool's passes unread).
pub(crate) const MAX_LIST_BYTES: usize = 8 << 20;

/// The pool's policy.
pub(crate) fn policy(gw: &Gateway, pool: usize) -> PinPolicy {
    gw.pin_policies.get(pool).copied().unwrap_or_default()
}

/// The `pins` step, on the head: `Err` refuses a held call; a list to read is marked.
pub(crate) fn on_head(gw: &Gateway, ctx: &mut RequestCtx) -> Result<(), Rejection> {
    let policy = policy(gw, ctx.pool);
    if policy == PinPolicy::Off {
        return Ok(());
    }
    let method = ctx.method.as_deref().unwrap_or("");
    let answered_here = ctx.federated.as_ref().is_some_and(|f| f.answer);
    let kind = match method {
        methods::TOOLS_CALL => Kind::Tools,
        methods::PROMPTS_GET => Kind::Prompts,
        methods::TOOLS_LIST | methods::PROMPTS_LIST if !answered_here => {
            ctx.pin_list = Some(PinList::default());
            return Ok(());
        }
        _ => return Ok(()),
    };
    if policy != PinPolicy::Hold {
        return Ok(());
    }
    let renamed = ctx.federated.as_ref().and_then(|f| f.rename.as_deref());
    let Some(name) = renamed.or(ctx.name.as_deref()) else {
        return Ok(());
    };
    match gw.pins.held(&gw.pools[ctx.pool].name, kind, name) {
        Some(rej) => Err(rej),
        None => Ok(()),
    }
}

/// A list read for pins asks for plain JSON (not an SSE stream, not compressed).
pub(crate) fn upstream_headers(ctx: &RequestCtx, upstream: &mut RequestHeader) -> Result<()> {
    if ctx.pin_list.is_some() {
        upstream.insert_header(http::header::ACCEPT, "application/json")?;
        upstream.insert_header(http::header::ACCEPT_ENCODING, "identity")?;
    }
    Ok(())
}

/// A list to read: hold its body (its length may change).
pub(crate) fn on_response_header(ctx: &mut RequestCtx, resp: &mut ResponseHeader) {
    let Some(pl) = ctx.pin_list.as_mut() else {
        return;
    };
    let json = resp
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| crate::mcp::media::is_json(v.as_bytes()));
    if !json {
        // Not JSON: a hold pool's list cannot be judged and is withheld; a flag pool's passes.
        pl.unreadable = true;
        if policy(&ctx.gw, ctx.pool) != PinPolicy::Hold {
            ctx.pin_list = None;
            return;
        }
        let _ = resp.insert_header(http::header::CONTENT_TYPE, "application/json");
    }
    resp.remove_header(&http::header::CONTENT_LENGTH);
    let _ = resp.insert_header(http::header::TRANSFER_ENCODING, "chunked");
}

/// Hold the list's chunks; at its end, learn it and send it without its held entries.
pub(crate) fn on_response_body(ctx: &mut RequestCtx, body: &mut Option<Bytes>, end: bool) {
    let Some(pl) = ctx.pin_list.as_mut() else {
        return;
    };
    if let Some(chunk) = body.take() {
        pl.hold.push(&chunk, MAX_LIST_BYTES);
    }
    if !end {
        return;
    }
    let gw = ctx.gw.clone();
    let (pool, policy) = (&gw.pools[ctx.pool].name, policy(&gw, ctx.pool));
    let method = ctx.method.as_deref().unwrap_or("");
    let id = ctx.progress.envelope().and_then(|e| e.id.as_deref());
    let full = pl.hold.take();
    let unfilterable = |why: &str| crate::auth::filter::unfilterable(id, method, why);
    let out = if pl.hold.overflowed || pl.unreadable {
        // Only a hold pool's list gets here unread (a flag pool's was let through unheld).
        unfilterable("larger than the pins' 8 MiB bound, or not JSON; its tools cannot be judged against their pins")
    } else {
        match judge_list(&gw, pool, policy, method, &full) {
            Ok(Some(rewritten)) => rewritten,
            Ok(None) => full,
            Err(_) if policy == PinPolicy::Flag => full,
            Err(why) => unfilterable(&why),
        }
    };
    *body = Some(Bytes::from(out));
}

/// Learn a list response; on a hold pool, the body without the held entries (`Ok(None)`:
/// unchanged, or an error response).
fn judge_list(
    gw: &Gateway,
    pool: &str,
    policy: PinPolicy,
    method: &str,
    body: &[u8],
) -> Result<Option<Vec<u8>>, String> {
    let Some(kind) = Kind::of_method(method) else {
        return Ok(None);
    };
    let mut doc: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the {method} response is not JSON: {e}"))?;
    let Some(result) = doc.get_mut("result").and_then(Value::as_object_mut) else {
        return Ok(None);
    };
    let Some(items) = result.get_mut(kind.member()).and_then(Value::as_array_mut) else {
        return Err(format!(
            "the {method} result has no {} array",
            kind.member()
        ));
    };
    let held = gw.pins.observe(pool, policy, kind, items);
    if held.is_empty() {
        return Ok(None);
    }
    items.retain(|it| {
        let name = it.get("name").and_then(Value::as_str);
        !name.is_some_and(|n| held.iter().any(|h| h == n))
    });
    Ok(Some(
        serde_json::to_vec(&doc).expect("a JSON value serializes"),
    ))
}

/// A merged list's part from `pool`: its items without the held ones (the book learns them).
pub(crate) fn filter_part(
    gw: &Gateway,
    pool: usize,
    kind: Kind,
    items: &[Value],
) -> Option<Vec<Value>> {
    let policy = policy(gw, pool);
    let held = gw.pins.observe(&gw.table.pools[pool], policy, kind, items);
    if held.is_empty() {
        return None;
    }
    let keep = |it: &&Value| {
        let name = it.get("name").and_then(Value::as_str);
        !name.is_some_and(|n| held.iter().any(|h| h == n))
    };
    Some(items.iter().filter(keep).cloned().collect())
}
