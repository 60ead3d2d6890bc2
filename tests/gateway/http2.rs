//! HTTP/2 downstream: h2 over TLS (ALPN) and h2c with prior knowledge (opt-in), with what works
//! on HTTP/1.1: the header↔body check (same JSON-RPC error as h1, duplicate `mcp-name` fields
//! refused), many concurrent streams on one connection, SSE event by event, RST_STREAM closing
//! the upstream stream, bodies up to the limit, rate limits.

use crate::support;
use bytes::Bytes;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support::tls::h2client::{connect_plain, connect_tls, exchange, request};
use crate::support::tls::{client_config, tls_listener, Ca, TempDir};
use crate::support::{call, call_headers, eventually, free_port, post_bytes, refs, Upstreams};
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;

struct Edge {
    gw: RunningGateway,
    tls: SocketAddr,
    h2c: SocketAddr,
    ca: Ca,
    _dir: TempDir,
}

/// A gateway with a TLS listener and a loopback h2c listener in front of `up`.
fn edge(up: &Upstreams, extra: &str) -> Edge {
    let dir = TempDir::new("h2");
    let ca = Ca::new("h2 test CA");
    let (cert, key) = ca.server("gw", &["localhost"], 30).write(&dir, "gw");
    let tls = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let h2c = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let list: Vec<String> = up.addrs.iter().map(|a| a.to_string()).collect();
    let y = format!(
        "work_stealing: true\nlisten:\n  mcp: {}\n  extra: [ {{ address: {h2c}, h2c: true }} ]\n  admin: 127.0.0.1:{}\npools:\n  default:\n    instances: [{}]\n    health: {{ check: off }}\ndefault_route: {{ pool: default }}\n{extra}",
        tls_listener(tls, &cert, &key, ""),
        free_port(),
        list.join(", ")
    );
    let cfg = Config::parse(&y, "h2.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"));
    Edge {
        gw: RunningGateway::start(cfg).unwrap(),
        tls,
        h2c,
        ca,
        _dir: dir,
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn json(b: &[u8]) -> serde_json::Value {
    serde_json::from_slice(b).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(b)))
}

