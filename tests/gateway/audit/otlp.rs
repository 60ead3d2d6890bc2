//! Audit records as OpenTelemetry logs (`audit.otlp`), received by a test OTLP/HTTP receiver on
//! loopback that decodes them with the official protobuf definitions (`opentelemetry-proto`):
//! one log record per call and per flow, its attributes the record's fields, beside the file
//! sink's lines; a collector that is down counts its records as dropped.

use super::{records, scratch};
use crate::support::http::call as mcp_call;
use crate::support::{config, eventually, sample, scrape};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::gateway::RunningGateway;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;
use serde_json::json;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One received log record: service name, event name, body, attributes as text.
type Log = (String, String, String, BTreeMap<String, String>);

fn text(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.and_then(|v| v.value.clone()) {
        Some(Any::StringValue(s)) => s,
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn decode(body: Bytes, store: &Mutex<Vec<Log>>) {
    let export = ExportLogsServiceRequest::decode(body).expect("OTLP protobuf");
    for rl in export.resource_logs {
        let attrs = rl.resource.iter().flat_map(|r| &r.attributes);
        let service = attrs
            .filter(|a| a.key == "service.name")
            .map(|a| text(a.value.as_ref()))
            .next()
            .unwrap_or_default();
        for lr in rl.scope_logs.into_iter().flat_map(|s| s.log_records) {
            let fields = lr
                .attributes
                .iter()
                .map(|a| (a.key.clone(), text(a.value.as_ref())))
                .collect();
            let entry = (
                service.clone(),
                lr.event_name.clone(),
                text(lr.body.as_ref()),
                fields,
            );
            store.lock().unwrap().push(entry);
        }
    }
}

/// An OTLP/HTTP logs receiver on loopback, until dropped.
struct Receiver {
    addr: SocketAddr,
    logs: Arc<Mutex<Vec<Log>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Receiver {
    fn start() -> Receiver {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let logs: Arc<Mutex<Vec<Log>>> = Arc::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let store = logs.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                l.set_nonblocking(true).unwrap();
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let serve = async {
                    while let Ok((s, _)) = l.accept().await {
                        let store = store.clone();
                        let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                            let store = store.clone();
                            async move {
                                assert_eq!(req.uri().path(), "/v1/logs");
                                let body = req.into_body().collect().await?.to_bytes();
                                decode(body, &store);
                                Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::new())))
                            }
                        });
                        tokio::spawn(async move {
                            let io = TokioIo::new(s);
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(io, svc)
                                .await;
                        });
                    }
                };
                tokio::select! { _ = serve => {}, _ = rx => {} }
            });
        });
        Receiver {
            addr,
            logs,
            _stop: tx,
        }
    }
}

#[test]
fn records_are_exported_as_opentelemetry_logs_beside_the_file() {
    let dir = scratch("otlp");
    let path = dir.join("audit.jsonl");
    let rx = Receiver::start();
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let cfg = config(
        &[("p", pool.addrs(), "balance: round_robin")],
        &format!(
            "default_route: {{pool: p}}\naudit:\n  sink: file\n  file: {{path: {}}}\n  otlp: {{endpoint: http://{}/v1/logs, service_name: edge-audit}}\n",
            path.display(),
            rx.addr
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    for i in 0..3 {
        let r = mcp_call(
            gw.mcp_addr,
            i,
            "echo",
            json!({"text": "hi"}),
            json!({}),
            None,
            json!({}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let got = || rx.logs.lock().unwrap().len();
    assert!(
        eventually(Duration::from_secs(10), || got() >= 3),
        "{} logs",
        got()
    );
    let logs = rx.logs.lock().unwrap().clone();
    assert_eq!(logs.len(), 3);
    let lines = records(&path);
    assert_eq!(lines.len(), 3, "the file has the same records");
    for ((service, event, body, f), line) in logs.iter().zip(&lines) {
        assert_eq!(
            (service.as_str(), event.as_str()),
            ("edge-audit", "mcp.audit")
        );
        assert_eq!(body, "tools/call echo: result");
        assert_eq!(f["mcp.audit.kind"], "call");
        assert_eq!(f["mcp.audit.outcome"], "result");
        assert_eq!(f["mcp.audit.pool"], "p");
        assert_eq!(
            f["mcp.audit.arguments_sha256"],
            line["arguments_sha256"].as_str().unwrap()
        );
    }
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_audit_records_total", &["sink=\"otlp\""]),
        3.0
    );
    assert_eq!(
        sample(&m, "mcp_edge_audit_records_total", &["sink=\"file\""]),
        3.0
    );
    drop(gw);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_collector_that_is_down_counts_its_records_as_dropped() {
    // A port nobody listens on: each export is refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let cfg = config(
        &[("p", pool.addrs(), "balance: round_robin")],
        &format!(
            "default_route: {{pool: p}}\naudit:\n  otlp: {{endpoint: http://{closed}/v1/logs}}\n"
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    for i in 0..4 {
        let r = mcp_call(
            gw.mcp_addr,
            i,
            "echo",
            json!({"text": "hi"}),
            json!({}),
            None,
            json!({}),
        );
        assert_eq!(
            r.status, 200,
            "the gateway answers whatever the collector does"
        );
    }
    let lost = || {
        let m = scrape(&gw);
        sample(&m, "mcp_edge_audit_dropped_total", &["why=\"otlp_error\""])
            + sample(&m, "mcp_edge_audit_dropped_total", &["why=\"queue_full\""])
    };
    assert!(
        eventually(Duration::from_secs(20), || lost() == 4.0),
        "lost {}",
        lost()
    );
    assert_eq!(
        sample(&scrape(&gw), "mcp_edge_audit_records_total", &[]),
        0.0
    );
}
