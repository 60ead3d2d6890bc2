//! `argument_policy:` rules over a call's arguments and the caller's claims, evaluated at the
//! edge on the parsed body before any upstream (the gateway's side is
//! `gateway::stages::policy`). The schema and its validation live here.
//!
//! The language is JSON Schema plus claim conditions, not CEL: a tool already declares its
//! arguments as a JSON Schema (`inputSchema`), so a narrower schema is written in the language
//! the tool's author used; the `jsonschema` and `regex` crates are already in the tree, where
//! CEL would add a parser runtime (the `cel` crate, which `cel-interpreter` became, pulls
//! antlr4rust, nom and chrono). What JSON Schema cannot say about the caller, `unless` says.

use serde::Deserialize;
use std::collections::BTreeMap;

use super::{ConfigError, Pattern, Positions};

/// One rule: which calls it covers, when the caller is exempt, and what the arguments must meet.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    /// Names the rule in refusals, `explain` and logs.
    pub name: String,
    /// Which requests the rule covers (default: every `tools/call`).
    #[serde(rename = "match", default)]
    pub matcher: PolicyMatch,
    /// The caller is exempt when it has any of these scopes or claim values.
    #[serde(default)]
    pub unless: Option<ClaimCondition>,
    /// A JSON Schema the arguments must meet (e.g. `environment` must be `staging`).
    #[serde(default)]
    pub schema: Option<serde_json::Value>,
    /// Patterns no string argument at a JSON pointer may match.
    #[serde(default)]
    pub deny: Vec<DenyPattern>,
    /// Size bounds over the whole arguments.
    #[serde(default)]
    pub limits: Option<SizeLimits>,
}

/// What a rule covers; every given field must match. Names are read from the body.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyMatch {
    /// The body's method (default `tools/call`; `prompts/get` also has arguments).
    #[serde(default = "d_method")]
    pub method: Pattern,
    /// The tool or prompt name (`params.name`): exact, prefix (`deploy*`), glob (default: any).
    #[serde(default)]
    pub name: Option<Pattern>,
    /// The endpoint path (default: every endpoint, federated ones included).
    #[serde(default)]
    pub endpoint: Option<String>,
}

impl Default for PolicyMatch {
    fn default() -> Self {
        PolicyMatch {
            method: d_method(),
            name: None,
            endpoint: None,
        }
    }
}

fn d_method() -> Pattern {
    Pattern::parse(crate::mcp::methods::TOOLS_CALL)
}

/// A caller condition: any scope listed, or any claim with one of its listed values.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClaimCondition {
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Claim name to accepted values (a string claim equal to one, or an array holding one).
    #[serde(default)]
    pub claims: BTreeMap<String, Vec<String>>,
}

/// A regular expression that must not match the string(s) at `pointer` in the arguments.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DenyPattern {
    /// RFC 6901 JSON pointer into the arguments (`/command`; `""`: all of them). Every string
    /// at or under it is matched; an absent member matches nothing.
    #[serde(default)]
    pub pointer: String,
    /// A regular expression (Rust `regex` syntax; unanchored: add `^...$` to match whole).
    pub pattern: String,
}

/// Bounds over the arguments, each optional.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SizeLimits {
    /// Longest string value or object key, in bytes (UTF-8).
    #[serde(default)]
    pub max_string_bytes: Option<usize>,
    /// Most items in one array.
    #[serde(default)]
    pub max_array_items: Option<usize>,
    /// Deepest nesting of arrays and objects (the arguments object itself is level 1).
    #[serde(default)]
    pub max_depth: Option<usize>,
}

/// The rules as `mcp-edge check` prints them (nothing without rules).
pub(super) fn describe(rules: &[PolicyRule]) -> String {
    let mut out = String::new();
    if !rules.is_empty() {
        out.push_str("\nargument policy (the first rule broken refuses: 403 / -31013)\n");
    }
    for r in rules {
        let m = &r.matcher;
        let name = m.name.as_ref().map_or("*".to_string(), |p| p.to_string());
        let endpoint = m.endpoint.as_deref().unwrap_or("every endpoint");
        let mut checks = Vec::new();
        if r.schema.is_some() {
            checks.push("schema".to_string());
        }
        if !r.deny.is_empty() {
            checks.push(format!("{} deny pattern(s)", r.deny.len()));
        }
        if r.limits.is_some() {
            checks.push("size limits".to_string());
        }
        let exempt = r.unless.as_ref().map_or(String::new(), |u| {
            let claims = u.claims.keys().map(|c| format!("claim {c}"));
            let who: Vec<String> = u
                .scopes
                .iter()
                .map(|s| format!("scope {s}"))
                .chain(claims)
                .collect();
            format!("; exempt: {}", who.join(", "))
        });
        out.push_str(&format!(
            "  {:<20} {} {name} on {endpoint}: {}{exempt}\n",
            r.name,
            m.method,
            checks.join(", ")
        ));
    }
    out
}

