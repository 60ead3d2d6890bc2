//! `h2_to_h1`: which h2 requests are malformed for an HTTP/1.1 hop, and cookie crumbs.

use http::{HeaderName, HeaderValue};
use mcp_edge::gateway::transport::h2_to_h1::{admit, join_cookies};
use pingora::http::RequestHeader;
use proptest::prelude::*;

use super::check;

const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Header fields: the rules' own names in any case, near misses, ordinary fields.
fn fields() -> impl Strategy<Value = Vec<(HeaderName, HeaderValue)>> {
    let name = prop_oneof![
        proptest::sample::select(&CONNECTION_SPECIFIC[..]).prop_map(str::to_owned),
        Just("te".to_owned()),
        Just("TE".to_owned()),
        Just("cookie".to_owned()),
        Just("Cookie".to_owned()),
        proptest::sample::select(
            &[
                "connections",
                "keep_alive",
                "x-upgrade",
                "tee",
                "t",
                "trailer"
            ][..]
        )
        .prop_map(str::to_owned),
        "[a-z][a-z0-9-]{0,10}",
        "(?i:connection|upgrade|keep-alive)",
    ];
    let value = prop_oneof![
        Just("trailers".to_owned()),
        Just("Trailers".to_owned()),
        Just("trailers, gzip".to_owned()),
        Just(" trailers".to_owned()),
        "[ -~]{0,16}",
    ];
    let field = (name, value).prop_filter_map("a valid field", |(n, v)| {
        Some((
            HeaderName::from_bytes(n.as_bytes()).ok()?,
            HeaderValue::from_str(&v).ok()?,
        ))
    });
    proptest::collection::vec(field, 0..8)
}

#[test]
fn admit_refuses_exactly_the_h2_requests_with_a_connection_specific_field() {
    check(
        "h2 admit",
        2_000,
        (fields(), any::<bool>()),
        |(fields, h2)| {
            let mut b = http::Request::builder()
                .method("POST")
                .uri("https://gw/mcp");
            b = b.version(if h2 {
                http::Version::HTTP_2
            } else {
                http::Version::HTTP_11
            });
            for (n, v) in &fields {
                b = b.header(n, v);
            }
            let parts = b.body(()).unwrap().into_parts().0;
            let malformed = fields.iter().any(|(n, v)| {
                CONNECTION_SPECIFIC.contains(&n.as_str())
                    || (n == "te" && !v.as_bytes().eq_ignore_ascii_case(b"trailers"))
            });
            prop_assert_eq!(admit(&parts).is_err(), h2 && malformed, "{:?}", fields);
            Ok(())
        },
    );
}

#[test]
fn join_cookies_yields_the_crumbs_joined_in_order() {
    check("h2 cookies", 2_000, fields(), |fields| {
        let mut req = RequestHeader::build("POST", b"/mcp", None).unwrap();
        for (n, v) in &fields {
            req.append_header(n.clone(), v.clone()).unwrap();
        }
        let before = req.headers.clone();
        join_cookies(&mut req).unwrap();
        let crumbs: Vec<&[u8]> = fields
            .iter()
            .filter(|(n, _)| n == "cookie")
            .map(|(_, v)| v.as_bytes())
            .collect();
        let got: Vec<&[u8]> = req
            .headers
            .get_all("cookie")
            .iter()
            .map(|v| v.as_bytes())
            .collect();
        if crumbs.is_empty() {
            prop_assert!(got.is_empty());
        } else {
            prop_assert_eq!(got, vec![crumbs.join(&b"; "[..])]);
        }
        let others = |h: &http::HeaderMap| -> Vec<(HeaderName, HeaderValue)> {
            h.iter()
                .filter(|(n, _)| *n != "cookie")
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect()
        };
        prop_assert_eq!(
            others(&req.headers),
            others(&before),
            "other fields untouched"
        );
        Ok(())
    });
}
