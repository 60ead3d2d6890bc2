//! Inspect + validate: the strict envelope parse of a tools/call body and the header check
//! against it, as the gateway runs them per checked request. Bodies of 200 B, 4 KiB, 64 KiB and
//! 1 MiB; the big argument is one long string (the common case: a file or a prompt) and, for
//! 64 KiB and 1 MiB, also many small objects (the parser's worst realistic case: one visit per
//! token and a duplicate-key check per object) and one object with very many members (the
//! duplicate-key check's worst case).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

use mcp_edge::gateway::stages::validate;
use mcp_edge::mcp::envelope;

const HEAD: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#;
const TAIL: &str = r#""},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// A tools/call body of exactly `size` bytes whose argument is one string.
fn string_body(size: usize) -> Vec<u8> {
    let pad = size.saturating_sub(HEAD.len() + TAIL.len());
    let mut b = String::with_capacity(size);
    b.push_str(HEAD);
    b.extend(std::iter::repeat_n('x', pad));
    b.push_str(TAIL);
    b.into_bytes()
}

/// A tools/call body of about `size` bytes whose argument is an array of small objects.
fn nested_body(size: usize) -> Vec<u8> {
    let mut b = String::from(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"rows":["#,
    );
    let mut i = 0;
    while b.len() + 120 < size {
        if i > 0 {
            b.push(',');
        }
        b.push_str(&format!(
            r#"{{"id":{i},"name":"row {i}","ok":true,"score":{}.5,"tags":["a","b"]}}"#,
            i % 97
        ));
        i += 1;
    }
    b.push_str(r#"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#);
    b.into_bytes()
}

/// A tools/call body of about `size` bytes whose argument is one object with many members (the
/// duplicate-key check's worst case).
fn wide_body(size: usize) -> Vec<u8> {
    let mut b = String::from(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"#,
    );
    let mut i = 0;
    while b.len() + 120 < size {
        if i > 0 {
            b.push(',');
        }
        b.push_str(&format!(r#""key_{i}":{i}"#));
        i += 1;
    }
    b.push_str(r#"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#);
    b.into_bytes()
}

fn headers() -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    h.insert("content-type", "application/json".parse().unwrap());
    h.insert("mcp-protocol-version", "2026-07-28".parse().unwrap());
    h.insert("mcp-method", "tools/call".parse().unwrap());
    h.insert("mcp-name", "echo".parse().unwrap());
    h
}

fn check(h: &http::HeaderMap, body: &[u8]) {
    let env = envelope::parse(body).expect("a valid envelope");
    validate::validate(h, &env).expect("headers agree with the body");
    black_box(env);
}

fn bench(c: &mut Criterion) {
    let h = headers();
    let mut g = c.benchmark_group("inspect+validate");
    let sizes: [(&str, usize); 4] = [
        ("200B", 200),
        ("4KiB", 4 << 10),
        ("64KiB", 64 << 10),
        ("1MiB", 1 << 20),
    ];
    for (label, size) in sizes {
        let body = string_body(size);
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_with_input(BenchmarkId::new("string", label), &body, |b, body| {
            b.iter(|| check(&h, black_box(body)))
        });
    }
    for (label, size) in &sizes[2..] {
        for (shape, body) in [("nested", nested_body(*size)), ("wide", wide_body(*size))] {
            g.throughput(Throughput::Bytes(body.len() as u64));
            g.bench_with_input(BenchmarkId::new(shape, label), &body, |b, body| {
                b.iter(|| check(&h, black_box(body)))
            });
        }
    }
    g.finish();

    // The serde walk alone (the reference reading, what every body cost before the fast scan).
    let mut g = c.benchmark_group("walk-only");
    for (shape, body) in [
        ("nested", nested_body(64 << 10)),
        ("wide", wide_body(64 << 10)),
        ("string", string_body(64 << 10)),
    ] {
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_with_input(BenchmarkId::new(shape, "64KiB"), &body, |b, body| {
            b.iter(|| black_box(envelope::walk::parse(black_box(body)).unwrap()))
        });
    }
    g.finish();

    // The two halves apart, on the 480 B request of bench/compare.sh.
    let body = string_body(253);
    let env = envelope::parse(&body).unwrap();
    c.bench_function("envelope-parse/253B", |b| {
        b.iter(|| black_box(envelope::parse(black_box(&body)).unwrap()))
    });
    c.bench_function("header-check/253B", |b| {
        b.iter(|| validate::validate(black_box(&h), black_box(&env)).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
