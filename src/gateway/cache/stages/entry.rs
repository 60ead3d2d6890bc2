//! One stored response: what the upstream sent, where its `id` and `ttlMs` sit in the bytes,
//! and how a hit is rendered from it (the request's id and the remaining `ttlMs` spliced in;
//! every other byte as the upstream sent it).

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::mcp::caching::SCOPE_PRIVATE;
use crate::mcp::result_type;

/// Who may be served a stored result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Public,
    /// Only the same authorization context.
    Private,
}

/// What an upstream's JSON response says about caching it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// A `complete` result with `ttlMs > 0`.
    Store(Parsed),
    /// A result that must not be stored (ttl 0, `input_required`, no scope, ...): why.
    Skip(&'static str),
    /// A JSON-RPC error with this code.
    Error(i64),
}

/// The parts of a storable response.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub id: Range<usize>,
    pub ttl: Range<usize>,
    pub ttl_ms: u64,
    pub scope: Scope,
}

#[derive(Deserialize)]
struct Resp<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorPeek>,
}

#[derive(Deserialize)]
struct ErrorPeek {
    code: i64,
}

#[derive(Deserialize)]
struct ResultPeek<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<Cow<'a, str>>,
    #[serde(rename = "ttlMs", borrow, default)]
    ttl_ms: Option<&'a RawValue>,
    #[serde(rename = "cacheScope", borrow, default)]
    cache_scope: Option<Cow<'a, str>>,
}

fn span(outer: &[u8], inner: &str) -> Range<usize> {
    let start = inner.as_ptr() as usize - outer.as_ptr() as usize;
    start..start + inner.len()
}

/// Read an upstream's JSON response body. Only a `complete` result (or one without
/// `resultType`, from servers older than MRTR) whose `ttlMs` is a positive integer and whose
/// `cacheScope` is `public` or `private` is storable; missing, zero or negative `ttlMs` is 0.
pub(crate) fn judge(body: &[u8]) -> Judgement {
    let Ok(resp) = serde_json::from_slice::<Resp>(body) else {
        return Judgement::Skip("unreadable");
    };
    if let Some(e) = resp.error {
        return Judgement::Error(e.code);
    }
    let (Some(id), Some(result)) = (resp.id, resp.result) else {
        return Judgement::Skip("no-result");
    };
    let Ok(peek) = serde_json::from_str::<ResultPeek>(result.get()) else {
        return Judgement::Skip("unreadable");
    };
    match peek.result_type.as_deref() {
        None | Some(result_type::COMPLETE) => {}
        Some(_) => return Judgement::Skip("not-complete"),
    }
    let Some(ttl_raw) = peek.ttl_ms else {
        return Judgement::Skip("ttl-zero");
    };
    let ttl_ms = match ttl_raw.get().parse::<i64>() {
        Ok(t) if t > 0 => t as u64,
        Ok(_) => return Judgement::Skip("ttl-zero"),
        Err(_) => return Judgement::Skip("ttl-not-integer"),
    };
    let scope = match peek.cache_scope.as_deref() {
        Some(crate::mcp::caching::SCOPE_PUBLIC) => Scope::Public,
        Some(SCOPE_PRIVATE) => Scope::Private,
        _ => return Judgement::Skip("no-scope"),
    };
    Judgement::Store(Parsed {
        id: span(body, id.get()),
        ttl: span(body, ttl_raw.get()),
        ttl_ms,
        scope,
    })
}

/// A stored response.
#[derive(Debug)]
pub(crate) struct Entry {
    pub body: Bytes,
    pub parsed: Parsed,
    pub stored: Instant,
    /// The upstream's response headers a client gets (framing headers left out).
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    pub method: &'static str,
    pub uri: Option<String>,
    /// The weight charged against the cache's byte bound.
    pub weight: u32,
}

impl Entry {
    /// Fresh until `stored + ttlMs`.
    pub(crate) fn ttl(&self) -> Duration {
        Duration::from_millis(self.parsed.ttl_ms)
    }

