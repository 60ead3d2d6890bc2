//! One argument-policy rule, compiled: what it covers, who is exempt, and the three checks over
//! the arguments (a schema, deny patterns at JSON pointers, size limits), each a plain function
//! of the arguments. The walks are iterative and bounded by the value itself (the strict parser
//! already bounds nesting at 64 levels), so a hostile argument costs one pass.

use serde_json::Value;
use std::fmt;

use crate::auth::Identity;
use crate::config::policy::{ClaimCondition, PolicyRule, SizeLimits};
use crate::config::Pattern;

use super::super::body::Input;

/// A compiled rule.
pub(super) struct Rule {
    pub(super) name: String,
    method: Pattern,
    tool: Option<Pattern>,
    endpoint: Option<String>,
    unless: Option<ClaimCondition>,
    schema: Option<jsonschema::Validator>,
    deny: Vec<(String, regex::Regex)>,
    limits: Option<SizeLimits>,
}

/// What broke a rule.
pub(super) enum Broken {
    Schema(String),
    Denied { pointer: String, pattern: String },
    Size(String),
    Unreadable(String),
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Broken::Schema(e) => write!(f, "the arguments do not meet the rule's schema: {e}"),
            Broken::Denied { pointer, pattern } => {
                let at = if pointer.is_empty() {
                    "an argument"
                } else {
                    pointer
                };
                write!(f, "{at} matches the denied pattern {pattern:?}")
            }
            Broken::Size(e) => write!(f, "the arguments are too large: {e}"),
            Broken::Unreadable(e) => f.write_str(e),
        }
    }
}

impl Rule {
    /// Compile a validated rule (config validation compiled the schema and patterns already).
    pub(super) fn compile(r: &PolicyRule) -> Rule {
        Rule {
            name: r.name.clone(),
            method: r.matcher.method.clone(),
            tool: r.matcher.name.clone(),
            endpoint: r.matcher.endpoint.clone(),
            unless: r.unless.clone(),
            schema: r
                .schema
                .as_ref()
                .map(|s| jsonschema::validator_for(s).expect("validated: the schema compiles")),
            deny: r
                .deny
                .iter()
                .map(|d| {
                    let re =
                        regex::Regex::new(&d.pattern).expect("validated: the pattern compiles");
                    (d.pointer.clone(), re)
                })
                .collect(),
            limits: r.limits.clone(),
        }
    }

    pub(super) fn on_endpoint(&self, path: &str) -> bool {
        self.endpoint.as_deref().is_none_or(|e| e == path)
    }

    /// Whether the rule covers this request, by what its body says.
    pub(super) fn covers(&self, input: &Input) -> bool {
        self.on_endpoint(input.scope.path)
            && input.method().is_some_and(|m| self.method.matches(m))
            && self
                .tool
                .as_ref()
                .is_none_or(|t| input.name().is_some_and(|n| t.matches(n)))
    }

    /// Whether the caller is exempt (`unless`: any scope, or any claim value).
    pub(super) fn exempt(&self, identity: Option<&Identity>) -> bool {
        let (Some(u), Some(who)) = (&self.unless, identity) else {
            return false;
        };
        u.scopes.iter().any(|s| who.has_scope(s))
            || u.claims.iter().any(|(c, vals)| who.claim_matches(c, vals))
    }

    /// The three checks, cheapest first.
    pub(super) fn check(&self, args: &Value) -> Result<(), Broken> {
        if let Some(l) = &self.limits {
            sizes(args, l).map_err(Broken::Size)?;
        }
        for (pointer, re) in &self.deny {
            let Some(at) = args.pointer(pointer) else {
                continue;
            };
            if strings(at).any(|s| re.is_match(s)) {
                let (pointer, pattern) = (pointer.clone(), re.as_str().to_string());
                return Err(Broken::Denied { pointer, pattern });
            }
        }
        if let Some(v) = &self.schema {
            if let Err(e) = v.validate(args) {
                let at = e.instance_path.to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                return Err(Broken::Schema(format!("at {at}: {e}")));
            }
        }
        Ok(())
    }
}

/// Every string at or under `v` (object keys are names, not arguments: not matched).
fn strings(v: &Value) -> impl Iterator<Item = &str> {
    let mut stack = vec![v];
    std::iter::from_fn(move || {
        while let Some(v) = stack.pop() {
            match v {
                Value::String(s) => return Some(s.as_str()),
                Value::Array(a) => stack.extend(a.iter()),
                Value::Object(o) => stack.extend(o.values()),
                _ => {}
            }
        }
        None
    })
}

/// The size limits over `args`: the first one exceeded, said for a person.
fn sizes(args: &Value, l: &SizeLimits) -> Result<(), String> {
    let mut stack = vec![(args, 1usize)];
    let long = |n: usize| l.max_string_bytes.is_some_and(|m| n > m);
    while let Some((v, depth)) = stack.pop() {
        let nested = matches!(v, Value::Array(_) | Value::Object(_));
        if nested && l.max_depth.is_some_and(|m| depth > m) {
            let m = l.max_depth.unwrap_or_default();
            return Err(format!(
                "nested {depth} levels deep, more than max_depth {m}"
            ));
        }
        match v {
            Value::String(s) if long(s.len()) => {
                let m = l.max_string_bytes.unwrap_or_default();
                return Err(format!(
                    "a string of {} bytes, more than max_string_bytes {m}",
                    s.len()
                ));
            }
            Value::Array(a) => {
                if let Some(m) = l.max_array_items.filter(|m| a.len() > *m) {
                    return Err(format!(
                        "an array of {} items, more than max_array_items {m}",
                        a.len()
                    ));
                }
                stack.extend(a.iter().map(|x| (x, depth + 1)));
            }
            Value::Object(o) => {
                if let Some(k) = o.keys().find(|k| long(k.len())) {
                    let m = l.max_string_bytes.unwrap_or_default();
                    return Err(format!(
                        "a member name of {} bytes, more than max_string_bytes {m}",
                        k.len()
                    ));
                }
                stack.extend(o.values().map(|x| (x, depth + 1)));
            }
            _ => {}
        }
    }
    Ok(())
}
