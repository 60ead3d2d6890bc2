//! The `Mcp-Param-*` header check: the `x-mcp-header` parameters of each tool, learned per pool
//! from the `tools/list` results that pass through the gateway (and from federated pools'
//! catalogs), and the check of a `tools/call` against them.
//!
//! A known tool's call whose marked argument is present (and not `null`) must carry the
//! matching `Mcp-Param-{Name}` header, with the same value as the argument (decoded like
//! `Mcp-Name`, compared as [`crate::mcp::caching::param_matches`] says); otherwise 400 /
//! -32020 before any upstream sees it. An absent or `null` argument with no header passes, and
//! so does every tool this gateway has not seen in a `tools/list`. A tool whose annotations
//! break the spec's rules (empty, not a token, duplicated ignoring case) is not learned: clients
//! drop such tools, and the upstream judges their calls.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::mcp::caching::{param_matches, X_MCP_HEADER};
use crate::mcp::header::{self, Claim, PARAM_PREFIX};
use crate::mcp::Rejection;

/// Tools remembered per pool (beyond this, new tools are not learned and their calls pass).
pub(crate) const MAX_TOOLS_PER_POOL: usize = 10_000;

/// One marked argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamHeader {
    /// The argument's path from `arguments` through `properties` keys.
    pub path: Vec<String>,
    /// The header suffix as declared (`Region` for `Mcp-Param-Region`).
    pub suffix: String,
    /// The header's lowercase name (`mcp-param-region`).
    pub name: String,
}

/// A pool's tools with marked arguments.
type Tools = HashMap<String, Arc<[ParamHeader]>>;

/// The learned tools of every pool.
#[derive(Debug, Default)]
pub struct ParamBook {
    pools: RwLock<HashMap<Arc<str>, Tools>>,
}

#[derive(Deserialize)]
struct ListBody {
    result: ListResult,
}
#[derive(Deserialize)]
struct ListResult {
    #[serde(default)]
    tools: Vec<Value>,
}

impl ParamBook {
    /// Learn from one `tools/list` response body (a page). Tools without marked arguments are
    /// forgotten (their schema may have dropped them).
    pub(crate) fn learn(&self, pool: &Arc<str>, body: &[u8]) {
        let Ok(list) = serde_json::from_slice::<ListBody>(body) else {
            return;
        };
        self.learn_tools(pool, &list.result.tools);
    }

    /// Learn from the tools of a list (a page, or a federated pool's whole catalog list).
    pub(crate) fn learn_tools(&self, pool: &Arc<str>, list: &[Value]) {
        let mut pools = self.pools.write().unwrap_or_else(|e| e.into_inner());
        let tools = pools.entry(pool.clone()).or_default();
        for tool in list {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            match tool.get("inputSchema").map(marked_params) {
                Some(Some(params)) if !params.is_empty() => {
                    if tools.len() < MAX_TOOLS_PER_POOL || tools.contains_key(name) {
                        tools.insert(name.to_string(), params.into());
                    }
                }
                _ => {
                    tools.remove(name);
                }
            }
        }
    }

    /// The marked arguments of a known tool of `pool`.
    pub(crate) fn get(&self, pool: &str, tool: &str) -> Option<Arc<[ParamHeader]>> {
        let pools = self.pools.read().unwrap_or_else(|e| e.into_inner());
        pools.get(pool)?.get(tool).cloned()
    }

    /// Forget a pool's tools (its instances changed on reload).
    pub(crate) fn forget(&self, pool: &str) {
        let mut pools = self.pools.write().unwrap_or_else(|e| e.into_inner());
        pools.remove(pool);
    }
}

/// The marked properties of a schema, reachable through `properties` keys only; `None` when an
/// annotation breaks the rules.
fn marked_params(schema: &Value) -> Option<Vec<ParamHeader>> {
    let mut out = Vec::new();
    walk(schema, &mut Vec::new(), &mut out, 0)?;
    let mut seen: Vec<String> = out.iter().map(|p| p.name.clone()).collect();
    seen.sort();
    seen.dedup();
    (seen.len() == out.len()).then_some(out)
}

fn walk(s: &Value, path: &mut Vec<String>, out: &mut Vec<ParamHeader>, depth: usize) -> Option<()> {
    if depth > 32 {
        return Some(());
    }
    let Some(props) = s.get("properties").and_then(Value::as_object) else {
        return Some(());
    };
    for (k, prop) in props {
        path.push(k.clone());
        if let Some(h) = prop.get(X_MCP_HEADER) {
            let suffix = h.as_str().filter(|s| is_token(s))?;
            out.push(ParamHeader {
                path: path.clone(),
                suffix: suffix.to_string(),
                name: format!("{PARAM_PREFIX}{}", suffix.to_ascii_lowercase()),
            });
        }
        walk(prop, path, out, depth + 1)?;
        path.pop();
    }
    Some(())
}

