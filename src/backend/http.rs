//! The HTTP side of one backend instance: the validation ladder, up to the method dispatch.
//!
//! This file owns what every request goes through and the shapes of the answers; the method
//! dispatch is in [`super::dispatch`], tools/call and prompts/get (MRTR) in [`super::mrtr`],
//! and the SSE answers (progress, logging, listen streams) in [`super::stream`].
//!
//! One endpoint, `POST /mcp`. Checks run in this order (the spec does not fix one; this is
//! ours), first failure wins: path (404) → `Origin` / `Host` (403) → HTTP method (405,
//! `Allow: POST`) → `Content-Type` (415) → body size (413) → envelope (400, -32700/-32600) → headers against body, version,
//! `_meta` (400, -32020/-32022/-32602, via [`crate::mcp::check`]) → notification (202) →
//! unknown method (404/-32601) → client capability (400/-32021) → `Mcp-Param-*` (400/-32020)
//! → handler. Errors raised by a handler (unknown tool, bad arguments, rejected
//! `requestState`) go in band with HTTP 200, as the TypeScript SDK does.

use bytes::Bytes;
use futures::channel::mpsc;
use futures::SinkExt;
use http::{header as h, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

use super::state::StateCodec;
use crate::mcp::{
    check_request, codes, envelope, error_body, meta, result_body, result_type, sse_event, Claims,
    Rejection, VersionPolicy, DEFAULT_ENDPOINT, PROTOCOL_VERSION,
};

/// The one protocol version this server implements.
pub(crate) const POLICY: VersionPolicy = VersionPolicy::Exactly(&[PROTOCOL_VERSION]);

/// How long a client may take to send its body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Interval of SSE keep-alive comments on listen streams.
pub(super) const KEEPALIVE: Duration = Duration::from_secs(15);

pub(crate) type SseRx = mpsc::Receiver<Result<Frame<Bytes>, Infallible>>;
pub(super) type SseTx = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;
/// Response body: a buffered JSON answer, or an SSE stream fed by a task.
pub(crate) type Body = Either<Full<Bytes>, StreamBody<SseRx>>;

/// A list-changed event, fanned out to the listen streams of every instance of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    Tools,
    Prompts,
}

/// What the instances of one pool share.
use super::ledger::Ledger;
use super::tasks::TaskStore;

pub(crate) struct Shared {
    pub codec: StateCodec,
    pub ledger: Ledger,
    /// Allowed `Origin` values: the local ones and `--allow-origin` (`*` = any), matched by the
    /// gateway's rule ([`crate::config::OriginsConfig::allows`]).
    pub origins: crate::config::OriginsConfig,
    /// Allowed `Host` names (without port); `None` = not checked.
    pub hosts: Option<Vec<String>>,
    pub changes: broadcast::Sender<Change>,
    /// Tasks (Tasks extension) created by the instances of this pool.
    pub tasks: TaskStore,
    /// Where the caller's identity comes from: this header (set by a gateway that verified
    /// the caller), or, when `None`, the bearer token.
    pub principal_header: Option<http::HeaderName>,
    pub shutdown: watch::Receiver<bool>,
    pub body_limit: usize,
    /// Added to every answer ([`super::PoolOptions::delay`]).
    pub delay: Duration,
    /// Added to `tools/call` answers of these tools.
    pub tool_delays: Vec<(String, Duration)>,
    /// Most requests each instance works on at once (`--max-concurrent`; 0: no bound).
    pub max_concurrent: usize,
}

impl Shared {
    /// How long to hold the answer to a request of `method` on `name` (`--delay`,
    /// `--tool-delay`).
    pub(crate) fn delay_for(&self, method: &str, name: Option<&str>) -> Duration {
        let tool = (method == crate::mcp::methods::TOOLS_CALL)
            .then(|| {
                self.tool_delays
                    .iter()
                    .find(|(t, _)| Some(t.as_str()) == name)
            })
            .flatten()
            .map_or(Duration::ZERO, |(_, d)| *d);
        self.delay + tool
    }

    /// The principal of a request: SHA-256 of the bearer token, or, with a principal header
    /// configured, of that header's one value (`anonymous` when it is absent or repeated).
    pub(crate) fn principal(&self, headers: &HeaderMap) -> String {
        let Some(name) = &self.principal_header else {
            return super::state::principal_of(crate::mcp::header::bearer_token(headers));
        };
        let mut values = headers.get_all(name).iter();
        match (values.next().and_then(|v| v.to_str().ok()), values.next()) {
            (Some(v), None) if !v.trim().is_empty() => {
                super::state::principal_of(Some(&format!("subject:{}", v.trim())))
            }
            _ => "anonymous".into(),
        }
    }
}

