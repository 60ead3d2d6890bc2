//! Admission stage: what the request head alone decides, before routing and before the body.
//!
//! [`admit`] looks at the path, the HTTP method, `Origin`, the size of the headers and the
//! declared `Content-Length`, then reads the MCP claims (`Mcp-Method`, `Mcp-Name`,
//! `MCP-Protocol-Version`). It either refuses the request with the gateway's answer or hands
//! back an [`Admitted`] request: what it claims, and whether the headers already doom it (then
//! the body is read only to echo its id).
//!
//! Header *shapes* that another component could read differently are refused here too
//! (docs/threat-model.md): a `Connection` header that would make the hop-by-hop rules delete a checked header, a
//! name like `Mcp_Name` that frameworks fold into `Mcp-Name`, a second `Origin`, `Host`,
//! `Content-Length` or `Authorization`, and an HTTP/1.1 request without `Host` (RFC 9112 §3.2).
//! So are the headers the config uses as keys ([`Config::key_headers`]: a rate limit's or a
//! hash pool's `header:<name>`): sent twice, or with a name that folds onto one (`x_tenant` for
//! `x-tenant`), the gateway would count or place the request by one copy while the upstream
//! reads another.
//!
//! It never reads the body and never looks at an upstream; it is a plain function over the
//! request head and the config, tested without a socket.

use http::request::Parts;
use http::HeaderName;

use crate::config::Config;
use crate::mcp::header::{self, KeyHeader};
use crate::mcp::methods::name_field;
use crate::mcp::{codes, Claims, Rejection};

use crate::gateway::stages::answer::too_large;
use crate::gateway::stages::validate::POLICY;

/// A request whose head passed admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Admitted {
    /// The claimed `Mcp-Method` (trimmed).
    pub method: Option<String>,
    /// The claimed, decoded `Mcp-Name`, for the methods that carry one (ignored on others).
    pub name: Option<String>,
    /// The headers alone doom the request (missing or malformed MCP headers, a refused version).
    pub doomed: bool,
    /// The client waits for `100 Continue` before sending its body.
    pub expects_continue: bool,
    /// The declared `Content-Length`, when there is one.
    pub content_length: Option<usize>,
}

/// Admit or refuse a request head; `keys` are the config's key headers
/// ([`Config::key_headers`], computed once per gateway).
pub(crate) fn admit(
    req: &Parts,
    config: &Config,
    keys: &[HeaderName],
) -> Result<Admitted, Rejection> {
    addressed(req, config)?;
    shape(req, config.auth.is_some())?;
    crate::gateway::transport::h2_to_h1::admit(req)?;
    key_headers_once(req, keys)?;
    let content_length = sizes(req, &config.limits)?;
    let expects_continue = req
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));

    let claims = Claims::read(&req.headers);
    let method = claims.method.value().map(str::to_owned);
    let name = match method.as_deref().and_then(name_field) {
        Some(_) => claims.name.value().map(str::to_owned),
        None => None,
    };
    Ok(Admitted {
        doomed: claims.doomed(POLICY),
        method,
        name,
        expects_continue,
        content_length,
    })
}

/// The request is addressed to an MCP endpoint of this gateway: its path (the endpoint or a
/// federated one), `POST`, and an allowed `Origin` when it has one.
fn addressed(req: &Parts, config: &Config) -> Result<(), Rejection> {
    let path = req.uri.path();
    let federated = || {
        let f = config.federation.iter().flat_map(|f| &f.endpoints);
        f.into_iter().any(|e| e.path == path)
    };
    if path != config.endpoint && !federated() {
        let msg = format!(
            "Not found: the MCP endpoint of this gateway is POST {}",
            config.endpoint
        );
        return Err(Rejection::new(
            404,
            codes::INVALID_REQUEST,
            "not-found",
            msg,
        ));
    }
    if req.method != http::Method::POST {
        let msg = format!(
            "Method {} is not allowed: MCP 2026-07-28 uses POST only",
            req.method
        );
        return Err(Rejection::new(
            405,
            codes::INVALID_REQUEST,
            "method-not-allowed",
            msg,
        ));
    }
    match req.headers.get(http::header::ORIGIN) {
        Some(origin) if !config.origins.allows(origin.as_bytes()) => {
            let origin = origin.to_str().unwrap_or("");
            let msg = format!(
                "Origin {origin:?} is not allowed to call this gateway; add it to origins.allow"
            );
            Err(Rejection::new(
                403,
                codes::INVALID_REQUEST,
                "origin-refused",
                msg,
            ))
        }
        _ => Ok(()),
    }
}