#[test]
fn curl_h2c_prior_knowledge_works_where_enabled_only() {
    if !support::programs::have(support::programs::CURL) {
        return;
    }
    let up = Upstreams::start(1);
    let e = edge(&up, "");
    let args = |addr: SocketAddr| {
        vec![
            "--http2-prior-knowledge".to_string(),
            "-w".into(),
            "\n%{http_version} %{http_code}".into(),
            "-H".into(),
            "MCP-Protocol-Version: 2026-07-28".into(),
            "-H".into(),
            "Mcp-Method: tools/call".into(),
            "-H".into(),
            "Mcp-Name: echo".into(),
            "--data-binary".into(),
            call(5, "echo"),
            format!("http://{addr}/mcp"),
        ]
    };
    let a = args(e.h2c);
    let (rc, out, err) = support::tls::curl(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(rc, 0, "{err}");
    assert!(out.ends_with("\n2 200"), "{out}");
    assert_eq!(json(out.rsplit_once('\n').unwrap().0.as_bytes())["id"], 5);
    // HTTP/1.1 still works on the h2c listener.
    let r = support::raw(
        e.h2c,
        &post_bytes(&refs(&call_headers("echo")), call(6, "echo").as_bytes()),
    );
    assert_eq!(r.status, 200);
    // h2c is opt-in: the admin listener (plain, no h2c) does not speak it.
    let a = args(e.gw.admin_addr.unwrap());
    let (rc, out, _) = support::tls::curl(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        rc != 0 || !out.ends_with("\n2 200"),
        "h2c must be off where not enabled: {out}"
    );
}

#[test]
fn many_concurrent_streams_on_one_tls_connection() {
    let up = Upstreams::start(2);
    let e = edge(&up, "");
    rt().block_on(async {
        let send = connect_tls(e.tls, "localhost", client_config(&e.ca.pem, None, &[b"h2"])).await;
        let tasks: Vec<_> = (0..64u64)
            .map(|id| {
                let mut send = send.clone();
                tokio::spawn(async move {
                    let h = call_headers("echo");
                    let req = request("localhost", "https", &refs(&h));
                    let (status, headers, body) =
                        exchange(&mut send, req, call(id, "echo").as_bytes()).await;
                    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
                    assert!(headers.contains_key("x-mcp-edge-upstream"));
                    assert_eq!(json(&body)["id"], id);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert_eq!(up.count(), 64);
}

#[test]
fn header_body_disagreement_gets_the_same_error_as_on_h1_and_duplicate_names_are_refused() {
    let up = Upstreams::start(1);
    let e = edge(&up, "");
    let mut lie = call_headers("echo");
    lie.retain(|(k, _)| *k != "Mcp-Name");
    lie.push(("Mcp-Name", "delete_everything".into()));
    let h1 = support::raw(e.h2c, &post_bytes(&refs(&lie), call(9, "echo").as_bytes()));
    assert_eq!(h1.status, 400);
    rt().block_on(async {
        for (addr, tls) in [(e.tls, true), (e.h2c, false)] {
            let mut send = if tls {
                connect_tls(addr, "localhost", client_config(&e.ca.pem, None, &[b"h2"])).await
            } else {
                connect_plain(addr).await
            };
            let scheme = if tls { "https" } else { "http" };
            let (status, _, body) = exchange(
                &mut send,
                request("localhost", scheme, &refs(&lie)),
                call(9, "echo").as_bytes(),
            )
            .await;
            assert_eq!(status, 400);
            assert_eq!(
                json(&body),
                json(&h1.body),
                "h2 and h1 get the same JSON-RPC error"
            );
            assert_eq!(json(&body)["error"]["code"], -32020);

            // Two mcp-name fields, one agreeing with the body: refused, whichever comes first.
            for order in [["echo", "delete_everything"], ["delete_everything", "echo"]] {
                let mut h = call_headers("echo");
                h.retain(|(k, _)| *k != "Mcp-Name");
                h.push(("mcp-name", order[0].into()));
                h.push(("mcp-name", order[1].into()));
                let (status, _, body) = exchange(
                    &mut send,
                    request("localhost", scheme, &refs(&h)),
                    call(10, "echo").as_bytes(),
                )
                .await;
                assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
                let v = json(&body);
                assert_eq!(v["error"]["code"], -32020, "{v}");
                assert_eq!(v["id"], 10);
            }
        }
    });
    assert_eq!(up.count(), 0, "no refused request reached the upstream");
}

#[test]
fn sse_streams_event_by_event_and_rst_stream_cancels_the_upstream() {
    let up = Upstreams::start(1);
    let e = edge(&up, "");
    rt().block_on(async {
        let send = connect_tls(e.tls, "localhost", client_config(&e.ca.pem, None, &[b"h2"])).await;
        let mut send = send.ready().await.unwrap();
        let mut h = call_headers("slow");
        h.push(("x-test-sse", "10".into()));
        let start = Instant::now();
        let (resp, mut body_out) = send
            .send_request(request("localhost", "https", &refs(&h)), false)
            .unwrap();
        body_out
            .send_data(Bytes::from(call(1, "slow")), true)
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(10), resp)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let mut body = resp.into_body();
        let mut seen = String::new();
        while !seen.contains("\"progress\":1") {
            let chunk = tokio::time::timeout(Duration::from_secs(5), body.data())
                .await
                .expect("an event within 5 s")
                .expect("stream open")
                .unwrap();
            let _ = body.flow_control().release_capacity(chunk.len());
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("\"progress\":0") && !seen.contains("\"progress\":1") {
                // The first event before the stream's ~2 s end: not buffered.
                assert!(
                    start.elapsed() < Duration::from_millis(1500),
                    "first event after {:?}",
                    start.elapsed()
                );
            }
        }
        // RST_STREAM(CANCEL) on this stream only; the connection stays.
        body_out.send_reset(h2::Reason::CANCEL);
        drop(body);
        let h = call_headers("echo");
        let (status, _, _) = exchange(
            &mut send,
            request("localhost", "https", &refs(&h)),
            call(2, "echo").as_bytes(),
        )
        .await;
        assert_eq!(status, 200, "the connection survives a reset stream");
    });
    assert!(
        eventually(Duration::from_secs(5), || !up
            .log
            .lock()
            .unwrap()
            .cancelled_streams
            .is_empty()),
        "the upstream stream was not closed after RST_STREAM"
    );
    let (_, sent) = up.log.lock().unwrap().cancelled_streams[0];
    assert!(sent < 10, "the upstream kept streaming ({sent} events)");
}

#[test]
fn bodies_up_to_the_limit_and_rate_limits_work_on_h2() {
    let up = Upstreams::start(1);
    let e = edge(
        &up,
        "limits: { max_body_bytes: 1048576 }\nrate_limits:\n  - { name: few, match: { name: limited }, rate: 2/m }\n",
    );
    rt().block_on(async {
        let mut send = connect_plain(e.h2c).await;
        // A 1 MiB body (padding in the arguments), byte identical at the upstream.
        let body_with = |pad: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"echo","arguments":{{"p":"{pad}"}},{}}}}}"#,
                support::META
            )
        };
        let big = body_with(&"x".repeat(1_048_576 - body_with("").len()));
        assert_eq!(big.len(), 1_048_576);
        let h = call_headers("echo");
        let (status, _, body) = exchange(&mut send, request("localhost", "http", &refs(&h)), big.as_bytes()).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(json(&body)["len"], big.len());
        let over = format!("{big} ");
        let (status, _, body) = exchange(&mut send, request("localhost", "http", &refs(&h)), over.as_bytes()).await;
        assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));

        let h = call_headers("limited");
        let mut statuses = Vec::new();
        for id in 0..3 {
            let (status, headers, _) =
                exchange(&mut send, request("localhost", "http", &refs(&h)), call(id, "limited").as_bytes()).await;
            if status == 429 {
                assert!(headers.contains_key("retry-after"));
            }
            statuses.push(status);
        }
        assert_eq!(statuses, [200, 200, 429]);
    });
    let m = support::http::request(e.gw.admin_addr.unwrap(), "GET", "/metrics", &[], b"").text();
    let limited = m
        .lines()
        .find(|l| l.starts_with("mcp_edge_requests_total{") && l.contains("code=\"-31001\""))
        .unwrap_or_else(|| panic!("no rate-limited request counted:\n{m}"));
    assert!(limited.ends_with(" 1"), "{limited}");
}

