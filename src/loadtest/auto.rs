//! `--scenario auto`: a scenario built from what the target lists. One flow per tool, equal
//! weights; arguments made from the tool's `inputSchema` (required properties, and every
//! `x-mcp-header` property so its `Mcp-Param-*` header is exercised); checks that the result is
//! not an error and, when the tool declares an `outputSchema`, that `structuredContent` matches
//! it. Tools whose annotations say they are destructive (`destructiveHint: true`) or not
//! idempotent (`idempotentHint: false`), unless `readOnlyHint: true`, are left out unless
//! `--include-destructive`; tools that require tasks are left out (the load tester does not
//! poll tasks). Pure.

use std::collections::BTreeMap;

use anyhow::bail;
use serde_json::{Map, Value};

use super::checks::CheckSpec;
use super::gen;
use super::preflight::header_params;
use super::scenario::{FlowSpec, Scenario, DEFAULT_MAX_ROUNDS};

/// The name that selects this scenario.
pub(crate) const AUTO: &str = "auto";

/// Why a tool is left out of the auto scenario, if it is.
pub(crate) fn exclusion(tool: &Value, include_destructive: bool) -> Option<&'static str> {
    let a = tool.get("annotations");
    let hint = |k: &str| a.and_then(|a| a.get(k)).and_then(Value::as_bool);
    if tool
        .get("execution")
        .and_then(|e| e.get("taskSupport"))
        .and_then(Value::as_str)
        == Some("required")
    {
        return Some("requires tasks");
    }
    if include_destructive || hint("readOnlyHint") == Some(true) {
        return None;
    }
    if hint("destructiveHint") == Some(true) {
        return Some("destructive (destructiveHint)");
    }
    if hint("idempotentHint") == Some(false) {
        return Some("not idempotent (idempotentHint: false)");
    }
    None
}

/// The flow for one tool.
pub(crate) fn flow_for(tool: &Value) -> Option<FlowSpec> {
    let name = tool.get("name")?.as_str()?;
    let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    let mut arguments = match gen::sample(&schema) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let mut param_headers = BTreeMap::new();
    for (arg, suffix) in header_params(tool) {
        if !arguments.contains_key(&arg) {
            if let Some(v) = gen::property(&schema, &arg) {
                arguments.insert(arg.clone(), v);
            }
        }
        param_headers.insert(suffix, arg);
    }
    let mut checks = vec![CheckSpec {
        is_error: Some(false),
        ..CheckSpec::default()
    }];
    if tool.get("outputSchema").is_some_and(Value::is_object) {
        checks.push(CheckSpec {
            output_schema: true,
            ..CheckSpec::default()
        });
    }
    Some(FlowSpec {
        name: None,
        tool: Some(name.to_string()),
        method: None,
        arguments,
        weight: 1,
        answers: Map::new(),
        param_headers,
        checks,
        tasks: false,
    })
}

/// The auto scenario, and the tools left out with the reason.
pub(crate) fn scenario(
    tools: &[Value],
    include_destructive: bool,
) -> anyhow::Result<(Scenario, Vec<(String, &'static str)>)> {
    let mut flows = Vec::new();
    let mut excluded = Vec::new();
    for t in tools {
        let name = t["name"].as_str().unwrap_or("?").to_string();
        match exclusion(t, include_destructive) {
            Some(why) => excluded.push((name, why)),
            None => flows.extend(flow_for(t)),
        }
    }
    if flows.is_empty() {
        let why: Vec<String> = excluded.iter().map(|(n, w)| format!("{n}: {w}")).collect();
        bail!(
            "--scenario auto: the target offers no tool to call ({} listed{}{})",
            tools.len(),
            if why.is_empty() { "" } else { "; left out: " },
            why.join(", ")
        );
    }
    let s = Scenario {
        name: AUTO.into(),
        max_rounds: DEFAULT_MAX_ROUNDS,
        flows,
    };
    s.validate()?;
    Ok((s, excluded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flows_from_tools_list() {
        let tools = vec![
            json!({"name": "forecast", "inputSchema": {"type": "object", "required": ["days"],
                "properties": {"days": {"type": "integer", "minimum": 3, "maximum": 10},
                "region": {"type": "string", "enum": ["eu", "us"], "x-mcp-header": "Region"},
                "verbose": {"type": "boolean"}}},
                "outputSchema": {"type": "object"}}),
            json!({"name": "wipe", "annotations": {"destructiveHint": true}}),
            json!({"name": "append", "annotations": {"idempotentHint": false}}),
            json!({"name": "read", "annotations": {"readOnlyHint": true, "idempotentHint": false}}),
            json!({"name": "slow", "execution": {"taskSupport": "required"}}),
        ];
        let (s, excluded) = scenario(&tools, false).unwrap();
        let names: Vec<&str> = s.tools();
        assert_eq!(names, ["forecast", "read"]);
        assert_eq!(excluded.len(), 3);
        let f = &s.flows[0];
        assert_eq!(
            f.arguments,
            *json!({"days": 3, "region": "eu"}).as_object().unwrap()
        );
        assert_eq!(f.param_headers["Region"], "region");
        assert_eq!(f.checks.len(), 2);
        assert_eq!(s.flows[1].checks.len(), 1);
        let (all, ex) = scenario(&tools, true).unwrap();
        assert_eq!(all.flows.len(), 4);
        assert_eq!(ex, [("slow".to_string(), "requires tasks")]);
        let e = scenario(&tools[1..2], false).unwrap_err().to_string();
        assert!(e.contains("wipe: destructive"), "{e}");
    }
}
