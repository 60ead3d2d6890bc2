//! Span export through a test OTLP/HTTP receiver on loopback, which decodes what the gateway
//! sends with the official protobuf definitions (`opentelemetry-proto`): one span per leg with
//! the MCP attributes, the legs of an MRTR flow linked, an incoming `traceparent` (header or
//! `_meta`) continued, the context forwarded upstream, sampling followed, nothing when off.

use crate::support;
use crate::support::{config, eventually, Upstreams};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::gateway::RunningGateway;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An OTLP/HTTP receiver: every span of every export request, decoded.
struct Receiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<(String, Span)>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Receiver {
    fn start() -> Receiver {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let spans: Arc<Mutex<Vec<(String, Span)>>> = Arc::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let store = spans.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                l.set_nonblocking(true).unwrap();
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let serve = async {
                    loop {
                        let Ok((s, _)) = l.accept().await else { return };
                        let store = store.clone();
                        tokio::spawn(async move {
                            let svc =
                                service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                                    let store = store.clone();
                                    async move {
                                        assert_eq!(req.uri().path(), "/v1/traces");
                                        let ct = req.headers()["content-type"]
                                            .to_str()
                                            .unwrap()
                                            .to_owned();
                                        assert_eq!(ct, "application/x-protobuf");
                                        let body = req.into_body().collect().await?.to_bytes();
                                        let export = ExportTraceServiceRequest::decode(body)
                                            .expect("OTLP protobuf");
                                        for rs in export.resource_spans {
                                            let service = rs
                                                .resource
                                                .iter()
                                                .flat_map(|r| &r.attributes)
                                                .find(|a| a.key == "service.name")
                                                .and_then(|a| a.value.as_ref()?.value.clone())
                                                .map(|v| match v {
                                                    Any::StringValue(s) => s,
                                                    other => format!("{other:?}"),
                                                })
                                                .unwrap_or_default();
                                            for ss in rs.scope_spans {
                                                for sp in ss.spans {
                                                    store
                                                        .lock()
                                                        .unwrap()
                                                        .push((service.clone(), sp));
                                                }
                                            }
                                        }
                                        Ok::<_, hyper::Error>(hyper::Response::new(Full::new(
                                            Bytes::new(),
                                        )))
                                    }
                                });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(s), svc)
                                .await;
                        });
                    }
                };
                tokio::select! { _ = serve => {}, _ = rx => {} }
            });
        });
        Receiver {
            addr,
            spans,
            _stop: tx,
        }
    }

    fn yaml(&self, extra: &str) -> String {
        format!(
            "tracing:\n  enabled: true\n  endpoint: http://{}/v1/traces\n  service_name: edge-under-test\n{extra}",
            self.addr
        )
    }

    /// Wait for `n` spans (the batch processor exports every 500 ms).
    fn wait_for(&self, n: usize) -> Vec<Span> {
        let ok = eventually(Duration::from_secs(15), || {
            self.spans.lock().unwrap().len() >= n
        });
        let spans = self.spans.lock().unwrap().clone();
        assert!(ok, "{} spans arrived, expected {n}", spans.len());
        assert!(spans.iter().all(|(s, _)| s == "edge-under-test"));
        spans.into_iter().map(|(_, s)| s).collect()
    }
}

fn attr(s: &Span, key: &str) -> Option<String> {
    let v = s
        .attributes
        .iter()
        .find(|a| a.key == key)?
        .value
        .as_ref()?
        .value
        .clone()?;
    Some(match v {
        Any::StringValue(s) => s,
        Any::IntValue(i) => i.to_string(),
        other => format!("{other:?}"),
    })
}

use mcp_edge::mcp::hex::encode as hex;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