#[test]
fn a_stream_reset_mid_body_never_reaches_the_upstream_and_pseudo_headers_route_as_on_h1() {
    let up = Upstreams::start(1);
    let e = edge(&up, "");
    rt().block_on(async {
        let send = connect_tls(e.tls, "localhost", client_config(&e.ca.pem, None, &[b"h2"])).await;
        let mut send = send.ready().await.unwrap();
        let h = call_headers("echo");
        let (_resp, mut body) = send
            .send_request(request("localhost", "https", &refs(&h)), false)
            .unwrap();
        let full = call(1, "echo");
        body.send_data(Bytes::from(full[..full.len() / 2].to_string()), false)
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        body.send_reset(h2::Reason::CANCEL);
        tokio::time::sleep(Duration::from_millis(300)).await;

        // :path and :method are what h1's request line is: other paths 404, GET 405.
        let mut other = request("localhost", "https", &refs(&h));
        *other.uri_mut() = "https://localhost/other".parse().unwrap();
        let (status, _, body) = exchange(&mut send, other, full.as_bytes()).await;
        assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
        let mut get = request("localhost", "https", &refs(&h));
        *get.method_mut() = http::Method::GET;
        let (status, headers, _) = exchange(&mut send, get, b"").await;
        assert_eq!(status, 405);
        assert_eq!(headers["allow"], "POST");
    });
    assert_eq!(
        up.count(),
        0,
        "a request reset before its body ended never reached the upstream"
    );
}

#[test]
fn h2_connections_are_not_cut_by_the_http1_request_head_deadline() {
    // h2c (plain, prior knowledge) and h2 over TLS pass under the head deadline untouched: a
    // connection idle for longer than `request_head` between two requests keeps working.
    let up = Upstreams::start(1);
    let e = edge(&up, "timeouts: { request_head: 300ms }\n");
    rt().block_on(async {
        let plain = connect_plain(e.h2c).await;
        let tls = connect_tls(e.tls, "localhost", client_config(&e.ca.pem, None, &[b"h2"])).await;
        for (mut send, scheme) in [(plain, "http"), (tls, "https")] {
            for id in 1..=2u64 {
                if id == 2 {
                    tokio::time::sleep(Duration::from_millis(800)).await;
                }
                let h = call_headers("echo");
                let req = request("localhost", scheme, &refs(&h));
                let (status, _, body) = exchange(&mut send, req, call(id, "echo").as_bytes()).await;
                assert_eq!(
                    status,
                    200,
                    "{scheme} #{id}: {}",
                    String::from_utf8_lossy(&body)
                );
            }
        }
    });
    assert_eq!(up.count(), 4);
}
