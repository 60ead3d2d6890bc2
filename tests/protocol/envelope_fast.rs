//! The fast envelope scan (`mcp::envelope::fast`) against the serde walk (`mcp::envelope::walk`),
//! the reference reading: whenever the scan accepts a document, the walk accepts it too and reads
//! the same envelope. Documents: realistic requests, then random byte-level mutations of them
//! (inserted, deleted, replaced and duplicated bytes, case flips), which reach the corners of
//! the JSON grammar (numbers, escapes, surrogates, structure) and of the key rules.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_edge::mcp::envelope::{fast, parse, walk};

const SEEDS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi \"there\"\n","n":[1,-2.5,3e2,true,null,{"a":{"b":[]}}]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}}"#,
    r#"{"jsonrpc":"2.0","id":"req-\u00e9","method":"resources/read","params":{"uri":"file:///a%20b","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"k=v"}}}"#,
    r#"{"method":"notifications/cancelled","jsonrpc":"2.0","params":{"requestId":3,"reason":"caf\u00e9 \ud83d\ude00"}}"#,
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_weather","requestState":"c3RhdGU=","inputResponses":{"k":{"action":"accept"}}}}"#,
    r#"{"jsonrpc":"2.0","id":-3,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
    r#"{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"t-1","_meta":[1,2]}}"#,
    "  {\n  \"jsonrpc\" : \"2.0\" ,\t\"id\" : 12345678901234567890123 , \"method\" : \"ping\" }\r\n",
    // Arguments longer than the bulk pass's 64-byte blocks, so that mutations move strings,
    // escapes (runs of backslashes, surrogate pairs) and tokens across block boundaries.
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"write","arguments":{"path":"C:\\dir\\sub\\file.txt","text":"line one\nline \"two\"\tand \\\" three \ud83d\ude00 caf\u00e9 été end of a string long enough to cross a block","list":[{"k":1},{"k":2,"v":[null,false,-0.25e-3]},"x\\\\",1e2],"more":{"a":"\/","b":"\b\f\r","c":[[[]]],"d":{}}}}}"#,
    r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"wide","arguments":{"alpha":1,"beta":"b","gamma":[1,2,3],"delta":{"x":"y"},"epsilon":true,"zeta":null,"eta":-1.5,"theta":"\u0041","iota":[],"kappa":{},"lambda":"long value of a member past the eighth","Mu":0}}}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"m\u00e9t\u00e9o","arguments":{"Kind":1,"kind2":{"x":1,"X2":2},"wide":{"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"a10":10,"A11":11}}}}"#,
];

#[test]
fn the_scan_answers_realistic_requests_as_the_walk_does() {
    for seed in SEEDS {
        let walked = walk::parse(seed.as_bytes()).expect(seed);
        assert_eq!(fast::parse(seed.as_bytes()), Some(walked), "{seed}");
    }
}

/// Documents the scan leaves to the walk, which then decides (refusals keep their messages).
#[test]
fn what_the_scan_leaves_to_the_walk_is_still_read_or_refused_by_it() {
    let escaped_key = r#"{"jsonrpc":"2.0","id":1,"\u006dethod":"tools/list"}"#;
    assert!(fast::parse(escaped_key.as_bytes()).is_none());
    assert_eq!(
        parse(escaped_key.as_bytes()).unwrap().method.as_deref(),
        Some("tools/list")
    );

    let big_id = r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#;
    assert!(fast::parse(big_id.as_bytes()).is_none());
    assert_eq!(
        parse(big_id.as_bytes()).is_ok(),
        walk::parse(big_id.as_bytes()).is_ok()
    );

    for (doc, reason) in [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","id":2}"#,
            "duplicate-key",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"x"}"#,
            "case-variant-key",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Name":"b"}}"#,
            "case-variant-key",
        ),
        (r#"{"jsonrpc":"2.0","method":"tools/call"}"#, "missing-id"),
        (r#"{"jsonrpc":"2.0","id":1}"#, "no-method"),
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, "not-jsonrpc"),
        (r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#, "bad-id"),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}"#,
            "bad-params",
        ),
    ] {
        assert!(fast::parse(doc.as_bytes()).is_none(), "{doc}");
        let e = parse(doc.as_bytes()).unwrap_err();
        assert_eq!(e.rejection().reason, reason, "{doc}");
    }
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"arguments":{}{}}}}}"#,
        "[".repeat(70),
        "]".repeat(70)
    );
    assert!(fast::parse(deep.as_bytes()).is_none());
    assert_eq!(
        parse(deep.as_bytes()).unwrap_err().rejection().reason,
        "too-deep"
    );
}

