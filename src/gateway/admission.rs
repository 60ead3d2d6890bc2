//! Admission stage: what the request head alone decides, before routing and before the body.
//!
//! [`admit`] looks at the path, the HTTP method, `Origin`, the size of the headers and the
//! declared `Content-Length`, then reads the MCP claims (`Mcp-Method`, `Mcp-Name`,
//! `MCP-Protocol-Version`). It either refuses the request with the gateway's answer or hands
//! back an [`Admitted`] request: what it claims, and whether the headers already doom it (then
//! the body is read only to echo its id).
//!
//! Header *shapes* that another component could read differently are refused here too (issue
//! #12): a `Connection` header that would make the hop-by-hop rules delete a checked header, a
//! name like `Mcp_Name` that frameworks fold into `Mcp-Name`, a second `Origin`, `Host`,
//! `Content-Length` or `Authorization`, and an HTTP/1.1 request without `Host` (RFC 9112 §3.2).
//!
//! It never reads the body and never looks at an upstream; it is a plain function over the
//! request head and the config, tested without a socket.

use http::request::Parts;

use crate::config::Config;
use crate::mcp::header;
use crate::mcp::methods::name_field;
use crate::mcp::{codes, Claims, Rejection};

use super::answer::too_large;
use super::validate::POLICY;

/// A request whose head passed admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
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

/// Admit or refuse a request head.
pub fn admit(req: &Parts, config: &Config) -> Result<Admitted, Rejection> {
    let limits = &config.limits;
    if req.uri.path() != config.endpoint {
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
    if let Some(origin) = req.headers.get(http::header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !config.origins.allow.iter().any(|p| p.matches(origin)) {
            let msg = format!(
                "Origin {origin:?} is not allowed to call this gateway; add it to origins.allow"
            );
            return Err(Rejection::new(
                403,
                codes::INVALID_REQUEST,
                "origin-refused",
                msg,
            ));
        }
    }
    shape(req, config.auth.is_some())?;
    super::h2_to_h1::admit(req)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::parse(
            "pools: { p: { instances: [127.0.0.1:1] } }\ndefault_route: { pool: p }\nlimits: { max_body_bytes: 100, max_header_bytes: 400 }\n",
            "test.yaml",
        )
        .unwrap()
    }

    /// An HTTP/1.1 request head with `Host: gw` and these headers.
    fn head(method: &str, path: &str, headers: &[(&str, &str)]) -> Parts {
        head_without_host(method, path, &[&[("host", "gw")], headers].concat())
    }

    fn head_without_host(method: &str, path: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder().method(method).uri(path);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    const GOOD: &[(&str, &str)] = &[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", " get_weather "),
    ];

    fn refused(p: Parts) -> (u16, &'static str) {
        let r = admit(&p, &config()).unwrap_err();
        (r.status, r.reason)
    }

    #[test]
    fn a_good_head_is_admitted_with_its_claims() {
        let a = admit(&head("POST", "/mcp", GOOD), &config()).unwrap();
        assert_eq!(a.method.as_deref(), Some("tools/call"));
        assert_eq!(a.name.as_deref(), Some("get_weather"));
        assert!(!a.doomed);
    }

    #[test]
    fn path_method_origin_and_sizes_are_refused_before_the_body() {
        assert_eq!(refused(head("POST", "/other", GOOD)), (404, "not-found"));
        assert_eq!(
            refused(head("GET", "/mcp", GOOD)),
            (405, "method-not-allowed")
        );
        let evil = [GOOD, &[("origin", "https://evil.example")]].concat();
        assert_eq!(
            refused(head("POST", "/mcp", &evil)),
            (403, "origin-refused")
        );
        let big = "x".repeat(400);
        let fat = [GOOD, &[("x-pad", big.as_str())]].concat();
        assert_eq!(
            refused(head("POST", "/mcp", &fat)),
            (431, "headers-too-large")
        );
        let long = [GOOD, &[("content-length", "101")]].concat();
        assert_eq!(
            refused(head("POST", "/mcp", &long)),
            (413, "body-too-large")
        );
    }

    #[test]
    fn headers_that_doom_the_request_are_flagged_not_refused() {
        // The answer needs the body's id, so admission only flags it.
        let a = admit(
            &head("POST", "/mcp", &[("mcp-method", "tools/call")]),
            &config(),
        )
        .unwrap();
        assert!(a.doomed);
        let old = [
            ("mcp-protocol-version", "2025-06-18"),
            ("mcp-method", "tools/list"),
        ];
        assert!(
            admit(&head("POST", "/mcp", &old), &config())
                .unwrap()
                .doomed
        );
    }

    #[test]
    fn a_name_on_a_method_without_one_is_ignored() {
        let h = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
            ("mcp-name", "x"),
        ];
        assert_eq!(
            admit(&head("POST", "/mcp", &h), &config()).unwrap().name,
            None
        );
    }

    #[test]
    fn header_shapes_other_readers_merge_are_refused() {
        let with = |extra: &[(&str, &str)]| refused(head("POST", "/mcp", &[GOOD, extra].concat()));
        let dup = "duplicate-header";
        assert_eq!(
            with(&[
                ("origin", "http://localhost"),
                ("origin", "https://evil.example")
            ])
            .1,
            dup
        );
        assert_eq!(
            with(&[("content-length", "2"), ("content-length", "2")]).1,
            dup
        );
        assert_eq!(
            with(&[("authorization", "Bearer a"), ("authorization", "Bearer b")]).1,
            dup
        );
        assert_eq!(with(&[("host", "other")]).1, dup);
        assert_eq!(
            with(&[("connection", "keep-alive, Mcp-Name")]).1,
            "connection-lists-checked-header"
        );
        assert_eq!(
            with(&[("connection", "content-length")]).1,
            "connection-lists-checked-header"
        );
        assert_eq!(
            with(&[("mcp_name", "deploy_prod")]),
            (400, "ambiguous-header-name")
        );
        assert_eq!(
            with(&[("Mcp_Param_Region", "eu")]).1,
            "ambiguous-header-name"
        );
        // HTTP/1.1 without Host.
        assert_eq!(
            refused(head_without_host("POST", "/mcp", GOOD)).1,
            "host-missing"
        );
        // What stays allowed: hop-by-hop tokens, other underscores, one of each singleton.
        let fine = [
            ("connection", "keep-alive, x-trace"),
            ("x_api_key", "k"),
            ("origin", "http://localhost"),
        ];
        assert!(admit(&head("POST", "/mcp", &[GOOD, &fine].concat()), &config()).is_ok());
    }
}
