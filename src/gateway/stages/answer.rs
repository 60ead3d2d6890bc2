//! Answer stage: the gateway's own answers, and which answer each failure gets.
//!
//! Every answer is a complete JSON response with a JSON-RPC error body (see
//! [`crate::mcp::Rejection`]), so that dual-era clients never fall back to `initialize`. This
//! module maps pingora's errors to those answers, in one place, with the rule that blame goes
//! where it belongs: a request that never reached an instance is 502 / -31003, an instance that
//! did not answer in time 504 / -31004, a client that did not send its request 400 / -31005, and
//! an instance that failed after the request was delivered 502 / -31006 (never re-sent).

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::{Error, ErrorSource, ErrorType, Result};
use serde_json::value::RawValue;

use crate::mcp::envelope::EnvelopeError;
use crate::mcp::{codes, Rejection};

/// A refusal, with the request id to echo when it could be read.
pub(crate) type Refusal = (Rejection, Option<Box<RawValue>>);

/// A stage's word on a request that has passed the body check: carry on, refuse it with this
/// answer (which `journey::steps::refuse`, the one place a refusal becomes the client's answer,
/// writes with the request's id), or the stage answered it itself (a cache hit, a merged list).
#[derive(Debug)]
pub(crate) enum Verdict {
    Next,
    Refuse(Rejection),
    Answered,
}

/// The body is over `limits.max_body_bytes`.
pub(crate) fn too_large(limit: usize) -> Rejection {
    Rejection::new(
        413,
        codes::GATEWAY_BODY_TOO_LARGE,
        "body-too-large",
        format!("The request body is larger than this gateway's limit of {limit} bytes (limits.max_body_bytes)"),
    )
}

/// The client's body could not be read completely.
pub(crate) fn body_incomplete(why: impl std::fmt::Display) -> Rejection {
    Rejection::new(
        400,
        codes::GATEWAY_REQUEST_INCOMPLETE,
        "body-incomplete",
        format!("The request body could not be read completely: {why}"),
    )
}

/// The client took longer than `timeouts.request_body` to send its whole body.
pub(crate) fn body_timeout(limit: std::time::Duration) -> Rejection {
    Rejection::new(
        408,
        codes::GATEWAY_REQUEST_INCOMPLETE,
        "body-timeout",
        format!("The request body did not arrive within {limit:?} (timeouts.request_body)"),
    )
}

/// A body of unknown length (h2 without `content-length`, chunked) over `max` bytes, for a pool
/// only pingora's pipe reaches (TLS or h2 instances), that ended with its `max`-th byte:
/// the pipe replays at most `max` bytes of a body read before the check, so it cannot be sent.
pub(crate) fn length_required(pool: &str, max: usize) -> Rejection {
    Rejection::new(
        411,
        codes::INVALID_REQUEST,
        "length-required",
        format!(
            "A request body over {max} bytes without a declared length cannot be checked and \
             forwarded to pool {pool} (its instances are reached over TLS or HTTP/2): send it \
             with Content-Length"
        ),
    )
}

/// A request trailer section (RFC 9110 §6.5), refused whatever it holds: an MCP request has no
/// use for one, an HTTP/1.1 upstream framed by `Content-Length` cannot receive it, and the
/// fields in it (a pseudo-header, malformed by RFC 9113 §8.1; a `content-length`) are read
/// differently by different components.
pub(crate) fn trailers() -> Rejection {
    Rejection::new(
        400,
        codes::INVALID_REQUEST,
        "request-trailers",
        "The request carries a trailer section after its body; MCP requests have none and the \
         gateway forwards none: send the request without trailers"
            .to_string(),
    )
}

/// The answer to a body that is not one usable JSON-RPC request, with its id when read.
pub(crate) fn envelope_rejection(e: EnvelopeError) -> Refusal {
    let rej = e.rejection();
    let id = match e {
        EnvelopeError::Invalid { id, .. } => id,
        EnvelopeError::Parse(_) => None,
    };
    (rej, id)
}

/// The error that cuts off an upstream request the gateway refused mid-body.
pub(crate) fn refused_error() -> Box<Error> {
    Error::explain(
        ErrorType::Custom("mcp-edge refused the request"),
        "request refused by the gateway",
    )
}

/// Whether a pingora error is the client's doing (it went away, or stopped sending).
pub(crate) fn is_downstream(e: &Error) -> bool {
    e.esource() == &ErrorSource::Downstream
}

