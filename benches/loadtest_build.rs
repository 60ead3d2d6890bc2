//! The MRTR load tester's request building through its public API: compiling a flow template,
//! splicing a leg's body (first leg and a retry leg) and building the HTTP request.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

use mcp_edge::loadtest::client::Http;
use mcp_edge::loadtest::flows::{FlowTemplate, RetryParts};
use mcp_edge::loadtest::Scenario;

fn bench(c: &mut Criterion) {
    let spec = Scenario::builtin("echo").expect("built-in scenario").flows[0].clone();
    let t = FlowTemplate::new(&spec).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = rt.block_on(Http::new("http://127.0.0.1:8080/mcp")).unwrap();
    let state = format!("\"{}\"", "s".repeat(200));
    let retry = RetryParts {
        input_responses: Some(br#"{"elicit-1":{"action":"accept","content":{"name":"octocat"}}}"#),
        request_state: Some(&state),
    };

    c.bench_function("loadtest/template", |b| {
        b.iter(|| black_box(FlowTemplate::new(black_box(&spec)).unwrap()))
    });
    c.bench_function("loadtest/body first leg", |b| {
        b.iter(|| black_box(t.body(black_box(42), RetryParts::default())))
    });
    c.bench_function("loadtest/body retry leg", |b| {
        b.iter(|| black_box(t.body(black_box(42), retry)))
    });
    c.bench_function("loadtest/request (headers + body)", |b| {
        b.iter(|| {
            let body = t.body(black_box(42), RetryParts::default());
            black_box(http.request(t.headers.clone(), body))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
