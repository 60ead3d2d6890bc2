//! The per-request work of flow tracking and tracing, as the gateway does it:
//!
//! - `flows/finished [off]`: a finished request with flows and tracing off (the whole cost when
//!   both are off: two checks);
//! - `flows/finished [flows on, not a flow leg]`: a plain tools/call with flows on;
//! - `flows/scan response [...]`: reading a typical response as it streams past (JSON, SSE),
//!   against the `input_required`-only scanner it replaced;
//! - `flows/mrtr leg`: a retry leg that continues a flow (digest of its state, the store's
//!   lookup, the next round's insert);
//! - `trace/begin [...]`: choosing a request's trace ids (incoming header, new trace) and the
//!   upstream `traceparent`;
//! - `trace/export sampled span`: building and queueing one sampled span with its attributes
//!   and a link (the exporter's thread sends it; here to a closed loopback port).

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_edge::config::Config;
use mcp_edge::gateway::journey::observe as follow;
use mcp_edge::gateway::telemetry::flows::{FlowStore, Leg, SpanRef};
use mcp_edge::gateway::telemetry::metrics::Outcome;
use mcp_edge::gateway::telemetry::trace::{self, SpanInfo, Tracing};
use mcp_edge::gateway::{Gateway, RequestCtx};
use mcp_edge::mcp::digest::state_digest;
use mcp_edge::mcp::result_scan::{ResultKind, ResultScanner, Verdict};
use mcp_edge::mcp::scan::InputRequiredScanner;

const COMPLETE: &str = r#"{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"Deployed billing to prod"}],"resultType":"complete","_meta":{"io.mcp-edge/instance":"i-1"}}}"#;
const STATE: &str =
    "v1.eyJ0b29sIjoiZGVwbG95Iiwicm91bmQiOjF9.6Qm0Zk3lq2X0cFh1d3mJ8pQ-7rTn_s4vYw9aBcDeFgH";

fn gateway(extra: &str) -> Arc<Gateway> {
    let yaml = format!(
        "pools:\n  d: {{instances: [127.0.0.1:1], health: {{check: off}}}}\ndefault_route: {{pool: d}}\n{extra}"
    );
    let cfg = Config::parse(&yaml, "bench").expect("valid config");
    Arc::new(Gateway::new(cfg, None).expect("gateway"))
}

fn finished(c: &mut Criterion, label: &str, gw: Arc<Gateway>) {
    let mut ctx = RequestCtx::new(gw);
    ctx.method = Some("tools/call".into());
    ctx.name = Some("deploy".into());
    let mut sc = ResultScanner::json();
    sc.feed(COMPLETE.as_bytes());
    ctx.scanner = Some(sc);
    c.bench_function(&format!("flows/finished [{label}]"), |b| {
        // The outcome is computed by `logging` for the metrics either way; not measured here.
        b.iter(|| follow::finished(black_box(&ctx), 200, Outcome::default()))
    });
}

fn bench(c: &mut Criterion) {
    finished(c, "off", gateway("flows: {enabled: false}\n"));
    finished(c, "flows on, not a flow leg", gateway(""));

    let sse = format!("event: message\ndata: {COMPLETE}\n\n");
    c.bench_function(
        "flows/scan response [json, input_required-only scanner]",
        |b| {
            b.iter(|| {
                let mut s = InputRequiredScanner::default();
                black_box(s.feed(black_box(COMPLETE.as_bytes())))
            })
        },
    );
    c.bench_function("flows/scan response [json]", |b| {
        b.iter(|| {
            let mut s = ResultScanner::json();
            s.feed(black_box(COMPLETE.as_bytes()));
            black_box(s.verdict())
        })
    });
    c.bench_function("flows/scan response [sse]", |b| {
        b.iter(|| {
            let mut s = ResultScanner::sse();
            s.feed(black_box(sse.as_bytes()));
            black_box(s.verdict())
        })
    });

    let gw = gateway("");
    let store: &FlowStore = gw.flows.as_ref().expect("flows on by default");
    let metrics = &gw.metrics.flows;
    let states = [format!("{STATE}-a"), format!("{STATE}-b")];
    let leg = |from: usize| Leg {
        method: "tools/call",
        name: Arc::from("deploy"),
        request_state: None,
        verdict: Verdict {
            kind: ResultKind::InputRequired,
            state_digest: Some(state_digest(&states[from])),
            ..Verdict::default()
        },
        failed: false,
        retry_invited: false,
        instance: Some((0, 0)),
        started: Instant::now(),
        span: Some(SpanRef {
            trace_id: 1,
            span_id: 2,
            sampled: true,
        }),
    };
    store.finish_leg(&leg(0), Instant::now(), metrics);
    let mut at = 0;
    c.bench_function("flows/mrtr leg (digest, lookup, next round)", |b| {
        b.iter(|| {
            // The retry of the state handed out last, answered input_required with the other one.
            let mut l = leg(1 - at);
            l.request_state = Some(state_digest(black_box(&states[at])));
            at = 1 - at;
            black_box(store.finish_leg(&l, Instant::now(), metrics))
        })
    });

    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    c.bench_function(
        "trace/begin [incoming traceparent] + upstream traceparent",
        |b| {
            b.iter(|| {
                let l = trace::begin(black_box(Some((tp, None))), None, 0.1);
                black_box(l.traceparent())
            })
        },
    );
    c.bench_function("trace/begin [new trace, unsampled]", |b| {
        b.iter(|| black_box(trace::begin(None, None, black_box(0.0))))
    });

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1/traces", closed.local_addr().unwrap());
    drop(closed);
    let cfg = Config::parse(
        &format!("pools:\n  d: {{instances: [127.0.0.1:1]}}\ntracing: {{enabled: true, endpoint: \"{endpoint}\"}}\n"),
        "bench",
    )
    .unwrap();
    let tracing = Tracing::new(&cfg.tracing).expect("exporter");
    let leg = trace::begin(Some((tp, None)), None, 1.0);
    let info = SpanInfo {
        outcome: Outcome {
            method: Some("tools/call"),
            name: Some("deploy"),
            route: Some("tools"),
            pool: Some("d"),
            instance: Some("127.0.0.1:1"),
            status: 200,
            duration: Duration::from_millis(3),
            ..Outcome::default()
        },
        round: Some(2),
        previous_leg: Some(leg.span_ref()),
        ..SpanInfo::default()
    };
    c.bench_function("trace/export sampled span", |b| {
        b.iter(|| tracing.export(black_box(&leg), black_box(&info)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
