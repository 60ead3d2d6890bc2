//! A caller's own view of `tools/list`, `prompts/list` and `resources/list`: the upstream's JSON
//! result with the entries the caller may not use removed (decided by the same rules as calls:
//! a tool is listed when `tools/call` of it would be allowed). `ttlMs`, `nextCursor` and every
//! other member are kept; `cacheScope` becomes `private` when anything was removed. The response
//! is buffered up to a bound; past it, the caller gets a JSON-RPC error instead of the list (an
//! unfiltered list is never sent).

use serde_json::Value;

use crate::mcp::lists::Kind;
use crate::mcp::{codes, error_body};

/// For a list method: the result member holding the entries, the entry field naming each, and
/// the method whose permission decides whether an entry is shown.
pub(crate) fn list_shape(method: &str) -> Option<(&'static str, &'static str, &'static str)> {
    // Templates are not filtered: a template names no resource a rule could decide on.
    let kind = Kind::of_method(method).filter(|k| *k != Kind::Templates)?;
    Some((kind.member(), kind.field(), kind.call()))
}

/// Filter one JSON-RPC response body. `Ok(None)`: nothing to change (an error response, or
/// every entry allowed). `Err`: not a JSON-RPC response the gateway can read.
pub(crate) fn filter_list(
    body: &[u8],
    method: &str,
    allowed: impl Fn(&str, &str) -> bool,
) -> Result<Option<Vec<u8>>, String> {
    let Some((member, field, call)) = list_shape(method) else {
        return Ok(None);
    };
    let mut doc: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the {method} response is not JSON: {e}"))?;
    let Some(result) = doc.get_mut("result").and_then(Value::as_object_mut) else {
        return Ok(None); // an error response: nothing to hide
    };
    let Some(items) = result.get_mut(member).and_then(Value::as_array_mut) else {
        return Err(format!("the {method} result has no {member} array"));
    };
    let before = items.len();
    // An entry without a readable name cannot be judged: it is not shown.
    items.retain(|it| {
        it.get(field)
            .and_then(Value::as_str)
            .is_some_and(|n| allowed(call, n))
    });
    if items.len() == before {
        return Ok(None);
    }
    result.insert("cacheScope".into(), Value::String("private".into()));
    Ok(Some(
        serde_json::to_vec(&doc).expect("a JSON value serializes"),
    ))
}

/// The body sent instead of a list that could not be filtered.
pub(crate) fn unfilterable(
    id: Option<&serde_json::value::RawValue>,
    method: &str,
    why: &str,
) -> Vec<u8> {
    error_body(
        id,
        codes::GATEWAY_LIST_UNFILTERABLE,
        &format!(
            "The {method} result could not be filtered for this caller ({why}); it was withheld"
        ),
        None,
    )
}

/// A request whose list result is filtered for its caller: the response held until it is
/// complete, and whether it was JSON at all.
#[derive(Debug, Default)]
pub struct ListFilter {
    pub hold: ListHold,
    /// The response was not JSON: it is replaced by an error.
    pub unreadable: bool,
}

/// Holds a list response until it is complete, bounded.
#[derive(Debug, Default)]
pub struct ListHold {
    buf: Vec<u8>,
    pub overflowed: bool,
}

impl ListHold {
    /// Keep `chunk` unless the total would pass `max` (then keep nothing more).
    pub(crate) fn push(&mut self, chunk: &[u8], max: usize) {
        if self.overflowed {
            return;
        }
        if self.buf.len() + chunk.len() > max {
            self.overflowed = true;
            self.buf = Vec::new();
            return;
        }
        self.buf.extend_from_slice(chunk);
    }

    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"echo"},{"name":"deploy_prod"},{"title":"nameless"}],"ttlMs":60000,"cacheScope":"public","nextCursor":"c2"}}"#;

    #[test]
    fn removes_what_the_caller_may_not_call() {
        let out = filter_list(LIST.as_bytes(), "tools/list", |m, n| {
            assert_eq!(m, "tools/call");
            n == "echo"
        })
        .unwrap()
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], 3);
        assert_eq!(v["result"]["tools"], serde_json::json!([{"name":"echo"}]));
        assert_eq!(v["result"]["ttlMs"], 60000);
        assert_eq!(v["result"]["cacheScope"], "private");
        assert_eq!(v["result"]["nextCursor"], "c2");
    }

    #[test]
    fn unchanged_and_errors() {
        let all = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"ttlMs":0,"cacheScope":"public"}}"#;
        assert_eq!(
            filter_list(all.as_bytes(), "tools/list", |_, _| true),
            Ok(None)
        );
        let err = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}"#;
        assert_eq!(
            filter_list(err.as_bytes(), "tools/list", |_, _| false),
            Ok(None)
        );
        assert!(filter_list(b"data: {}", "tools/list", |_, _| true).is_err());
        let res = r#"{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"file:///a"},{"uri":"file:///b"}]}}"#;
        let out = filter_list(res.as_bytes(), "resources/list", |m, u| {
            m == "resources/read" && u.ends_with('a')
        })
        .unwrap()
        .unwrap();
        assert!(String::from_utf8(out).unwrap().contains("file:///a"));
    }

    #[test]
    fn the_hold_is_bounded() {
        let mut h = ListHold::default();
        h.push(b"12345", 8);
        assert!(!h.overflowed);
        h.push(b"6789", 8);
        assert!(h.overflowed);
        assert!(h.take().is_empty());
    }
}
