//! Checks on content (k6's `check()`): expectations on the final result of a flow, counted per
//! check and usable as an exit criterion (`--max-check-failure-rate`). A check is written in a
//! scenario file (`checks: [{is_error: false}, {pointer: /structuredContent/sum, equals: 5},
//! {output_schema: true}]`) or on the command line (`--check`, see [`CheckSpec::parse_cli`]).
//! Pointers are JSON Pointers (RFC 6901) into the `result` object. Pure.

use std::sync::Arc;

use anyhow::{bail, Context as _};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One check as written.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// `isError` must be this (absent counts as `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// A JSON Pointer into the result, for `equals` / `contains` / `matches`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    /// A string value contains this text; an array has an element equal to it (or a string
    /// element containing it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// A string value matches this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// `structuredContent` is valid against the tool's `outputSchema` (from `tools/list`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_schema: bool,
}

impl CheckSpec {
    /// Parse a `--check` value: `no-error` (isError false), `schema` (structuredContent against
    /// outputSchema), `POINTER==VALUE` (VALUE as JSON, else as text), `POINTER~=TEXT` (contains),
    /// `POINTER=~REGEX` (matches).
    pub(crate) fn parse_cli(s: &str) -> anyhow::Result<CheckSpec> {
        match s.trim() {
            "no-error" | "isError=false" => {
                return Ok(CheckSpec {
                    is_error: Some(false),
                    ..CheckSpec::default()
                })
            }
            "schema" | "output-schema" => {
                return Ok(CheckSpec {
                    output_schema: true,
                    ..CheckSpec::default()
                })
            }
            _ => {}
        }
        let ops = ["==", "~=", "=~"];
        let Some((at, op)) = ops
            .iter()
            .filter_map(|op| s.find(op).map(|i| (i, *op)))
            .min_by_key(|(i, _)| *i)
        else {
            bail!("--check {s:?}: write no-error, schema, /pointer==VALUE, /pointer~=TEXT or /pointer=~REGEX");
        };
        let (pointer, value) = (s[..at].trim(), &s[at + op.len()..]);
        if !pointer.is_empty() && !pointer.starts_with('/') {
            bail!("--check {s:?}: the pointer must start with / (a JSON Pointer into the result)");
        }
        let mut c = CheckSpec {
            pointer: Some(pointer.to_string()),
            ..CheckSpec::default()
        };
        match op {
            "==" => {
                c.equals = Some(
                    serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into())),
                )
            }
            "~=" => c.contains = Some(value.into()),
            _ => c.matches = Some(value.into()),
        }
        Ok(c)
    }

    /// A short label: `isError=false`, `/structuredContent/sum == 5`, `outputSchema`.
    pub(crate) fn label(&self) -> String {
        let p = self.pointer.as_deref().unwrap_or("");
        match self {
            _ if self.output_schema => "structuredContent matches outputSchema".into(),
            CheckSpec {
                is_error: Some(b), ..
            } => format!("isError={b}"),
            CheckSpec {
                equals: Some(v), ..
            } => format!("{p} == {v}"),
            CheckSpec {
                contains: Some(t), ..
            } => format!("{p} contains {t:?}"),
            CheckSpec {
                matches: Some(r), ..
            } => format!("{p} matches /{r}/"),
            _ => "?".into(),
        }
    }
}

#[derive(Debug, Clone)]
enum Kind {
    IsError(bool),
    Equals(String, Value),
    Contains(String, String),
    Matches(String, Regex),
    OutputSchema(Arc<jsonschema::Validator>),
}

/// A check ready to run.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    pub label: String,
    kind: Kind,
}

