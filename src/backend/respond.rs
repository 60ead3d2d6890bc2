//! The shapes of a backend's answers: a whole JSON body ([`json_response`], [`full`]), a
//! refusal ([`reject`]) or an in-band JSON-RPC error ([`in_band`]), and an SSE stream fed by a
//! task ([`sse_response`], [`send_frame`]). Plain functions every handler uses.

use bytes::Bytes;
use futures::channel::mpsc;
use futures::SinkExt;
use http::{header as h, HeaderValue, Response, StatusCode};
use http_body_util::{Either, Full, StreamBody};
use hyper::body::Frame;
use serde_json::value::RawValue;
use serde_json::Value;
use std::convert::Infallible;
use std::time::Duration;

use serde_json::json;

use crate::mcp::{codes, error_body, meta, sse_event, Rejection};

/// Interval of SSE keep-alive comments on listen streams.
pub(super) const KEEPALIVE: Duration = Duration::from_secs(15);

pub(crate) type SseRx = mpsc::Receiver<Result<Frame<Bytes>, Infallible>>;
pub(super) type SseTx = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;
/// Response body: a buffered JSON answer, or an SSE stream fed by a task.
pub(crate) type Body = Either<Full<Bytes>, StreamBody<SseRx>>;

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

/// The refusal of a request that needs client capabilities it did not declare (HTTP 400,
/// -32021), naming them.
pub(super) fn missing_caps(required: Value) -> Rejection {
    let names: Vec<&str> = required
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    Rejection::new(
        400,
        codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "capability-missing",
        format!(
            "This request needs the client capabilit{} {} in params._meta[\"{}\"]; declare {} and retry",
            if names.len() == 1 { "y" } else { "ies" },
            names.join(", "),
            meta::CLIENT_CAPABILITIES,
            required
        ),
    )
    .with_data(json!({ "requiredCapabilities": required }))
}