/// Check every rule: unique names, a schema that compiles, patterns that compile, pointers
/// that are pointers, and something to check.
pub(super) fn validate(
    rules: &[PolicyRule],
    pos: &Positions,
    file: &str,
) -> Result<(), ConfigError> {
    let err = |path: String, message: String| ConfigError::at(file, pos.near(&path), message);
    for (i, r) in rules.iter().enumerate() {
        let at = format!("argument_policy[{i}]");
        if rules[..i].iter().any(|o| o.name == r.name) {
            let m = format!(
                "{at}.name: {:?} is used twice; rule names must be unique",
                r.name
            );
            return Err(err(format!("{at}.name"), m));
        }
        if r.schema.is_none() && r.deny.is_empty() && r.limits.is_none() {
            let m = format!("{at}: the rule checks nothing; give it a schema, deny or limits");
            return Err(err(at, m));
        }
        if let Some(s) = &r.schema {
            if let Err(e) = jsonschema::validator_for(s) {
                let m = format!("{at}.schema: not a valid JSON Schema: {e}");
                return Err(err(format!("{at}.schema"), m));
            }
        }
        for (j, d) in r.deny.iter().enumerate() {
            let here = format!("{at}.deny[{j}]");
            if !(d.pointer.is_empty() || d.pointer.starts_with('/')) {
                let m = format!("{here}.pointer: {:?} is not a JSON pointer; write it as /member/0/inner (or \"\" for all arguments)", d.pointer);
                return Err(err(format!("{here}.pointer"), m));
            }
            if let Err(e) = regex::Regex::new(&d.pattern) {
                let m = format!("{here}.pattern: not a valid regular expression: {e}");
                return Err(err(format!("{here}.pattern"), m));
            }
        }
        if let Some(e) = &r.matcher.endpoint {
            if !e.starts_with('/') {
                let m = format!("{at}.match.endpoint: {e:?} is a path and starts with /");
                return Err(err(format!("{at}.match.endpoint"), m));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const MIN: &str =
        "pools:\n  default:\n    instances: [127.0.0.1:7001]\ndefault_route: {pool: default}\n";

    fn err(extra: &str) -> crate::config::ConfigError {
        Config::parse(&format!("{MIN}{extra}"), "g.yaml").unwrap_err()
    }

    #[test]
    fn rules_parse_with_their_defaults() {
        let text = format!(
            "{MIN}argument_policy:\n  - name: staging-only\n    match: {{name: deploy*}}\n    unless: {{scopes: [deploy:prod]}}\n    schema: {{properties: {{environment: {{const: staging}}}}}}\n"
        );
        let c = Config::parse(&text, "g.yaml").unwrap();
        let r = &c.argument_policy[0];
        assert_eq!(r.matcher.method.to_string(), "tools/call");
        assert_eq!(r.unless.as_ref().unwrap().scopes, ["deploy:prod"]);
        let shown = c.describe();
        assert!(shown.contains("staging-only         tools/call deploy* on every endpoint: schema; exempt: scope deploy:prod"), "{shown}");
    }

    #[test]
    fn bad_rules_name_the_file_line_key_and_fix() {
        let e = err("argument_policy:\n  - name: a\n    deny: [{pointer: /x, pattern: \"(\"}]\n");
        assert_eq!(e.line, Some(7), "{e}");
        assert!(
            e.message.contains("argument_policy[0].deny[0].pattern"),
            "{e}"
        );
        let e = err("argument_policy:\n  - name: a\n    deny: [{pointer: x, pattern: a}]\n");
        assert!(e.message.contains("not a JSON pointer"), "{e}");
        let e = err("argument_policy:\n  - name: a\n");
        assert!(e.message.contains("checks nothing"), "{e}");
        let e = err("argument_policy:\n  - name: a\n    schema: {type: 12}\n");
        assert!(e.message.contains("argument_policy[0].schema"), "{e}");
        let e = err("argument_policy:\n  - name: a\n    limits: {max_depth: 3}\n  - name: a\n    limits: {max_depth: 3}\n");
        assert!(e.message.contains("used twice"), "{e}");
        let e = err("argument_policy:\n  - name: a\n    limits: {max_deep: 3}\n");
        assert_eq!(e.line, Some(7), "{e}");
    }
}
