//! Seal glue: where the journey applies a pool's `requestState` seal
//! ([`crate::gateway::stages::seal`]). After the body check, [`on_checked`] notes who is calling
//! with which arguments and, on a retry, opens the sealed state and puts the server's own bytes
//! back into the body (or refuses the retry before any upstream); on the way back,
//! [`on_response_header`] and [`on_response_body`] seal the state of an `input_required`
//! result, in a JSON body (held whole) or in an SSE stream (event by event, unbuffered
//! otherwise).
//!
//! Who is calling: the verified subject when `auth` admitted a token; else a digest of the
//! `Authorization` header as sent; else the client's address (`stages::seal::caller`). Tasks
//! are not sealed (a task id is not a state), nor are methods without a name (`tools/call`,
//! `prompts/get` and `resources/read` carry states).

use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::proxy::Session;
use serde::Deserialize;
use serde_json::Value;

use crate::gateway::journey::request::RequestCtx;
use crate::gateway::stages::answer::Verdict;
use crate::gateway::stages::seal::{Leg, NotOpened, Out, JSON_HOLD_MAX};
use crate::mcp::methods::{name_field, NameField};
use crate::mcp::state_seal::{self, rewrite, Binding, Refused};
use crate::mcp::{codes, Rejection};

/// After the body check, on a sealing pool: note the caller and the arguments' digest, and on
/// a retry, open its state (the body then carries the server's bytes) or refuse it.
pub(crate) async fn on_checked(session: &Session, ctx: &mut RequestCtx, body: &Bytes) -> Verdict {
    let gw = ctx.gw.clone();
    let Some(seal) = gw.seals.get(ctx.pool).and_then(Option::as_ref) else {
        return Verdict::Next;
    };
    let (Some(method), Some(name)) = (ctx.method.as_deref(), ctx.name.as_deref()) else {
        return Verdict::Next;
    };
    if !matches!(name_field(method), Some(NameField::Name | NameField::Uri)) {
        return Verdict::Next;
    }
    let retry = ctx.progress.envelope().is_some_and(|e| e.has_request_state);
    let leg = Leg {
        caller: caller_of(session, ctx),
        arguments: retry.then(|| digest(method, name, body)),
        body: body.clone(),
        out: Out::Passing,
    };
    let verdict = if retry {
        let to = Binding {
            caller: &leg.caller,
            method,
            name,
            arguments: leg.arguments.as_deref().unwrap_or_default(),
        };
        // The body is kept in hand for the direct leg only, the one that can send it edited.
        let direct = !ctx.in_hand.is_empty();
        match rewrite::request_state(body) {
            _ if !direct => Err(NotOpened::Refused(Refused::NotSealed)),
            None => Err(NotOpened::Refused(Refused::NotSealed)),
            Some((token, start, end)) => seal
                .open(&token, &to)
                .await
                .map(|state| rewrite::splice(body, (start, end), &state)),
        }
    } else {
        Ok(Vec::new())
    };
    let pool = &gw.pools[ctx.pool].name;
    ctx.seal = Some(Box::new(leg));
    let metrics = &gw.metrics.seal;
    match verdict {
        Ok(_) if !retry => Verdict::Next,
        Ok(unsealed) => {
            metrics.opened.with_label_values(&[pool]).inc();
            ctx.body_len = unsealed.len();
            ctx.in_hand = Bytes::from(unsealed);
            Verdict::Next
        }
        Err(NotOpened::Refused(why)) => {
            let reason = why.reason();
            metrics.refused.with_label_values(&[pool, reason]).inc();
            let rej = Rejection::new(200, codes::INVALID_PARAMS, reason, why.message());
            Verdict::Refuse(rej)
        }
        Err(NotOpened::RecordUnavailable) => {
            let reason = "state-record-unavailable";
            metrics.refused.with_label_values(&[pool, reason]).inc();
            ctx.extra_headers.push(("retry-after", "1".to_string()));
            Verdict::Refuse(record_unavailable(pool))
        }
    }
}

/// 503 + `Retry-After: 1` + -31019: Redis could not say whether the state was used, and the
/// pool's `on_store_error: deny` will not forward it unchecked.
fn record_unavailable(pool: &str) -> Rejection {
    let msg = format!(
        "Pool {pool:?} records each requestState once in Redis, which did not answer in time; the state was not spent: send the same retry again"
    );
    Rejection::new(
        503,
        codes::GATEWAY_STATE_RECORD_UNAVAILABLE,
        "state-record-unavailable",
        msg,
    )
    .with_data(serde_json::json!({"pool": pool, "retryAfterSeconds": 1}))
}

/// The digest a state is bound to: the method, the name and the body's arguments.
fn digest(method: &str, name: &str, body: &[u8]) -> String {
    state_seal::arguments_digest(method, name, &arguments(body))
}

