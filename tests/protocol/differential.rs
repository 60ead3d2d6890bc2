//! Differential test of the strict envelope parser against models of the JSON readers that
//! upstreams use: whenever `mcp::envelope::parse` accepts a document, every reader
//! model must see the same `method`, `id`, `params.name`, `params.uri` and `_meta`
//! protocolVersion as the gateway did.
//!
//! Reader models (all over the same decoded document, members kept in order, duplicates kept):
//! - **last wins, exact names** (serde_json's `Value`, Python's `json`, JavaScript's `JSON.parse`);
//! - **first wins, exact names** (some streaming readers);
//! - **last wins, names folded** (Go's `encoding/json`: a member whose name equals the field's
//!   after Unicode case folding fills it; the last one wins);
//! - **first wins, names folded**.
//!
//! The folding models use the `unicase` crate's Unicode case folding, an implementation
//! independent of the parser's own fold.
//!
//! Documents are generated near the envelope's shape: duplicate, escaped, case-varied and folded
//! keys (`"Name"`, `"nam\u0065"`, `"param\u017f"`, the Kelvin sign), odd numbers and strings,
//! deep nesting. `cargo test` runs `DIFF_CASES` cases (default 20,000); the long run sets it high
//! (see docs/fuzzing.md).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use unicase::UniCase;

use mcp_edge::mcp::envelope::{fast, parse, walk};
use mcp_edge::mcp::meta;

