//! HTTP/2 → HTTP/1.1: the rules of RFC 9113 §8 for a request that came over h2 and may go to an
//! HTTP/1.1 instance, in one place, so that the instance reads the same request the gateway
//! checked:
//! - **connection-specific fields** (`connection`, `keep-alive`, `proxy-connection`,
//!   `transfer-encoding`, `upgrade`; `te` other than `trailers`) make an h2 request malformed
//!   (§8.2.2): refused ([`admit`]; the `h2` crate already resets such a stream, this holds
//!   whatever reaches pingora);
//! - **cookie crumbs**: h2 may split `cookie` into several fields, which must be joined with
//!   `"; "` before an HTTP/1.1 hop (§8.2.3), or frameworks read one, the other or a list
//!   ([`join_cookies`], for every request: RFC 6265 §5.4 allows one `Cookie` line on HTTP/1.1
//!   too);
//! - **trailer sections** are refused whatever they hold, a pseudo-header (malformed by §8.1)
//!   included: see [`crate::gateway::stages::answer::trailers`], applied where the body is read;
//! - `:authority` becomes `Host` ([`crate::gateway::transport::upstream_h1::wire::to_http11`]).
//!
//! It never touches the body.

use http::request::Parts;
use pingora::http::RequestHeader;

use crate::mcp::{codes, Rejection};

/// Fields that belong to one HTTP/1.1 connection and make an h2 request malformed.
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Refuse an h2 request that carries a connection-specific field (RFC 9113 §8.2.2).
pub fn admit(req: &Parts) -> Result<(), Rejection> {
    if req.version != http::Version::HTTP_2 {
        return Ok(());
    }
    let te_other = req
        .headers
        .get_all(http::header::TE)
        .iter()
        .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"trailers"));
    let field = CONNECTION_SPECIFIC
        .iter()
        .find(|n| req.headers.contains_key(**n))
        .copied()
        .or(te_other.then_some("te"));
    match field {
        None => Ok(()),
        Some(name) => Err(Rejection::new(
            400,
            codes::INVALID_REQUEST,
            "h2-connection-specific-field",
            format!(
                "An HTTP/2 request must not carry the connection-specific field {name:?} \
                 (RFC 9113 section 8.2.2); remove it"
            ),
        )),
    }
}

/// Join several `cookie` fields into one, with `"; "` (RFC 9113 §8.2.3); one or none is left
/// as it is (no allocation).
pub fn join_cookies(req: &mut RequestHeader) -> pingora::Result<()> {
    let mut crumbs = req.headers.get_all(http::header::COOKIE).iter();
    let (Some(first), Some(_)) = (crumbs.next(), crumbs.next()) else {
        return Ok(());
    };
    let mut joined = first.as_bytes().to_vec();
    for c in req.headers.get_all(http::header::COOKIE).iter().skip(1) {
        joined.extend_from_slice(b"; ");
        joined.extend_from_slice(c.as_bytes());
    }
    let value = http::HeaderValue::from_bytes(&joined).map_err(|e| {
        pingora::Error::because(pingora::ErrorType::InvalidHTTPHeader, "joining cookie", e)
    })?;
    req.insert_header(http::header::COOKIE, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h2(headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder()
            .method("POST")
            .uri("https://gw/mcp")
            .version(http::Version::HTTP_2);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn connection_specific_fields_make_an_h2_request_malformed() {
        for (k, v) in [
            ("connection", "keep-alive"),
            ("keep-alive", "5"),
            ("proxy-connection", "x"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("te", "gzip"),
        ] {
            let r = admit(&h2(&[(k, v)])).unwrap_err();
            assert_eq!((r.status, r.code), (400, codes::INVALID_REQUEST), "{k}");
        }
        assert!(admit(&h2(&[("te", "trailers"), ("x-other", "1")])).is_ok());
        let mut h1 = h2(&[("connection", "close")]);
        h1.version = http::Version::HTTP_11;
        assert!(admit(&h1).is_ok(), "HTTP/1.1 has its own rules");
    }

    #[test]
    fn cookie_crumbs_are_joined_in_order() {
        let mut req = RequestHeader::build("POST", b"/mcp", None).unwrap();
        req.append_header("cookie", "a=1").unwrap();
        req.append_header("cookie", "b=2").unwrap();
        req.append_header("cookie", "c=3").unwrap();
        join_cookies(&mut req).unwrap();
        let all: Vec<_> = req.headers.get_all("cookie").iter().collect();
        assert_eq!(all, ["a=1; b=2; c=3"]);
        let mut one = RequestHeader::build("POST", b"/mcp", None).unwrap();
        one.append_header("cookie", "a=1").unwrap();
        join_cookies(&mut one).unwrap();
        assert_eq!(one.headers["cookie"], "a=1");
    }
}