/// The head's size and the body's declared one within the limits; the declared length.
fn sizes(req: &Parts, limits: &crate::config::Limits) -> Result<Option<usize>, Rejection> {
    let header_bytes: usize = req
        .headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if header_bytes > limits.max_header_bytes {
        let msg = format!(
            "The request headers total {header_bytes} bytes, over this gateway's limit of {} (limits.max_header_bytes)",
            limits.max_header_bytes
        );
        return Err(Rejection::new(
            431,
            codes::INVALID_REQUEST,
            "headers-too-large",
            msg,
        ));
    }
    let content_length = req
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    if content_length.is_some_and(|n| n > limits.max_body_bytes) {
        return Err(too_large(limits.max_body_bytes));
    }
    Ok(content_length)
}

/// Refuse header shapes that two readers could read differently. With `auth` on, a second
/// `Authorization` is left to the auth stage, which answers it as RFC 6750 asks (400 with a
/// `WWW-Authenticate: Bearer error="invalid_request"` challenge).
fn shape(req: &Parts, auth: bool) -> Result<(), Rejection> {
    let bad = |reason: &'static str, msg: String| {
        Err(Rejection::new(400, codes::INVALID_REQUEST, reason, msg))
    };
    for name in header::SINGLETONS {
        if auth && name == "authorization" {
            continue;
        }
        if req.headers.get_all(name).iter().nth(1).is_some() {
            return bad(
                "duplicate-header",
                format!("The {name} header is sent more than once; send it once"),
            );
        }
    }
    if req.version == http::Version::HTTP_11 && !req.headers.contains_key(http::header::HOST) {
        return bad(
            "host-missing",
            "An HTTP/1.1 request must carry a Host header (RFC 9112 section 3.2)".into(),
        );
    }
    for v in req.headers.get_all(http::header::CONNECTION) {
        let listed = String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase();
        if let Some(name) = listed
            .split(',')
            .map(str::trim)
            .find(|n| header::is_checked(n))
        {
            return bad(
                "connection-lists-checked-header",
                format!(
                    "The Connection header lists {name:?}, a header this gateway checks; it would \
                     be removed before the request is forwarded. List only hop-by-hop headers"
                ),
            );
        }
    }
    if let Some(name) = req
        .headers
        .keys()
        .find(|n| header::folds_into_checked(n.as_str()))
    {
        return Err(Rejection::header_mismatch(
            "ambiguous-header-name",
            format!(
                "The header {name:?} becomes {:?} for readers that fold '_' into '-'; spell \
                 MCP headers with dashes",
                name.as_str().replace('_', "-")
            ),
        ));
    }
    Ok(())
}

/// Refuse a request that sends a key header twice, or under a name that frameworks fold onto
/// it: one reading for the gateway's rate limits and hash balancing, another for the upstream.
/// A key header listed in `Connection` passes: the gateway reads its one value and the upstream
/// none (a shard key may be hop-by-hop, `tests/gateway/direct_leg.rs`), so no reader sees another.
fn key_headers_once(req: &Parts, keys: &[HeaderName]) -> Result<(), Rejection> {
    for name in keys {
        let (reason, msg) = match header::key_header(&req.headers, name.as_str()) {
            KeyHeader::Absent | KeyHeader::One(_) => continue,
            KeyHeader::Repeated => (
                "duplicate-key-header",
                format!(
                    "The {name} header is sent more than once, and this gateway keys rate \
                     limits or load balancing on it; send it once"
                ),
            ),
            KeyHeader::Shadowed(other) => (
                "ambiguous-key-header",
                format!(
                    "The header {other:?} is read as {name:?} by frameworks that fold '_' into \
                     '-', and this gateway keys rate limits or load balancing on {name}; send it \
                     once, as {name} only"
                ),
            ),
        };
        return Err(Rejection::new(400, codes::INVALID_REQUEST, reason, msg));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
