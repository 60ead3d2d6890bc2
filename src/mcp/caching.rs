//! Caching facts of the protocol (spec §caching, SEP-2549; §x-mcp-header): which results carry
//! `ttlMs` / `cacheScope`, the notifications that invalidate them, and the `_meta` keys that do
//! not change a result.

use super::methods::*;

/// `result.ttlMs`: how long the result is fresh, in milliseconds (missing or negative = 0).
pub(crate) const TTL_MS: &str = "ttlMs";
/// `result.cacheScope`: `"public"` or `"private"`.
pub(crate) const CACHE_SCOPE: &str = "cacheScope";
pub(crate) const SCOPE_PUBLIC: &str = "public";
pub(crate) const SCOPE_PRIVATE: &str = "private";
/// `result.nextCursor` of a list page.
pub(crate) const NEXT_CURSOR: &str = "nextCursor";
/// `inputSchema` property annotation naming the `Mcp-Param-{Name}` header that mirrors it.
pub(crate) const X_MCP_HEADER: &str = "x-mcp-header";

use super::methods::{
    NOTIFY_PROMPTS_CHANGED as PROMPTS_LIST_CHANGED,
    NOTIFY_RESOURCES_CHANGED as RESOURCES_LIST_CHANGED, NOTIFY_TOOLS_CHANGED as TOOLS_LIST_CHANGED,
};
pub(crate) const RESOURCES_UPDATED: &str = "notifications/resources/updated";

/// The methods whose `complete` results carry caching hints.
pub(crate) const CACHEABLE: [&str; 6] = [
    DISCOVER,
    TOOLS_LIST,
    PROMPTS_LIST,
    RESOURCES_LIST,
    RESOURCES_TEMPLATES_LIST,
    RESOURCES_READ,
];

pub(crate) fn is_cacheable(method: &str) -> bool {
    CACHEABLE.contains(&method)
}

/// `params._meta` keys that never change a result: client identity, progress and trace
/// context. Every other `_meta` key (protocol version, client capabilities, unknown keys) is
/// part of a cache key.
pub(crate) const META_KEYS_NOT_AFFECTING_RESULTS: [&str; 5] = [
    super::meta::CLIENT_INFO,
    super::meta::PROGRESS_TOKEN,
    "traceparent",
    "tracestate",
    "baggage",
];

/// What a notification invalidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Invalidation {
    /// Every cached page of these list methods.
    Lists(&'static [&'static str]),
    /// The cached `resources/read` of this uri.
    Resource(String),
}

/// The cache entries a notification (its method and `params.uri`) makes stale.
pub(crate) fn invalidated_by(method: &str, uri: Option<&str>) -> Option<Invalidation> {
    match method {
        TOOLS_LIST_CHANGED => Some(Invalidation::Lists(&[TOOLS_LIST])),
        PROMPTS_LIST_CHANGED => Some(Invalidation::Lists(&[PROMPTS_LIST])),
        RESOURCES_LIST_CHANGED => Some(Invalidation::Lists(&[
            RESOURCES_LIST,
            RESOURCES_TEMPLATES_LIST,
        ])),
        RESOURCES_UPDATED => uri.map(|u| Invalidation::Resource(u.to_string())),
        _ => None,
    }
}

/// Whether a header value equals a tool argument as the client must have encoded it: strings
/// as they are, integers in decimal (compared numerically, so `42.0` equals `42`), booleans as
/// `true`/`false`. `header_value` is already decoded (see [`super::header::decode_value`]).
pub(crate) fn param_matches(header_value: &str, arg: &serde_json::Value) -> bool {
    use serde_json::Value;
    match arg {
        Value::String(s) => s == header_value,
        Value::Bool(b) => header_value == if *b { "true" } else { "false" },
        Value::Number(n) => match (n.as_f64(), header_value.parse::<f64>()) {
            (Some(a), Ok(b)) => a == b,
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn notifications_name_what_they_invalidate() {
        assert_eq!(
            invalidated_by(TOOLS_LIST_CHANGED, None),
            Some(Invalidation::Lists(&[TOOLS_LIST]))
        );
        assert_eq!(
            invalidated_by(RESOURCES_UPDATED, Some("file:///a")),
            Some(Invalidation::Resource("file:///a".into()))
        );
        assert_eq!(invalidated_by(RESOURCES_UPDATED, None), None);
        assert_eq!(invalidated_by("notifications/progress", None), None);
    }

    #[test]
    fn params_compare_as_the_client_encodes_them() {
        assert!(param_matches("us-west1", &json!("us-west1")));
        assert!(param_matches("42", &json!(42.0)));
        assert!(param_matches("true", &json!(true)));
        assert!(!param_matches("eu", &json!("us")));
        assert!(!param_matches("x", &json!(null)));
    }
}