#[test]
fn the_legs_of_a_flow_are_spans_linked_to_each_other_with_mcp_attributes() {
    let rx = Receiver::start();
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let cfg = config(
        &[("mrtr", pool.addrs(), "balance: round_robin")],
        &format!(
            "routes:\n  - name: tools\n    match: {{method: tools/call}}\n    pool: mrtr\n{}",
            rx.yaml("")
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    // Leg 1 continues the client's trace from the traceparent header.
    let tp = format!("00-{TRACE}-{PARENT}-01");
    let params = json!({"name": "create_repo", "arguments": {"repo": "demo"}, "_meta": support::http::meta(json!({"elicitation": {}}))});
    let auth = [
        ("Authorization", "Bearer alice"),
        ("traceparent", tp.as_str()),
        ("tracestate", "vendor=1"),
    ];
    let r1 = support::http::rpc(gw.mcp_addr, json!(1), "tools/call", params.clone(), &auth);
    let state = r1.result()["requestState"].clone();
    // Leg 2 carries its trace context in _meta only (another trace: the client's next turn).
    let meta_trace = "11111111111111111111111111111111";
    let mut p2 = params.clone();
    p2["_meta"]["traceparent"] = json!(format!("00-{meta_trace}-2222222222222222-01"));
    p2["inputResponses"] =
        json!({"github_login": {"action": "accept", "content": {"name": "octocat"}}});
    p2["requestState"] = state;
    let r2 = support::http::rpc(
        gw.mcp_addr,
        json!(2),
        "tools/call",
        p2,
        &[("Authorization", "Bearer alice")],
    );
    assert_eq!(r2.result()["resultType"], "complete");
    // A refusal by the gateway is a span too, with its code.
    let bad = support::http::rpc(
        gw.mcp_addr,
        json!(3),
        "tools/call",
        params,
        &[("Mcp-Name", "other_tool")],
    );
    assert_eq!(bad.code(), Some(-32020));

    let spans = rx.wait_for(3);
    assert_eq!(spans.len(), 3, "one span per request");
    let by_round = |r: &str| {
        spans
            .iter()
            .find(|s| attr(s, "mcp_edge.mrtr.round").as_deref() == Some(r))
            .unwrap_or_else(|| panic!("no round {r} in {spans:?}"))
    };
    let (leg1, leg2) = (by_round("1"), by_round("2"));
    assert_eq!(
        hex(&leg1.trace_id),
        TRACE,
        "the header's trace is continued"
    );
    assert_eq!(hex(&leg1.parent_span_id), PARENT);
    assert_eq!(leg1.trace_state, "vendor=1");
    assert_eq!(
        hex(&leg2.trace_id),
        meta_trace,
        "_meta's trace is continued"
    );
    assert_eq!(hex(&leg2.parent_span_id), "2222222222222222");
    for s in [leg1, leg2] {
        assert_eq!(s.name, "tools/call create_repo");
        assert_eq!(s.kind, 2, "SPAN_KIND_SERVER");
        assert_eq!(attr(s, "mcp.method.name").as_deref(), Some("tools/call"));
        assert_eq!(attr(s, "gen_ai.tool.name").as_deref(), Some("create_repo"));
        assert_eq!(attr(s, "mcp_edge.route").as_deref(), Some("tools"));
        assert_eq!(attr(s, "mcp_edge.pool").as_deref(), Some("mrtr"));
        assert_eq!(attr(s, "http.response.status_code").as_deref(), Some("200"));
        let inst = attr(s, "mcp_edge.instance").unwrap();
        assert!(pool.addrs().iter().any(|a| a.to_string() == inst), "{inst}");
        assert!(s.end_time_unix_nano > s.start_time_unix_nano);
    }
    assert!(leg1.links.is_empty());
    assert_eq!(leg2.links.len(), 1, "leg 2 links to leg 1");
    assert_eq!(leg2.links[0].trace_id, leg1.trace_id);
    assert_eq!(leg2.links[0].span_id, leg1.span_id);
    let refused = spans
        .iter()
        .find(|s| attr(s, "mcp_edge.gateway_code").is_some())
        .unwrap();
    assert_eq!(
        attr(refused, "mcp_edge.gateway_code").as_deref(),
        Some("-32020")
    );
    assert_eq!(
        attr(refused, "error.type").as_deref(),
        Some("mcp-name-mismatch")
    );
    assert_eq!(
        attr(refused, "http.response.status_code").as_deref(),
        Some("400")
    );
}

#[test]
fn the_context_is_forwarded_upstream_and_sampling_is_followed() {
    let rx = Receiver::start();
    let up = Upstreams::start(1);
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        &format!(
            "default_route: {{pool: default}}\n{}",
            rx.yaml("  sample_ratio: 0.0\n")
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let h = support::call_headers("echo");
    // A sampled incoming context is recorded even at ratio 0, and forwarded with our span.
    let tp = format!("00-{TRACE}-{PARENT}-01");
    let mut with_tp = support::refs(&h);
    with_tp.push(("traceparent", &tp));
    assert_eq!(
        support::post(gw.mcp_addr, &with_tp, &support::call(1, "echo")).status,
        200
    );
    // A new trace at ratio 0 is not recorded, but still propagated (unsampled).
    assert_eq!(
        support::post(gw.mcp_addr, &support::refs(&h), &support::call(2, "echo")).status,
        200
    );
    let spans = rx.wait_for(1);
    let got = up.received();
    let sent = |i: usize| got[i].headers["traceparent"].to_str().unwrap().to_owned();
    let first = sent(0);
    assert_eq!(&first[..36], &format!("00-{TRACE}-"), "same trace");
    assert_eq!(&first[52..], "-01");
    assert_eq!(
        &first[36..52],
        hex(&spans[0].span_id),
        "the upstream's parent is the gateway's span"
    );
    assert_ne!(&first[36..52], PARENT);
    let second = sent(1);
    assert!(
        second.starts_with("00-") && second.ends_with("-00"),
        "{second}"
    );
    // A third, sampled request after it: once its span has arrived, a span of the second (ended
    // before it) would have too.
    assert_eq!(
        support::post(gw.mcp_addr, &with_tp, &support::call(3, "echo")).status,
        200
    );
    let spans = rx.wait_for(2);
    assert_eq!(spans.len(), 2, "the unsampled request made no span");
    assert!(
        spans.iter().all(|s| hex(&s.trace_id) == TRACE),
        "only the sampled trace's spans"
    );
}

#[test]
fn tracing_is_off_by_default_and_the_client_context_passes_untouched() {
    let up = Upstreams::start(1);
    let gw = support::simple_gateway(&up, "");
    assert!(gw.current().tracing.is_none());
    let tp = format!("00-{TRACE}-{PARENT}-01");
    let h = support::call_headers("echo");
    let mut hs = support::refs(&h);
    hs.push(("traceparent", &tp));
    assert_eq!(
        support::post(gw.mcp_addr, &hs, &support::call(1, "echo")).status,
        200
    );
    assert_eq!(up.received()[0].headers["traceparent"], tp.as_str());
}