/// An RFC 9110 token.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[derive(Deserialize)]
struct CallBody {
    #[serde(default)]
    params: Option<CallParams>,
}
#[derive(Deserialize)]
struct CallParams {
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
}

/// Check a `tools/call` body of a known tool against its `Mcp-Param-*` headers.
pub(crate) fn check(
    headers: &http::HeaderMap,
    params: &[ParamHeader],
    body: &[u8],
) -> Result<(), Rejection> {
    let args = serde_json::from_slice::<CallBody>(body)
        .ok()
        .and_then(|b| b.params)
        .and_then(|p| p.arguments)
        .unwrap_or_default();
    for p in params {
        let mut v = args.get(&p.path[0]);
        for k in &p.path[1..] {
            v = v.and_then(|x| x.get(k));
        }
        let Some(want) = v.filter(|v| !v.is_null()) else {
            continue;
        };
        let shown = format!("Mcp-Param-{}", p.suffix);
        let arg = p.path.join(".");
        let data = json!({ "header": shown });
        match header::claim(headers, &p.name, true) {
            Claim::Invalid(problem) => {
                let msg = format!("The {shown} header {}", problem.describe());
                return Err(Rejection::header_mismatch("mcp-param-invalid", msg).with_data(data));
            }
            Claim::Absent => {
                let msg = format!("The {shown} header is required because arguments.{arg} is present (x-mcp-header in the tool's inputSchema); send it with the same value");
                return Err(Rejection::header_mismatch("mcp-param-missing", msg).with_data(data));
            }
            Claim::Present(hv) if !param_matches(&hv, want) => {
                let msg = format!(
                    "The {shown} header {:?} does not match arguments.{arg} {want}",
                    hv.as_ref()
                );
                return Err(Rejection::header_mismatch("mcp-param-mismatch", msg).with_data(data));
            }
            Claim::Present(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[
        {"name":"deploy","inputSchema":{"type":"object","properties":{
            "region":{"type":"string","x-mcp-header":"Region"},
            "opts":{"type":"object","properties":{"tier":{"type":"integer","x-mcp-header":"Tier"}}}}}},
        {"name":"plain","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}},
        {"name":"broken","inputSchema":{"properties":{"a":{"x-mcp-header":"X"},"b":{"x-mcp-header":"x"}}}}
    ]}}"#;

    fn book() -> (ParamBook, Arc<str>) {
        let b = ParamBook::default();
        let p: Arc<str> = "pool".into();
        b.learn(&p, LIST.as_bytes());
        (b, p)
    }

    fn headers(h: &[(&str, &str)]) -> http::HeaderMap {
        h.iter()
            .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
            .collect()
    }

    fn call(args: &str) -> Vec<u8> {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"deploy","arguments":{args}}}}}"#).into_bytes()
    }

    #[test]
    fn learns_marked_arguments_and_skips_broken_or_plain_tools() {
        let (b, _) = book();
        let d = b.get("pool", "deploy").unwrap();
        assert_eq!(d.len(), 2);
        let tier = d.iter().find(|p| p.suffix == "Tier").unwrap();
        assert_eq!(tier.path, vec!["opts".to_string(), "tier".to_string()]);
        assert_eq!(tier.name, "mcp-param-tier");
        assert!(b.get("pool", "plain").is_none());
        assert!(
            b.get("pool", "broken").is_none(),
            "duplicate headers ignoring case"
        );
        assert!(b.get("other", "deploy").is_none());
        b.forget("pool");
        assert!(b.get("pool", "deploy").is_none());
    }

    #[test]
    fn present_argument_needs_its_header() {
        let (b, _) = book();
        let d = b.get("pool", "deploy").unwrap();
        let missing = check(&headers(&[]), &d, &call(r#"{"region":"us-west1"}"#)).unwrap_err();
        assert_eq!(
            (missing.status, missing.code, missing.reason),
            (400, -32020, "mcp-param-missing")
        );
        let wrong = check(
            &headers(&[("mcp-param-region", "eu")]),
            &d,
            &call(r#"{"region":"us-west1"}"#),
        )
        .unwrap_err();
        assert_eq!(wrong.reason, "mcp-param-mismatch");
        check(
            &headers(&[("mcp-param-region", "us-west1")]),
            &d,
            &call(r#"{"region":"us-west1"}"#),
        )
        .unwrap();
        check(&headers(&[]), &d, &call(r#"{"region":null}"#)).unwrap();
        check(&headers(&[]), &d, &call("{}")).unwrap();
        // Nested, an integer compared numerically, base64-wrapped values decoded.
        let h = headers(&[("mcp-param-tier", "3")]);
        check(&h, &d, &call(r#"{"opts":{"tier":3.0}}"#)).unwrap();
        let enc = header::encode_value(" eu ").into_owned();
        check(
            &headers(&[("mcp-param-region", &enc)]),
            &d,
            &call(r#"{"region":" eu "}"#),
        )
        .unwrap();
    }
}
