//! The cost of sealing `requestState` at the edge (`pools.<name>.mrtr.seal`), per leg:
//!
//! - `seal/envelope seal`: one envelope for a 60-byte server state (payload JSON, XChaCha20-
//!   Poly1305, base64);
//! - `seal/envelope open`: opening and checking it (caller, tool, arguments, expiry);
//! - `seal/response leg`: an `input_required` JSON response read for its state and written
//!   again with the envelope (what the gateway does to round one's answer);
//! - `seal/retry leg`: a retry body's state found, opened and the server's bytes put back, plus
//!   the arguments' digest (what the gateway does before forwarding a retry).

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::hint::black_box;

use mcp_edge::mcp::seal::{now_ms, Sealer, StateKeys};
use mcp_edge::mcp::state_seal::{self, rewrite, Binding};

const STATE: &str = "eyJjYXJ0IjoiYzE4Iiwic3RlcCI6ImNoYXJnZSIsImVudiI6InN0YWdpbmcifQ==";

fn bench(c: &mut Criterion) {
    let sealer = Sealer::new(StateKeys::random());
    let caller = state_seal::caller("sub", b"alice@example.com");
    let args = json!({"service": "billing", "env": "staging", "replicas": 3});
    let digest = state_seal::arguments_digest("tools/call", "deploy", &args);
    let to = Binding {
        caller: &caller,
        method: "tools/call",
        name: "deploy",
        arguments: &digest,
    };
    let now = now_ms();
    let token = state_seal::seal(&sealer, &to, STATE, now, 600_000);
    let mut g = c.benchmark_group("seal");
    g.bench_function("envelope seal", |b| {
        b.iter(|| state_seal::seal(&sealer, black_box(&to), black_box(STATE), now, 600_000))
    });
    g.bench_function("envelope open", |b| {
        b.iter(|| state_seal::open(&sealer, black_box(&token), &to, now, 16384).unwrap())
    });
    let response = format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"resultType":"input_required","inputRequests":{{"confirm":{{"method":"elicitation/create","params":{{"message":"Deploy billing to staging?","requestedSchema":{{"type":"object"}}}}}}}},"requestState":"{STATE}"}}}}"#
    );
    g.bench_function("response leg", |b| {
        b.iter(|| {
            let mut seal = |s: &str| state_seal::seal(&sealer, &to, s, now, 600_000);
            rewrite::seal_json(black_box(response.as_bytes()), &mut seal).unwrap()
        })
    });
    let retry = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "deploy", "arguments": args, "requestState": token,
        "inputResponses": {"confirm": {"action": "accept", "content": {}}},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
    .to_string();
    g.bench_function("retry leg", |b| {
        b.iter(|| {
            let body = black_box(retry.as_bytes());
            let v: serde_json::Value = serde_json::from_slice(body).unwrap();
            let d = state_seal::arguments_digest("tools/call", "deploy", &v["params"]["arguments"]);
            let (t, start, end) = rewrite::request_state(body).unwrap();
            let to = Binding {
                arguments: &d,
                ..to.clone()
            };
            let opened = state_seal::open(&sealer, &t, &to, now, 16384).unwrap();
            rewrite::splice(body, (start, end), &opened.state)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