    pub(crate) fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.stored)
    }

    pub(crate) fn is_fresh(&self, now: Instant) -> bool {
        self.age(now) < self.ttl()
    }

    /// The body for a hit: the request's `id`, and `ttlMs` reduced by the entry's age (never
    /// below 0), so a client does not extend the upstream's freshness.
    pub(crate) fn render(&self, id: &[u8], now: Instant) -> Vec<u8> {
        let age_ms = self.age(now).as_millis() as u64;
        let ttl = self.parsed.ttl_ms.saturating_sub(age_ms).to_string();
        let b = &self.body[..];
        let (first, second) = if self.parsed.id.start < self.parsed.ttl.start {
            ((&self.parsed.id, id), (&self.parsed.ttl, ttl.as_bytes()))
        } else {
            ((&self.parsed.ttl, ttl.as_bytes()), (&self.parsed.id, id))
        };
        let mut out = Vec::with_capacity(b.len() + id.len() + 8);
        out.extend_from_slice(&b[..first.0.start]);
        out.extend_from_slice(first.1);
        out.extend_from_slice(&b[first.0.end..second.0.start]);
        out.extend_from_slice(second.1);
        out.extend_from_slice(&b[second.0.end..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(body: &str) -> Entry {
        let Judgement::Store(parsed) = judge(body.as_bytes()) else {
            panic!("not storable: {body}")
        };
        Entry {
            body: Bytes::from(body.to_string()),
            parsed,
            stored: Instant::now(),
            headers: vec![],
            method: "tools/list",
            uri: None,
            weight: 1,
        }
    }

    #[test]
    fn a_hit_differs_only_in_id_and_remaining_ttl() {
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[],"ttlMs":60000,"cacheScope":"public","resultType":"complete"}}"#;
        let e = entry(body);
        let out = e.render(br#""abc""#, e.stored + Duration::from_millis(1500));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            body.replace(r#""id":1"#, r#""id":"abc""#)
                .replace("60000", "58500")
        );
        // The id after the result, and an expired age: ttl 0, never negative.
        let body = r#"{"result":{"ttlMs":10,"cacheScope":"private"},"jsonrpc":"2.0","id":"x"}"#;
        let e = entry(body);
        assert_eq!(e.parsed.scope, Scope::Private);
        let out = e.render(b"7", e.stored + Duration::from_secs(1));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"result":{"ttlMs":0,"cacheScope":"private"},"jsonrpc":"2.0","id":7}"#
        );
    }

    #[test]
    fn only_complete_results_with_a_positive_ttl_are_stored() {
        let skip = |b: &str| match judge(b.as_bytes()) {
            Judgement::Skip(why) => why,
            other => panic!("{b}: {other:?}"),
        };
        assert_eq!(
            skip(r#"{"id":1,"result":{"ttlMs":0,"cacheScope":"public"}}"#),
            "ttl-zero"
        );
        assert_eq!(
            skip(r#"{"id":1,"result":{"ttlMs":-5,"cacheScope":"public"}}"#),
            "ttl-zero"
        );
        assert_eq!(
            skip(r#"{"id":1,"result":{"cacheScope":"public"}}"#),
            "ttl-zero"
        );
        assert_eq!(
            skip(r#"{"id":1,"result":{"ttlMs":1.5,"cacheScope":"public"}}"#),
            "ttl-not-integer"
        );
        assert_eq!(
            skip(
                r#"{"id":1,"result":{"resultType":"input_required","ttlMs":100,"cacheScope":"public"}}"#
            ),
            "not-complete"
        );
        assert_eq!(skip(r#"{"id":1,"result":{"ttlMs":100}}"#), "no-scope");
        assert_eq!(
            skip(r#"{"id":1,"result":{"ttlMs":100,"ttlMs":5,"cacheScope":"public"}}"#),
            "unreadable"
        );
        assert_eq!(skip("not json"), "unreadable");
        assert_eq!(
            judge(br#"{"id":1,"error":{"code":-32602,"message":"bad cursor"}}"#),
            Judgement::Error(-32602)
        );
    }
}