/// One instance: its id and the `_meta` every result carries.
pub(crate) struct Instance {
    pub id: String,
    pub shared: Arc<Shared>,
    meta: Value,
    /// The owner hint in the ids of the tasks this instance creates
    /// ([`crate::mcp::tasks::owner_hint`] of its advertised address).
    pub task_hint: String,
    /// Turns to work on a request (`--max-concurrent`): more wait, so latency rises with load.
    work: Option<Arc<tokio::sync::Semaphore>>,
}

impl Instance {
    /// An instance reachable at `advertise` (`host:port`, as a gateway's pool lists it).
    pub(crate) fn new(id: String, shared: Arc<Shared>, advertise: &str) -> Self {
        let meta = json!({
            meta::SERVER_INFO: {"name": "mcp-edge-backend", "version": env!("CARGO_PKG_VERSION")},
            meta::EDGE_INSTANCE: id,
        });
        Instance {
            id,
            meta,
            task_hint: crate::mcp::tasks::owner_hint(advertise),
            work: (shared.max_concurrent > 0)
                .then(|| Arc::new(tokio::sync::Semaphore::new(shared.max_concurrent))),
            shared,
        }
    }
}

pub(crate) async fn handle(
    inst: Arc<Instance>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    Ok(serve(&inst, req).await)
}

// ---------------------------------------------------------------------------------------------
// Responses

pub(super) fn full(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(Either::Left(Full::new(body.into())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(h::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

pub(super) fn json_response(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    full(status, "application/json", body)
}

pub(super) fn reject(rej: &Rejection, id: Option<&RawValue>) -> Response<Body> {
    tracing::debug!(
        reason = rej.reason,
        status = rej.status,
        code = rej.code,
        "rejected: {}",
        rej.message
    );
    let status = StatusCode::from_u16(rej.status).unwrap_or(StatusCode::BAD_REQUEST);
    json_response(status, rej.body(id))
}

/// An in-band JSON-RPC error (HTTP 200).
pub(super) fn in_band(
    id: &RawValue,
    code: i32,
    message: &str,
    data: Option<&Value>,
) -> Response<Body> {
    json_response(StatusCode::OK, error_body(Some(id), code, message, data))
}

pub(super) fn sse_response(rx: SseRx) -> Response<Body> {
    let mut r = Response::new(Either::Right(StreamBody::new(rx)));
    let hs = r.headers_mut();
    hs.insert(
        h::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    hs.insert(h::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    hs.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

pub(super) async fn send_frame(tx: &mut SseTx, message: &[u8]) -> bool {
    tx.send(Ok(Frame::data(Bytes::from(sse_event(message)))))
        .await
        .is_ok()
}

impl Instance {
    /// Add `resultType` and the instance `_meta` to a result object.
    pub(super) fn finish(&self, kind: &str, mut result: Value) -> Value {
        if let Value::Object(m) = &mut result {
            m.insert(
                crate::mcp::mrtr::RESULT_TYPE.into(),
                Value::String(kind.into()),
            );
            m.insert("_meta".into(), self.meta.clone());
        }
        result
    }

    pub(super) fn ok(&self, id: &RawValue, result: Value) -> Response<Body> {
        json_response(
            StatusCode::OK,
            result_body(id, &self.finish(result_type::COMPLETE, result)),
        )
    }
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
    let too_large = || {
        let msg =
            format!("Request body too large: the limit is {limit} bytes; send smaller arguments");
        json_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            error_body(None, codes::INVALID_REQUEST, &msg, None),
        )
    };
    let declared = req
        .headers()
        .get(h::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, limit).collect()).await
    {
        Ok(Ok(c)) => c.to_bytes(),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return too_large()
        }
        Ok(Err(_)) => {
            let msg = "The request body could not be read (the connection broke mid-body); send the request again";
            return json_response(
                StatusCode::BAD_REQUEST,
                error_body(None, codes::INVALID_REQUEST, msg, None),
            );
        }
        Err(_) => {
            let msg = format!(
                "The request body did not arrive within {}s; send it again",
                BODY_TIMEOUT.as_secs()
            );
            return json_response(
                StatusCode::REQUEST_TIMEOUT,
                error_body(None, codes::INVALID_REQUEST, &msg, None),
            );
        }
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
