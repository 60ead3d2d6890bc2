//! After each hostile request, the listener that took it still answers HTTP/1.1 and h2 within
//! a bounded time: no request shape can stall a listener's thread. The shapes: a request
//! trailer section after a long h2 body (checked and sampled out, under and over the initial
//! flow-control window).

use bytes::Bytes;
use std::time::Duration;

use super::{edge, json, padded_call, rt, Edge};
use crate::support::tls::h2client::{connect_plain, exchange, request};
use crate::support::{call, call_headers, refs, Upstreams};

/// One ordinary call on HTTP/1.1 and one on a new h2c connection, each answered within 5 s.
pub fn still_answers(e: &Edge, after: &str) {
    let addr = e.gw.mcp_addr;
    let h1 = std::thread::spawn(move || {
        let h = call_headers("get_weather");
        crate::support::http::request(
            addr,
            "POST",
            "/mcp",
            &refs(&h),
            call(1, "get_weather").as_bytes(),
        )
        .status
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !h1.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "after {after}: the HTTP/1.1 listener did not answer within 5 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(h1.join().unwrap(), 200, "after {after}");
    let h2c = e.h2c;
    let status = rt().block_on(async move {
        tokio::time::timeout(Duration::from_secs(5), async move {
            let mut send = connect_plain(h2c).await;
            let h = call_headers("get_weather");
            exchange(
                &mut send,
                request("localhost", "http", &refs(&h)),
                call(2, "get_weather").as_bytes(),
            )
            .await
            .0
        })
        .await
        .unwrap_or_else(|_| panic!("after {after}: the h2c listener did not answer within 5 s"))
    });
    assert_eq!(status, 200, "after {after}");
}

/// An h2c call whose body (`len` bytes, no `content-length`) is followed by a trailer section;
/// the answer's status and body, or `None` when none came within 5 s.
async fn with_trailers(e: &Edge, len: usize) -> Option<(u16, Bytes)> {
    let send = connect_plain(e.h2c).await;
    let mut send = send.ready().await.unwrap();
    let h = call_headers("get_weather");
    let (resp, mut stream) = send
        .send_request(request("localhost", "http", &refs(&h)), false)
        .unwrap();
    let body = padded_call(9, "get_weather", len);
    stream.send_data(Bytes::from(body), false).unwrap();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-checksum", "abc".parse().unwrap());
    stream.send_trailers(trailers).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(5), resp)
        .await
        .ok()?
        .ok()?;
    let status = resp.status().as_u16();
    let mut b = resp.into_body();
    let mut out = Vec::new();
    while let Some(Ok(c)) = b.data().await {
        let _ = b.flow_control().release_capacity(c.len());
        out.extend_from_slice(&c);
    }
    Some((status, Bytes::from(out)))
}

#[test]
fn a_trailer_section_after_a_long_h2_body_is_refused_and_the_listener_keeps_answering() {
    let pipe = crate::support::raw::IN_PINGORAS_PIPE;
    for (sample, leg) in [("1.0", ""), ("0.0", ""), ("1.0", pipe), ("0.0", pipe)] {
        let up = Upstreams::start(1);
        let e = edge(
            up.addrs[0],
            &format!(
                "validation: {{ sample: {sample} }}\nlimits: {{ max_body_bytes: 1048576 }}\n{leg}"
            ),
        );
        for len in [60_000, 70_000, 300_000] {
            let shape = format!("sample {sample} {leg:?}, a {len} B h2 body and a trailer section");
            let answer = rt().block_on(with_trailers(&e, len));
            let (status, body) = answer.unwrap_or_else(|| panic!("{shape}: no answer within 5 s"));
            assert!(
                matches!(status, 400 | 411),
                "{shape}: {status} {}",
                String::from_utf8_lossy(&body)
            );
            assert_eq!(json(&body)["error"]["code"], -32600, "{shape}");
            still_answers(&e, &shape);
        }
        let bodies_with_pad = up
            .received()
            .iter()
            .filter(|s| s.body.len() >= 60_000)
            .count();
        assert_eq!(
            bodies_with_pad, 0,
            "sample {sample}: a request with trailers reached the upstream"
        );
    }
}