/// One edit of a document's bytes.
#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, u8),
    Delete(usize, usize),
    Replace(usize, u8),
    Duplicate(usize, usize),
    FlipCase(usize),
}

const BYTES: &[u8] = b"{}[]\",:\\ u0123456789abcdefABCDEF.eE+-tnrl\t\n\x00\x1f\x7f\xc3\xa9\xff";

fn edit() -> impl Strategy<Value = Edit> {
    let byte = proptest::sample::select(BYTES);
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(a, b)| Edit::Insert(a, b)),
        (any::<usize>(), 1usize..12).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), byte).prop_map(|(a, b)| Edit::Replace(a, b)),
        (any::<usize>(), 1usize..40).prop_map(|(a, n)| Edit::Duplicate(a, n)),
        any::<usize>().prop_map(Edit::FlipCase),
    ]
}

fn apply(doc: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut d = doc.to_vec();
    for e in edits {
        let len = d.len().max(1);
        match *e {
            Edit::Insert(a, b) => d.insert(a % (d.len() + 1), b),
            Edit::Delete(a, n) => {
                let a = a % len;
                d.drain(a..(a + n).min(d.len()));
            }
            Edit::Replace(a, b) => {
                if !d.is_empty() {
                    d[a % len] = b
                }
            }
            Edit::Duplicate(a, n) => {
                let a = a % len;
                let piece: Vec<u8> = d[a.min(d.len())..(a + n).min(d.len())].to_vec();
                let at = (a + n).min(d.len());
                d.splice(at..at, piece);
            }
            Edit::FlipCase(a) => {
                if !d.is_empty() {
                    let c = &mut d[a % len];
                    *c = if c.is_ascii_lowercase() {
                        c.to_ascii_uppercase()
                    } else {
                        c.to_ascii_lowercase()
                    };
                }
            }
        }
    }
    d
}

#[test]
fn whenever_the_scan_accepts_a_mutated_document_the_walk_reads_the_same() {
    let cases = std::env::var("DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let (fast_hits, walk_hits) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let strategy = (
        proptest::sample::select(SEEDS),
        proptest::collection::vec(edit(), 1..4),
    );
    let result = runner.run(&strategy, |(seed, edits)| {
        let doc = apply(seed.as_bytes(), &edits);
        let walked = walk::parse(&doc);
        if walked.is_ok() {
            walk_hits.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(f) = fast::parse(&doc) {
            fast_hits.fetch_add(1, Ordering::Relaxed);
            if walked.as_ref().ok() != Some(&f) {
                return Err(TestCaseError::fail(format!(
                    "scan accepted {:?} as {f:?}; walk: {walked:?}",
                    String::from_utf8_lossy(&doc)
                )));
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (f, w) = (fast_hits.into_inner(), walk_hits.into_inner());
    eprintln!("mutations: {cases} documents, walk accepted {w}, scan accepted {f}");
    // Both sides must be exercised: mutations that keep a document valid, and the scan on them.
    assert!(w * 20 > cases as usize, "too few valid mutations: {w}");
    assert!(
        f * 10 > w * 7,
        "the scan accepted too few of the walk's: {f} of {w}"
    );
}