/// `params.arguments` of a checked body (`null` when absent).
pub(crate) fn arguments(body: &[u8]) -> Value {
    #[derive(Deserialize)]
    struct Request {
        params: Option<Params>,
    }
    #[derive(Deserialize)]
    struct Params {
        arguments: Option<Value>,
    }
    serde_json::from_slice::<Request>(body)
        .ok()
        .and_then(|r| r.params?.arguments)
        .unwrap_or(Value::Null)
}

/// Who is calling, as a state is bound to it (the module doc says which).
fn caller_of(session: &Session, ctx: &RequestCtx) -> String {
    let subject = ctx.identity.as_ref().map(|id| id.subject.as_str());
    let authorization = session
        .req_header()
        .headers
        .get(http::header::AUTHORIZATION);
    let ip = crate::gateway::journey::request::client_ip(&ctx.gw, session);
    crate::gateway::stages::seal::caller(subject, authorization.map(|a| a.as_bytes()), ip)
}

/// A request whose response may be sealed asks for it uncompressed.
pub(crate) fn upstream_headers(ctx: &RequestCtx, upstream: &mut RequestHeader) {
    if ctx.seal.is_some() {
        let _ = upstream.insert_header(http::header::ACCEPT_ENCODING, "identity");
    }
}

/// The response head: a JSON or SSE response of a sealing pool is read for its state (its
/// length may change: it goes on chunked).
pub(crate) fn on_response_header(ctx: &mut RequestCtx, resp: &mut ResponseHeader) {
    let Some(leg) = ctx.seal.as_deref_mut() else {
        return;
    };
    let Some(seal) = ctx.gw.seals.get(ctx.pool).and_then(Option::as_ref) else {
        return;
    };
    let ct = resp.headers.get(http::header::CONTENT_TYPE);
    let ct = ct.map_or(&b""[..], |v| v.as_bytes());
    let encoded = resp.headers.get(http::header::CONTENT_ENCODING).is_some();
    leg.out = if encoded {
        Out::Passing
    } else if crate::mcp::media::is_json(ct) {
        Out::Json(Vec::new())
    } else if crate::mcp::sse::is_event_stream(ct) {
        Out::Sse(rewrite::SseSealer::new(seal.config.max_bytes))
    } else {
        Out::Passing
    };
    if !matches!(leg.out, Out::Passing) {
        resp.remove_header(&http::header::CONTENT_LENGTH);
        // pingora drops this for HTTP/2 clients; HTTP/1.1 clients get a chunked body.
        let _ = resp.insert_header(http::header::TRANSFER_ENCODING, "chunked");
    }
}

/// One chunk of a sealing pool's response: held (JSON) or passed event by event (SSE), the
/// state of an `input_required` result sealed.
pub(crate) fn on_response_body(ctx: &mut RequestCtx, body: &mut Option<Bytes>, end: bool) {
    let gw = ctx.gw.clone();
    let (Some(leg), Some(seal)) = (
        ctx.seal.as_deref_mut(),
        gw.seals.get(ctx.pool).and_then(Option::as_ref),
    ) else {
        return;
    };
    let pool = gw.pools[ctx.pool].name.as_str();
    let metrics = &gw.metrics.seal;
    let (method, name) = (
        ctx.method.as_deref().unwrap_or(""),
        ctx.name.as_deref().unwrap_or(""),
    );
    let Leg {
        caller,
        arguments,
        body: request,
        out,
    } = leg;
    let max = seal.config.max_bytes;
    let mut sealer = |state: &str| {
        let arguments = arguments.get_or_insert_with(|| digest(method, name, request));
        let to = Binding {
            caller,
            method,
            name,
            arguments,
        };
        let token = seal.seal(&to, state);
        metrics.sealed.with_label_values(&[pool]).inc();
        if token.len() > max {
            let why = "sealed_too_large";
            metrics.unsealed.with_label_values(&[pool, why]).inc();
        }
        token
    };
    match out {
        Out::Passing => {}
        Out::Json(hold) => {
            if let Some(chunk) = body.take() {
                hold.extend_from_slice(&chunk);
            }
            if hold.len() > JSON_HOLD_MAX {
                let why = "body_too_large";
                metrics.unsealed.with_label_values(&[pool, why]).inc();
                *body = Some(Bytes::from(std::mem::take(hold)));
                leg.out = Out::Passing;
            } else if end {
                let full = std::mem::take(hold);
                let out = rewrite::seal_json(&full, &mut sealer).unwrap_or(full);
                *body = Some(Bytes::from(out));
            }
        }
        Out::Sse(sse) => {
            let had_given_up = sse.gave_up();
            let mut out = match body.take() {
                Some(chunk) => sse.feed(&chunk, &mut sealer),
                None => Vec::new(),
            };
            if end {
                out.extend(sse.finish(&mut sealer));
            }
            if sse.gave_up() && !had_given_up {
                let why = "event_too_large";
                metrics.unsealed.with_label_values(&[pool, why]).inc();
            }
            *body = (!out.is_empty() || end).then(|| Bytes::from(out));
        }
    }
}