/// The answer for a request that could not be proxied. `instance` names where it was going.
pub(crate) fn upstream_failure(etype: &ErrorType, downstream: bool, instance: &str) -> Rejection {
    use ErrorType::*;
    match etype {
        // Whatever pingora calls it (a client that sends bytes after its body shows up as a
        // ConnectError), a failure on the client's side is the client's.
        _ if downstream => Rejection::new(
            400,
            codes::GATEWAY_REQUEST_INCOMPLETE,
            "request-incomplete",
            format!("The request could not be read from the client: {}", etype.as_str()),
        ),
        ConnectTimedout | ConnectRefused | ConnectNoRoute | ConnectError | SocketError | BindError => Rejection::new(
            502,
            codes::GATEWAY_UPSTREAM_UNAVAILABLE,
            "upstream-unavailable",
            format!("The upstream instance {instance} could not be reached ({}); the request was not delivered", etype.as_str()),
        ),
        ReadTimedout | WriteTimedout => Rejection::new(
            504,
            codes::GATEWAY_UPSTREAM_TIMEOUT,
            "upstream-timeout",
            format!("The upstream instance {instance} did not answer in time ({})", etype.as_str()),
        ),
        _ => Rejection::new(
            502,
            codes::GATEWAY_UPSTREAM_FAILED,
            "upstream-failed",
            format!(
                "The upstream instance {instance} failed after the request was sent ({}); it was not re-sent because tools/call may have side effects",
                etype.as_str()
            ),
        ),
    }
}

/// The answer when the TLS handshake with an instance failed (`why` says how): not delivered.
pub(crate) fn upstream_tls_failure(instance: &str, why: &str) -> Rejection {
    Rejection::new(
        502,
        codes::GATEWAY_UPSTREAM_UNAVAILABLE,
        "upstream-tls",
        format!("The upstream instance {instance} could not be reached: {why}; the request was not delivered"),
    )
}

/// Write a complete JSON response from the gateway itself.
pub(crate) async fn respond(
    session: &mut Session,
    status: u16,
    body: Vec<u8>,
    extra: &[(&'static str, String)],
) -> Result<()> {
    respond_as(session, status, Some(crate::mcp::media::JSON), body, extra).await
}

/// Write a complete response: `status`, its `content_type` (`None`: no `Content-Type`), the
/// `extra` headers, and `body` with its length. Built as parts, with no case map: the names go
/// out as written here (lower case), each typed once; JSON's type is a static value.
pub(crate) async fn respond_as(
    session: &mut Session,
    status: u16,
    content_type: Option<&str>,
    body: Vec<u8>,
    extra: &[(&'static str, String)],
) -> Result<()> {
    let (mut parts, ()) = http::Response::new(()).into_parts();
    parts.status = http::StatusCode::from_u16(status)
        .map_err(|_| Error::explain(ErrorType::InternalError, "no HTTP status"))?;
    let invalid = || Error::explain(ErrorType::InvalidHTTPHeader, "an answer's header");
    let h = &mut parts.headers;
    h.reserve(4 + extra.len());
    if let Some(ct) = content_type {
        let json = crate::mcp::media::JSON;
        let value = match ct == json {
            true => http::HeaderValue::from_static(json),
            false => http::HeaderValue::from_str(ct).map_err(|_| invalid())?,
        };
        h.insert(http::header::CONTENT_TYPE, value);
    }
    h.insert(http::header::CONTENT_LENGTH, body.len().into());
    for (k, v) in extra {
        let name = http::HeaderName::from_bytes(k.as_bytes()).map_err(|_| invalid())?;
        h.insert(name, http::HeaderValue::from_str(v).map_err(|_| invalid())?);
    }
    let resp = ResponseHeader::from(parts);
    session.write_response_header(Box::new(resp), false).await?;
    session
        .write_response_body(Some(Bytes::from(body)), true)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_blamed_on_the_side_that_failed() {
        let cases = [
            (
                ErrorType::ConnectRefused,
                false,
                502,
                "upstream-unavailable",
            ),
            (
                ErrorType::ConnectTimedout,
                false,
                502,
                "upstream-unavailable",
            ),
            (ErrorType::ReadTimedout, false, 504, "upstream-timeout"),
            (ErrorType::ConnectionClosed, false, 502, "upstream-failed"),
            // A client that stopped sending is the client's fault, not a slow instance.
            (ErrorType::ReadTimedout, true, 400, "request-incomplete"),
            (ErrorType::ConnectionClosed, true, 400, "request-incomplete"),
            // pingora's "Sent data after end of body" on the client side.
            (ErrorType::ConnectError, true, 400, "request-incomplete"),
        ];
        for (etype, downstream, status, reason) in cases {
            let r = upstream_failure(&etype, downstream, "127.0.0.1:1");
            assert_eq!(
                (r.status, r.reason),
                (status, reason),
                "{etype:?} {downstream}"
            );
        }
    }

    #[test]
    fn an_unparsable_body_is_answered_without_an_id() {
        let e = crate::mcp::envelope::parse(b"{nope").unwrap_err();
        let (rej, id) = envelope_rejection(e);
        assert_eq!(
            (rej.status, rej.code, id.is_none()),
            (400, codes::PARSE_ERROR, true)
        );
    }
}
