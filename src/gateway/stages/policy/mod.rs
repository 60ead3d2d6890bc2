//! The argument policy (`argument_policy:` in gateway.yaml, `crate::config::policy`): per tool
//! and per endpoint rules over a call's arguments and the caller's claims, decided at the edge
//! on the parsed body, before any upstream. A body stage ([`super::body::BodyStage`]): the
//! pipeline gives it the body on every leg and every body plan, and reads every body on an
//! endpoint a rule covers even on a sampled-out route, so a rule cannot be skipped by sampling.
//!
//! A rule covers a request by the body's method and name (never by the claimed headers, which a
//! sampled-out route does not check) and the endpoint; a caller with one of `unless`'s scopes or
//! claim values is exempt; otherwise the arguments must meet its schema, match none of its
//! deny patterns and stay within its size limits. The first rule broken refuses the call:
//! HTTP 403, JSON-RPC -31013 (a gateway code, outside the spec's reserved range), naming the
//! rule and what broke it. Arguments that cannot be read as JSON values (a number past f64,
//! such as `1e400`) are refused the same way by any rule that covers the call: a rule that
//! cannot be evaluated does not pass.

mod rules;

use serde_json::{json, Value};
use std::sync::Arc;

use crate::config::Config;
use crate::mcp::{codes, Rejection};

use super::body::{BodyStage, Input, Scope, State};
use rules::{Broken, Rule};

/// The stage, as the pipeline lists it.
pub(crate) static STAGE: BodyStage = BodyStage {
    name: "argument_policy",
    build,
    covers,
    run,
    explain,
};

/// The compiled rules of one gateway.
struct Policy {
    rules: Vec<Rule>,
}

fn build(config: &Config) -> Option<State> {
    if config.argument_policy.is_empty() {
        return None;
    }
    let rules = config.argument_policy.iter().map(Rule::compile).collect();
    Some(Arc::new(Policy { rules }))
}

fn policy(state: &State) -> &Policy {
    state
        .downcast_ref::<Policy>()
        .expect("the pipeline hands each stage the state it built")
}

fn covers(state: &State, scope: &Scope) -> bool {
    policy(state)
        .rules
        .iter()
        .any(|r| r.on_endpoint(scope.path))
}

fn run(state: &State, input: &Input) -> Result<(), Rejection> {
    for rule in policy(state).rules.iter().filter(|r| r.covers(input)) {
        if rule.exempt(input.identity) {
            continue;
        }
        let args = match arguments(input) {
            Ok(args) => args,
            Err(why) => return Err(refusal(&rule.name, &why)),
        };
        if let Err(broken) = rule.check(args) {
            return Err(refusal(&rule.name, &broken.to_string()));
        }
    }
    Ok(())
}

/// Every rule and what it says of this request (explain): covers or not, exempt, met, or broken.
fn explain(state: &State, input: &Input) -> Value {
    let verdicts: Vec<Value> = policy(state)
        .rules
        .iter()
        .map(|rule| {
            let said = if !rule.covers(input) {
                "does not cover this call".to_string()
            } else if rule.exempt(input.identity) {
                "the caller is exempt (unless)".to_string()
            } else {
                match arguments(input).map_err(|why| Broken::Unreadable(why.to_string())) {
                    Ok(args) => match rule.check(args) {
                        Ok(()) => "met".to_string(),
                        Err(b) => format!("broken: {b}"),
                    },
                    Err(b) => format!("broken: {b}"),
                }
            };
            json!({"rule": rule.name, "verdict": said})
        })
        .collect();
    json!({"rules": verdicts})
}

/// `params.arguments` (absent: an empty object, as a server reads it).
fn arguments<'a>(input: &'a Input) -> Result<&'a Value, String> {
    static EMPTY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let args = input.arguments().map_err(str::to_string)?;
    Ok(args.unwrap_or_else(|| EMPTY.get_or_init(|| json!({}))))
}

fn refusal(rule: &str, why: &str) -> Rejection {
    Rejection::new(
        403,
        codes::GATEWAY_POLICY_DENIED,
        "policy-denied",
        format!("The gateway's argument policy refuses this call: rule {rule:?}: {why}"),
    )
    .with_data(json!({"rule": rule}))
}

#[cfg(test)]
mod tests;
