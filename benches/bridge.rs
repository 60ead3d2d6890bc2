//! What the protocol bridge does to each 2025-era call's bytes, both ways, on the path every
//! plain call takes and on the value path it replaced (`mcp::legacy`, `mcp::json_spans`):
//!
//! - `bridge/request raw`: a legacy `tools/call` body read from its envelope (its params'
//!   members in the same pass) and written as the 2026 body (the session's `_meta` text written
//!   once, as a session does);
//! - `bridge/request value`: the same through a `serde_json::Value` and `legacy::to_modern`;
//! - `bridge/answer raw`: the fleet's `complete` answer written as the legacy client's
//!   (`legacy_result`: the 2026-only members left out, the client's id);
//! - `bridge/answer value`: the same through a value tree.

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::hint::black_box;

use mcp_edge::mcp::legacy;

const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from a 2025-era client"}}}"#;
const ANSWER: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcp-edge/instance":"be-575801-1","io.modelcontextprotocol/serverInfo":{"name":"mcp-edge-backend","version":"0.1.0"}},"content":[{"text":"hello from a 2025-era client","type":"text"}],"resultType":"complete"}}"#;

fn bench(c: &mut Criterion) {
    let caps = json!({"elicitation": {"form": {}}, "sampling": {}, "roots": {"listChanged": true}});
    let info = json!({"name": "client", "version": "1.32.0"});
    let meta = legacy::session_meta(&caps, &info);
    let id = RawValue::from_string("12".into()).unwrap();
    let mut g = c.benchmark_group("bridge");
    g.bench_function("request raw", |b| {
        b.iter(|| {
            let mut env = legacy::envelope(black_box(REQUEST)).unwrap();
            let params = env.raw_params().unwrap();
            let method = env.method.take().unwrap();
            let name = legacy::name_of_raw(&method, &params);
            let body = legacy::to_modern_raw(&method, &params, 1, &meta, None).unwrap();
            (name, body)
        })
    });
    g.bench_function("request value", |b| {
        b.iter(|| {
            let msg: Value = serde_json::from_slice(black_box(REQUEST)).unwrap();
            let method = msg["method"].as_str().unwrap();
            let name = legacy::name_of(method, msg.get("params"));
            let body = legacy::to_modern(method, msg.get("params"), 1, &caps, &info, None);
            (name, body)
        })
    });
    g.bench_function("answer raw", |b| {
        b.iter(|| legacy::legacy_result(black_box(ANSWER), &id).unwrap())
    });
    g.bench_function("answer value", |b| {
        b.iter(|| {
            let mut v: Value = serde_json::from_slice(black_box(ANSWER)).unwrap();
            let r = v["result"].take();
            v["result"] = legacy::to_legacy_result(r);
            v["id"] = serde_json::from_str(id.get()).unwrap();
            serde_json::to_vec(&v).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