impl Check {
    /// Compile `spec` for a tool whose `outputSchema` is `output_schema` (when known).
    pub(crate) fn compile(
        spec: &CheckSpec,
        output_schema: Option<&Value>,
    ) -> anyhow::Result<Check> {
        let label = spec.label();
        let set = [
            spec.is_error.is_some(),
            spec.equals.is_some(),
            spec.contains.is_some(),
            spec.matches.is_some(),
            spec.output_schema,
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if set != 1 {
            bail!(
                "a check needs exactly one of is_error, equals, contains, matches, output_schema"
            );
        }
        let ptr = || spec.pointer.clone().unwrap_or_default();
        let kind = if let Some(b) = spec.is_error {
            Kind::IsError(b)
        } else if let Some(v) = &spec.equals {
            Kind::Equals(ptr(), v.clone())
        } else if let Some(t) = &spec.contains {
            Kind::Contains(ptr(), t.clone())
        } else if let Some(r) = &spec.matches {
            let re = Regex::new(r).with_context(|| format!("check {label}: invalid regex"))?;
            Kind::Matches(ptr(), re)
        } else {
            let schema = output_schema
                .context("check outputSchema: the tool declares no outputSchema in tools/list")?;
            let v = jsonschema::validator_for(schema).map_err(|e| {
                anyhow::anyhow!("the tool's outputSchema is not a valid schema: {e}")
            })?;
            Kind::OutputSchema(Arc::new(v))
        };
        Ok(Check { label, kind })
    }

    /// Run the check on a result object; `Err` says what was found instead.
    pub(crate) fn evaluate(&self, result: &Value) -> Result<(), String> {
        let at = |p: &str| result.pointer(p).ok_or_else(|| format!("{p} is absent"));
        match &self.kind {
            Kind::IsError(want) => {
                let got = result
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if got == *want {
                    Ok(())
                } else {
                    Err(format!("isError is {got}"))
                }
            }
            Kind::Equals(p, want) => {
                let v = at(p)?;
                if v == want {
                    Ok(())
                } else {
                    Err(format!("{p} is {}", short(v)))
                }
            }
            Kind::Contains(p, t) => {
                let v = at(p)?;
                let ok = match v {
                    Value::String(s) => s.contains(t.as_str()),
                    Value::Array(a) => a.iter().any(|e| match e {
                        Value::String(s) => s.contains(t.as_str()),
                        other => serde_json::from_str::<Value>(t).is_ok_and(|w| &w == other),
                    }),
                    other => other.to_string().contains(t.as_str()),
                };
                if ok {
                    Ok(())
                } else {
                    Err(format!("{p} is {}", short(v)))
                }
            }
            Kind::Matches(p, re) => match at(p)? {
                Value::String(s) if re.is_match(s) => Ok(()),
                v => Err(format!("{p} is {}", short(v))),
            },
            Kind::OutputSchema(v) => {
                let sc = result
                    .get("structuredContent")
                    .ok_or("structuredContent is absent")?;
                v.validate(sc).map_err(|e| {
                    format!(
                        "structuredContent does not match outputSchema at {}: {e}",
                        e.instance_path
                    )
                })
            }
        }
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(cli: &str, out_schema: Option<&Value>, result: &Value) -> Result<(), String> {
        Check::compile(&CheckSpec::parse_cli(cli).unwrap(), out_schema)
            .unwrap()
            .evaluate(result)
    }

    #[test]
    fn cli_checks_pass_and_fail_with_what_was_found() {
        let r = json!({"content": [{"type": "text", "text": "Created repo-7"}],
            "structuredContent": {"sum": 5, "tags": ["a", "b"]}});
        assert_eq!(run("no-error", None, &r), Ok(()));
        assert_eq!(
            run("no-error", None, &json!({"isError": true})),
            Err("isError is true".into())
        );
        assert_eq!(run("/structuredContent/sum==5", None, &r), Ok(()));
        assert_eq!(
            run("/structuredContent/sum==6", None, &r),
            Err("/structuredContent/sum is 5".into())
        );
        assert_eq!(run("/content/0/text~=repo-", None, &r), Ok(()));
        assert_eq!(run("/structuredContent/tags~=b", None, &r), Ok(()));
        assert_eq!(
            run("/content/0/text=~^Created repo-[0-9]+$", None, &r),
            Ok(())
        );
        assert_eq!(run("/nope=~x", None, &r), Err("/nope is absent".into()));
        let schema = json!({"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]});
        assert_eq!(run("schema", Some(&schema), &r), Ok(()));
        let bad = json!({"structuredContent": {"sum": "five"}});
        assert!(run("schema", Some(&schema), &bad)
            .unwrap_err()
            .contains("/sum"));
        assert!(Check::compile(&CheckSpec::parse_cli("schema").unwrap(), None).is_err());
        assert!(CheckSpec::parse_cli("sum==5").is_err());
        assert!(CheckSpec::parse_cli("whatever").is_err());
        assert!(Check::compile(&CheckSpec::parse_cli("/a=~(").unwrap(), None).is_err());
    }
}
