//! The h2 → HTTP/1.1 translation (src/gateway/transport/h2_to_h1.rs), on real h2 connections: cookie
//! crumbs joined, connection-specific fields and trailer sections (with a pseudo-header in
//! them, malformed by RFC 9113 §8.1) refused before any instance sees the request.

use super::h2wire::{send, Outcome};
use super::watchdog::still_answers;
use super::{edge, rt};
use crate::support::tls::h2client::{connect_plain, exchange, request};
use crate::support::{call, call_headers, refs, Upstreams};

/// The pseudo-headers and MCP headers of a tools/call of `name` to the h2c listener.
fn fields(name: &str) -> Vec<(String, String)> {
    let mut f: Vec<(String, String)> = vec![
        (":method".into(), "POST".into()),
        (":scheme".into(), "http".into()),
        (":authority".into(), "localhost".into()),
        (":path".into(), "/mcp".into()),
    ];
    f.extend(
        call_headers(name)
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v)),
    );
    f
}

/// How many requests with this JSON-RPC id the instance received (the listener checks between
/// the attacks send ids 1 and 2).
fn with_id(up: &Upstreams, id: u64) -> usize {
    let needle = format!("\"id\":{id},");
    let hit = |b: &[u8]| b.windows(needle.len()).any(|w| w == needle.as_bytes());
    up.received().iter().filter(|r| hit(&r.body)).count()
}

fn as_refs(f: &[(String, String)]) -> Vec<(&str, &str)> {
    f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[test]
fn cookie_crumbs_reach_an_http1_instance_as_one_cookie() {
    let up = Upstreams::start(1);
    let e = edge(up.addrs[0], "");
    rt().block_on(async {
        let mut send = connect_plain(e.h2c).await;
        let mut h = call_headers("echo");
        h.push(("cookie", "a=1".into()));
        h.push(("cookie", "b=2".into()));
        h.push(("cookie", "session=alice".into()));
        let (status, _, body) = exchange(
            &mut send,
            request("localhost", "http", &refs(&h)),
            call(1, "echo").as_bytes(),
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    });
    let got = up.received();
    let cookies: Vec<_> = got[0].headers.get_all("cookie").iter().collect();
    assert_eq!(cookies, ["a=1; b=2; session=alice"]);
}

#[test]
fn a_pseudo_header_in_a_trailer_section_is_refused_and_never_forwarded() {
    let up = Upstreams::start(1);
    let e = edge(up.addrs[0], "");
    let f = fields("echo");
    let body = call(3, "echo");
    for trailers in [
        vec![(":method", "GET")],
        vec![(":path", "/admin")],
        vec![("x-checksum", "1")],
        vec![("content-length", "0")],
    ] {
        let out = send(e.h2c, &as_refs(&f), body.as_bytes(), &trailers);
        match &out {
            Outcome::Reset => {}
            Outcome::Answered(status, body) => {
                assert_eq!(
                    *status,
                    0x8c,
                    "400, {trailers:?}: {}",
                    String::from_utf8_lossy(body)
                );
                let j: serde_json::Value = serde_json::from_slice(body).unwrap();
                assert_eq!(j["error"]["code"], -32600, "{j}");
            }
            Outcome::Silent => panic!("{trailers:?}: no answer and no reset"),
        }
        still_answers(&e, &format!("trailers {trailers:?}"));
    }
    assert_eq!(
        with_id(&up, 3),
        0,
        "no request with trailers reached the instance"
    );
    // The listener still answers a plain request on the same kind of connection.
    let plain = send(e.h2c, &as_refs(&f), body.as_bytes(), &[]);
    assert!(matches!(plain, Outcome::Answered(0x88, _)), "{plain:?}");
}

#[test]
fn connection_specific_fields_in_an_h2_request_are_refused() {
    let up = Upstreams::start(1);
    let e = edge(up.addrs[0], "");
    let body = call(4, "echo");
    for (k, v) in [
        ("connection", "keep-alive"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "h2c"),
        ("te", "gzip"),
    ] {
        let mut f = fields("echo");
        f.push((k.into(), v.into()));
        let out = send(e.h2c, &as_refs(&f), body.as_bytes(), &[]);
        assert!(
            matches!(out, Outcome::Reset | Outcome::Answered(0x8c, _)),
            "{k}: {out:?}"
        );
        still_answers(&e, &format!("an h2 request with {k}"));
    }
    assert_eq!(
        with_id(&up, 4),
        0,
        "no malformed request reached the instance"
    );
    let mut f = fields("echo");
    f.push(("te".into(), "trailers".into()));
    let out = send(e.h2c, &as_refs(&f), body.as_bytes(), &[]);
    assert!(
        matches!(out, Outcome::Answered(0x88, _)),
        "te: trailers is allowed: {out:?}"
    );
}
