//! The `Mcp-Param-*` headers a 2026 client sends for the tool arguments a tool's schema marks
//! with `x-mcp-header` (spec §2.5): the bridge is that client for a 2025-era one, so it learns
//! the marks from every `tools/list` result it carries (per endpoint), and, when the fleet
//! refuses a call for a missing header it did not know of, reads `tools/list` and tries once
//! more (the spec's client behaviour). Bounded: past [`MAX_TOOLS`] tools it starts afresh.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::mcp::header::encode_value;

const MAX_TOOLS: usize = 10_000;

/// (endpoint path, tool name) → (argument, header name) pairs.
type Marks = HashMap<(String, String), Vec<(String, String)>>;

/// The marks learned so far.
#[derive(Default)]
pub(crate) struct ParamHeaders {
    tools: Mutex<Marks>,
}

impl ParamHeaders {
    /// Learn the marks of the tools of a `tools/list` result on `path`.
    pub(crate) fn learn(&self, path: &str, result: &Value) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        let mut map = self.tools.lock().expect("params lock");
        if map.len() + tools.len() > MAX_TOOLS {
            map.clear();
        }
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            let marks: Vec<(String, String)> = t
                .pointer("/inputSchema/properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(arg, p)| {
                    let h = p.get("x-mcp-header")?.as_str()?;
                    Some((arg.clone(), format!("mcp-param-{}", h.to_ascii_lowercase())))
                })
                .collect();
            map.insert((path.to_owned(), name.to_owned()), marks);
        }
    }

    /// Whether the tool `name` on `path` was seen in a list.
    pub(crate) fn knows(&self, path: &str, name: &str) -> bool {
        let key = (path.to_owned(), name.to_owned());
        self.tools.lock().expect("params lock").contains_key(&key)
    }

    /// The headers a call of `name` with `arguments` carries.
    pub(crate) fn headers<'v>(
        &self,
        path: &str,
        name: &str,
        arguments: impl FnOnce() -> Option<&'v Value>,
    ) -> Vec<(String, String)> {
        let map = self.tools.lock().expect("params lock");
        let Some(marks) = map.get(&(path.to_owned(), name.to_owned())) else {
            return Vec::new();
        };
        if marks.is_empty() {
            return Vec::new();
        }
        let arguments = arguments();
        marks
            .iter()
            .filter_map(|(arg, header)| {
                let v = match arguments?.get(arg)? {
                    Value::String(s) => encode_value(s).into_owned(),
                    Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => return None,
                };
                Some((header.clone(), v))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn marks_are_learned_from_a_list_and_become_headers() {
        let p = ParamHeaders::default();
        let list = json!({"tools": [{"name": "deploy", "inputSchema": {"type": "object", "properties": {
            "service": {"type": "string"}, "environment": {"type": "string", "x-mcp-header": "Environment"},
            "replicas": {"type": "integer", "x-mcp-header": "Replicas"}}}}]});
        p.learn("/mcp", &list);
        assert!(p.knows("/mcp", "deploy"));
        assert!(!p.knows("/fed", "deploy"));
        let args = json!({"environment": "staging", "replicas": 3, "service": "x"});
        let mut h = p.headers("/mcp", "deploy", || Some(&args));
        h.sort();
        assert_eq!(
            h,
            vec![
                ("mcp-param-environment".into(), "staging".into()),
                ("mcp-param-replicas".into(), "3".into())
            ]
        );
        let args = json!({"environment": null});
        assert!(p.headers("/mcp", "deploy", || Some(&args)).is_empty());
    }
}
