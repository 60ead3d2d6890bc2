//! The HTTP side of one backend instance: the validation ladder, up to the method dispatch.
//!
//! This file owns what every request goes through; the shapes of the answers are
//! [`super::respond`], the instance [`super::instance`], the method dispatch
//! [`super::dispatch`], tools/call and prompts/get (MRTR) [`super::mrtr`], and the SSE answers
//! (progress, logging, listen streams) [`super::stream`].
//!
//! One endpoint, `POST /mcp`. Checks run in this order (the spec does not fix one; this is
//! ours), first failure wins: path (404) → `Origin` / `Host` (403) → HTTP method (405,
//! `Allow: POST`) → `Content-Type` (415) → body size (413) → envelope (400, -32700/-32600) → headers against body, version,
//! `_meta` (400, -32020/-32022/-32602, via [`crate::mcp::check`]) → notification (202) →
//! unknown method (404/-32601) → client capability (400/-32021) → `Mcp-Param-*` (400/-32020)
//! → handler. Errors raised by a handler (unknown tool, bad arguments, rejected
//! `requestState`) go in band with HTTP 200, as the TypeScript SDK does.

use bytes::Bytes;
use http::{header as h, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use super::instance::{Instance, Shared};
use super::respond::{full, json_response, reject, Body};
use crate::mcp::{
    check_request, codes, envelope, error_body, Claims, VersionPolicy, DEFAULT_ENDPOINT,
    PROTOCOL_VERSION,
};

/// The one protocol version this server implements.
pub(crate) const POLICY: VersionPolicy = VersionPolicy::Exactly(&[PROTOCOL_VERSION]);

/// How long a client may take to send its body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) async fn handle(
    inst: Arc<Instance>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    Ok(serve(&inst, req).await)
}

// ---------------------------------------------------------------------------------------------
// The ladder

async fn serve(inst: &Arc<Instance>, req: Request<Incoming>) -> Response<Body> {
    let shared = &inst.shared;
    if req.uri().path() != DEFAULT_ENDPOINT {
        return full(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            format!(
                "Not found: {}. The MCP endpoint of this server is POST {DEFAULT_ENDPOINT}.\n",
                req.uri().path()
            ),
        );
    }
    if let Some(r) = check_origin_and_host(req.headers(), shared) {
        return r;
    }
    if req.method() != Method::POST {
        let msg = format!(
            "HTTP method {} is not allowed: MCP 2026-07-28 uses POST {DEFAULT_ENDPOINT} only (no GET stream, no DELETE session)",
            req.method()
        );
        let mut r = json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            error_body(None, codes::INVALID_REQUEST, &msg, None),
        );
        r.headers_mut()
            .insert(h::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    if !is_json(req.headers()) {
        let msg = "Unsupported Content-Type: send the JSON-RPC message with Content-Type: application/json";
        return json_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            error_body(None, codes::INVALID_REQUEST, msg, None),
        );
    }
    let limit = shared.body_limit;
    let declared = req
        .headers()
        .get(h::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body, limit).await {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    let (env, params) = match envelope::parse_keeping_params(&bytes) {
        Ok(parsed) => parsed,
        Err(e) => return reject(&e.rejection(), e.id()),
    };
    let claims = Claims::read(&parts.headers);
    if let Err(rej) = check_request(&claims, &env, POLICY) {
        return reject(&rej, env.id.as_deref());
    }
    let Some(id) = env.id.as_deref() else {
        // A notification: nothing in this revision needs one from a client over HTTP.
        let mut r = Response::new(Either::Left(Full::new(Bytes::new())));
        *r.status_mut() = StatusCode::ACCEPTED;
        return r;
    };
    // A bounded instance works on its turn: the delay and the answer take one of its slots.
    let _turn = match &inst.work {
        Some(w) => w.clone().acquire_owned().await.ok(),
        None => None,
    };
    let delay = shared.delay_for(env.method.as_deref().unwrap_or(""), env.name.as_deref());
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    super::dispatch::dispatch(inst, &parts.headers, &env, params, id).await
}

/// 413 for a body past the instance's `limit`.
fn too_large(limit: usize) -> Response<Body> {
    let msg = format!("Request body too large: the limit is {limit} bytes; send smaller arguments");
    json_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        error_body(None, codes::INVALID_REQUEST, &msg, None),
    )
}

/// The whole body, within `limit` bytes and [`BODY_TIMEOUT`]; else the answer saying which.
async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, Response<Body>> {
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, limit).collect()).await {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large(limit))
        }
        Ok(Err(_)) => {
            let msg = "The request body could not be read (the connection broke mid-body); send the request again";
            Err(json_response(
                StatusCode::BAD_REQUEST,
                error_body(None, codes::INVALID_REQUEST, msg, None),
            ))
        }
        Err(_) => {
            let msg = format!(
                "The request body did not arrive within {}s; send it again",
                BODY_TIMEOUT.as_secs()
            );
            Err(json_response(
                StatusCode::REQUEST_TIMEOUT,
                error_body(None, codes::INVALID_REQUEST, &msg, None),
            ))
        }
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(h::CONTENT_TYPE)
        .is_some_and(|v| crate::mcp::media::is_json(v.as_bytes()))
}

/// Split `host[:port]` (with `[v6]` literals) and return the host.
fn host_part(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.find(']').map_or(authority, |i| &authority[..=i]);
    }
    authority
        .rsplit_once(':')
        .filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
        .map_or(authority, |(h, _)| h)
}

/// 403 when `Origin` is present and not allowed, or `Host` names a host this server does not
/// answer to (DNS rebinding).
fn check_origin_and_host(headers: &HeaderMap, shared: &Shared) -> Option<Response<Body>> {
    let forbidden = |msg: String| {
        tracing::debug!("forbidden: {msg}");
        Some(json_response(
            StatusCode::FORBIDDEN,
            error_body(None, codes::INVALID_REQUEST, &msg, None),
        ))
    };
    if let Some(origin) = headers.get(h::ORIGIN) {
        if !shared.origins.allows(origin.as_bytes()) {
            let o = origin.to_str().unwrap_or("");
            return forbidden(format!(
                "Origin {o:?} is not allowed to call this MCP server; start it with --allow-origin {o} if this page should have access"
            ));
        }
    }
    if let (Some(allowed), Some(host)) = (&shared.hosts, headers.get(h::HOST)) {
        let name = host_part(host.to_str().unwrap_or("").trim());
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(name)) {
            return forbidden(format!(
                "Host {name:?} is not a name this server answers to (DNS rebinding protection); start it with --allow-host {name} to serve it"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_parts() {
        assert_eq!(host_part("127.0.0.1:7001"), "127.0.0.1");
        assert_eq!(host_part("[::1]:80"), "[::1]");
        assert_eq!(host_part("localhost"), "localhost");
        assert_eq!(host_part("evil.example.com"), "evil.example.com");
    }
}