/// A JSON document with every member kept, in order.
#[derive(Debug, Clone)]
enum J {
    Obj(Vec<(String, J)>),
    Arr(#[allow(dead_code)] Vec<J>),
    Leaf(Value),
}

impl<'de> de::Deserialize<'de> for J {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<J, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = J;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, v: bool) -> Result<J, E> {
                Ok(J::Leaf(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<J, E> {
                Ok(J::Leaf(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<J, E> {
                Ok(J::Leaf(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<J, E> {
                Ok(J::Leaf(
                    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
                ))
            }
            fn visit_str<E>(self, v: &str) -> Result<J, E> {
                Ok(J::Leaf(Value::String(v.to_owned())))
            }
            fn visit_unit<E>(self) -> Result<J, E> {
                Ok(J::Leaf(Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<J, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = s.next_element()? {
                    v.push(x);
                }
                Ok(J::Arr(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<J, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = m.next_entry::<String, J>()? {
                    v.push((k, x));
                }
                Ok(J::Obj(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// What a reader takes a request to be: method, id, name, uri, protocol version.
type Seen = (
    Option<String>,
    Option<Value>,
    Option<String>,
    Option<String>,
    Option<String>,
);

#[derive(Debug, Clone, Copy)]
struct Reader {
    first_wins: bool,
    folds: bool,
}

const READERS: [Reader; 4] = [
    Reader {
        first_wins: false,
        folds: false,
    },
    Reader {
        first_wins: true,
        folds: false,
    },
    Reader {
        first_wins: false,
        folds: true,
    },
    Reader {
        first_wins: true,
        folds: true,
    },
];

impl Reader {
    fn get<'a>(self, j: &'a J, key: &str) -> Option<&'a J> {
        let J::Obj(members) = j else { return None };
        let matches = |k: &str| {
            if self.folds {
                UniCase::new(k) == UniCase::new(key)
            } else {
                k == key
            }
        };
        let mut hits = members.iter().filter(|(k, _)| matches(k)).map(|(_, v)| v);
        if self.first_wins {
            hits.next()
        } else {
            hits.next_back()
        }
    }

    fn string(self, j: Option<&J>) -> Option<String> {
        match j {
            Some(J::Leaf(Value::String(s))) => Some(s.clone()),
            _ => None,
        }
    }

    /// What this reader takes the request to be: method, id, name, uri, protocol version.
    fn read(self, doc: &J) -> Seen {
        let method = self.string(self.get(doc, "method"));
        let id = match self.get(doc, "id") {
            Some(J::Leaf(v)) => Some(v.clone()),
            _ => None,
        };
        let params = self.get(doc, "params");
        let name = params.and_then(|p| self.string(self.get(p, "name")));
        let uri = params.and_then(|p| self.string(self.get(p, "uri")));
        let meta = params.and_then(|p| self.get(p, "_meta"));
        let pv = meta.and_then(|m| self.string(self.get(m, meta::PROTOCOL_VERSION)));
        (method, id, name, uri, pv)
    }
}

fn quoted(s: &'static str) -> String {
    format!("\"{s}\"")
}

fn pick(pool: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(pool).prop_map(quoted)
}

const STRINGS: &[&str] = &[
    "tools/call",
    "resources/read",
    "get_weather",
    "deploy_prod",
    "2026-07-28",
    "2.0",
    "get_\\u0077eather",
    "\\u017f",
    "m\\u00e9t\\u00e9o",
    "",
    "\\ud83d\\ude00",
];
const NUMBERS: &[&str] = &[
    "1",
    "-2",
    "0",
    "1.5e3",
    "10000000000000000000000",
    "-0",
    "7",
];

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => pick(STRINGS),
        2 => proptest::sample::select(NUMBERS).prop_map(str::to_owned),
        1 => Just("null".to_string()),
        1 => Just("true".to_string()),
    ]
}

/// A small object or array, sometimes nested deep, sometimes with repeated or folded keys.
fn nested() -> impl Strategy<Value = String> {
    let keys: &'static [&'static str] = &["a", "A", "k", "\\u212aind", "kind", "region", "Region"];
    let obj = proptest::collection::vec((pick(keys), scalar()), 0..4).prop_map(|m| {
        let body: Vec<String> = m.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
        format!("{{{}}}", body.join(","))
    });
    (obj, 0usize..70).prop_map(|(o, depth)| {
        if depth > 55 {
            format!("{}{o}{}", "[".repeat(depth), "]".repeat(depth))
        } else {
            o
        }
    })
}

fn members(
    pool: &'static [&'static str],
    value: BoxedStrategy<String>,
) -> BoxedStrategy<Vec<String>> {
    proptest::collection::vec((pick(pool), value), 0..3)
        .prop_map(|m| m.into_iter().map(|(k, v)| format!("{k}:{v}")).collect())
        .boxed()
}

fn object(
    base: Vec<BoxedStrategy<Option<String>>>,
    extra: BoxedStrategy<Vec<String>>,
) -> BoxedStrategy<String> {
    (base, extra)
        .prop_flat_map(|(base, extra)| {
            let all: Vec<String> = base.into_iter().flatten().chain(extra).collect();
            Just(all).prop_shuffle()
        })
        .prop_map(|m| format!("{{{}}}", m.join(",")))
        .boxed()
}

fn sometimes(member: impl Strategy<Value = String> + 'static) -> BoxedStrategy<Option<String>> {
    proptest::option::weighted(0.9, member).boxed()
}

const META_KEYS: &[&str] = &[
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/protocolversion",
    "IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION",
    "io.modelcontextprotocol/clientCapabilities",
    "progressToken",
];
const PARAMS_KEYS: &[&str] = &[
    "name",
    "Name",
    "NAME",
    "nam\\u0065",
    "\\u004eame",
    "uri",
    "URI",
    "arguments",
    "_meta",
    "requestState",
    "x",
];
const TOP_KEYS: &[&str] = &[
    "jsonrpc",
    "id",
    "method",
    "params",
    "Method",
    "METHOD",
    "ID",
    "\\u006dethod",
    "param\\u017f",
    "x",
    "result",
];

fn meta_object() -> BoxedStrategy<String> {
    let base = vec![
        sometimes(
            pick(&["2026-07-28", "2025-11-25"])
                .prop_map(|v| format!("\"{}\":{v}", meta::PROTOCOL_VERSION)),
        ),
        sometimes(Just(format!("\"{}\":{{}}", meta::CLIENT_CAPABILITIES))),
    ];
    object(base, members(META_KEYS, scalar().boxed()))
}

fn params_object() -> BoxedStrategy<String> {
    let value = prop_oneof![3 => scalar(), 1 => nested(), 1 => meta_object()].boxed();
    let base = vec![
        sometimes(pick(&["get_weather", "deploy_prod"]).prop_map(|v| format!("\"name\":{v}"))),
        sometimes(nested().prop_map(|v| format!("\"arguments\":{v}"))),
        sometimes(meta_object().prop_map(|v| format!("\"_meta\":{v}"))),
    ];
    object(base, members(PARAMS_KEYS, value))
}

fn document() -> BoxedStrategy<String> {
    let value = prop_oneof![3 => scalar(), 1 => params_object()].boxed();
    let base = vec![
        sometimes(Just("\"jsonrpc\":\"2.0\"".to_string())),
        sometimes(proptest::sample::select(NUMBERS).prop_map(|v| format!("\"id\":{v}"))),
        sometimes(
            pick(&["tools/call", "resources/read", "notifications/cancelled"])
                .prop_map(|v| format!("\"method\":{v}")),
        ),
        sometimes(params_object().prop_map(|v| format!("\"params\":{v}"))),
    ];
    object(base, members(TOP_KEYS, value))
}

fn cases() -> u32 {
    std::env::var("DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

#[test]
fn every_reader_sees_what_the_gateway_saw_whenever_the_parser_accepts() {
    let accepted = AtomicUsize::new(0);
    let refused = AtomicUsize::new(0);
    let n = cases();
    let mut runner = TestRunner::new(Config {
        cases: n,
        failure_persistence: None,
        ..Config::default()
    });
    let fast_hits = AtomicUsize::new(0);
    let result = runner.run(&document(), |doc| {
        // The fast scan answers only what the serde walk accepts, with the same envelope.
        if let Some(f) = fast::parse(doc.as_bytes()) {
            fast_hits.fetch_add(1, Ordering::Relaxed);
            let walked = walk::parse(doc.as_bytes());
            prop_assert_eq!(walked.as_ref().ok(), Some(&f), "fast scan on {}", doc);
        }
        let Ok(env) = parse(doc.as_bytes()) else {
            refused.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        accepted.fetch_add(1, Ordering::Relaxed);
        let tree: J = serde_json::from_str(&doc).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let gateway = (
            env.method.clone(),
            env.id
                .as_ref()
                .map(|r| serde_json::from_str::<Value>(r.get()).unwrap()),
            env.name.clone(),
            env.uri.clone(),
            env.protocol_version.clone(),
        );
        for reader in READERS {
            prop_assert_eq!(
                &reader.read(&tree),
                &gateway,
                "reader {:?} on {}",
                reader,
                doc
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (a, r) = (accepted.into_inner(), refused.into_inner());
    let f = fast_hits.into_inner();
    eprintln!("differential: {n} documents, {a} accepted ({f} by the fast scan), {r} refused");
    assert!(
        f * 2 > a / 4,
        "the fast scan answered too few documents: {f} of {a}"
    );
    // The generator must exercise both sides, or the property says nothing.
    assert!(
        a * 20 > n as usize,
        "too few accepted documents: {a} of {n}"
    );
    assert!(r * 20 > n as usize, "too few refused documents: {r} of {n}");
}

/// The models are not vacuous: without the fold rule, a folded duplicate would make them differ.
#[test]
fn the_folding_model_disagrees_on_a_document_the_parser_refuses() {
    let doc = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_weather","NAME":"deploy_prod","_meta":{}}}"#;
    assert!(parse(doc.as_bytes()).is_err());
    let tree: J = serde_json::from_str(doc).unwrap();
    let exact = READERS[0].read(&tree);
    let folded = READERS[2].read(&tree);
    assert_eq!(exact.2.as_deref(), Some("get_weather"));
    assert_eq!(folded.2.as_deref(), Some("deploy_prod"));
}
