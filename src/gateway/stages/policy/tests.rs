//! The argument policy as plain functions: a rule's checks, exemptions and refusals, over bodies
//! parsed by the strict envelope reader, including hostile arguments.

use serde_json::{json, Value};

use super::super::body::{Input, Scope, State};
use super::{build, covers, explain, run};
use crate::auth::Identity;
use crate::config::Config;
use crate::mcp::envelope;

const RULES: &str = "
argument_policy:
  - name: staging-only
    match: {name: deploy}
    unless: {scopes: [deploy:prod], claims: {role: [release-manager]}}
    schema: {type: object, required: [environment], properties: {environment: {const: staging}}}
  - name: no-shell
    match: {name: run, endpoint: /mcp}
    deny: [{pointer: /command, pattern: '[;&|]'}]
  - name: small
    match: {name: '*'}
    limits: {max_string_bytes: 1000, max_array_items: 10, max_depth: 4}
";

fn state() -> State {
    let text = format!(
        "pools:\n  p:\n    instances: [127.0.0.1:7001]\ndefault_route: {{pool: p}}\n{RULES}"
    );
    build(&Config::parse(&text, "g.yaml").unwrap()).expect("rules configured")
}

fn body(name: &str, args: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{name}","arguments":{args}}}}}"#
    )
}

fn who(claims: Value) -> Identity {
    let Value::Object(m) = claims else {
        unreachable!()
    };
    Identity::new("alice".into(), m)
}

/// The verdict for a call on `/mcp`: `Ok`, or the refusal's message.
fn verdict(name: &str, args: &str, caller: Option<&Identity>) -> Result<(), String> {
    let text = body(name, args);
    let env = envelope::parse(text.as_bytes()).expect("a valid body");
    let input = Input::new(Scope { path: "/mcp" }, &env, text.as_bytes(), caller);
    run(&state(), &input).map_err(|r| {
        assert_eq!((r.status, r.code), (403, -31013));
        r.message.into_owned()
    })
}

#[test]
fn a_narrower_schema_holds_unless_the_caller_has_the_scope_or_claim() {
    assert!(verdict("deploy", r#"{"environment":"staging"}"#, None).is_ok());
    let e = verdict("deploy", r#"{"environment":"prod"}"#, None).unwrap_err();
    assert!(
        e.contains("\"staging-only\"") && e.contains("/environment"),
        "{e}"
    );
    let e = verdict("deploy", "{}", None).unwrap_err();
    assert!(e.contains("environment"), "{e}");
    let plain = who(json!({"scope": "tools:call"}));
    assert!(verdict("deploy", r#"{"environment":"prod"}"#, Some(&plain)).is_err());
    let prod = who(json!({"scope": "tools:call deploy:prod"}));
    assert!(verdict("deploy", r#"{"environment":"prod"}"#, Some(&prod)).is_ok());
    let rm = who(json!({"role": ["dev", "release-manager"]}));
    assert!(verdict("deploy", r#"{"environment":"prod"}"#, Some(&rm)).is_ok());
    // Another tool is not covered by the rule.
    assert!(verdict("status", r#"{"environment":"prod"}"#, None).is_ok());
}

#[test]
fn deny_patterns_match_strings_at_a_pointer() {
    assert!(verdict("run", r#"{"command":"ls -l"}"#, None).is_ok());
    let e = verdict("run", r#"{"command":"ls; rm -rf /"}"#, None).unwrap_err();
    assert!(e.contains("\"no-shell\"") && e.contains("/command"), "{e}");
    // Elsewhere in the arguments the pattern does not apply; an absent member matches nothing.
    assert!(verdict("run", r#"{"note":"a;b"}"#, None).is_ok());
    // Every string under the pointer counts.
    assert!(verdict("run", r#"{"command":["ls","a|b"]}"#, None).is_err());
}

#[test]
fn size_limits_and_hostile_arguments_are_refused_cleanly() {
    let long = format!(r#"{{"s":"{}"}}"#, "a".repeat(1001));
    let e = verdict("echo", &long, None).unwrap_err();
    assert!(e.contains("max_string_bytes 1000"), "{e}");
    let many = format!("{{\"a\":[{}]}}", ["1"; 11].join(","));
    assert!(verdict("echo", &many, None)
        .unwrap_err()
        .contains("max_array_items"));
    let deep = r#"{"a":{"b":{"c":{"d":{}}}}}"#;
    assert!(verdict("echo", deep, None)
        .unwrap_err()
        .contains("max_depth 4"));
    assert!(verdict("echo", r#"{"a":{"b":{"c":1}}}"#, None).is_ok());
    // A number past f64 is refused by the strict reader before any stage (a parse error).
    assert!(envelope::parse(body("echo", r#"{"n":1e400}"#).as_bytes()).is_err());
    assert!(verdict(
        "echo",
        r#"{"n":-0,"m":1e-400,"k":18446744073709551616}"#,
        None
    )
    .is_ok());
    // Nesting the strict reader refuses never gets here (64 levels); within it, the walk is flat.
    let nested = format!("{}{}", "[".repeat(60), "]".repeat(60));
    assert!(verdict("echo", &format!(r#"{{"a":{nested}}}"#), None).is_err());
}

#[test]
fn covers_by_endpoint_and_explain_names_each_rule() {
    let s = state();
    assert!(
        covers(&s, &Scope { path: "/other" }),
        "rules without endpoint cover every path"
    );
    let text = body("run", r#"{"command":"a|b"}"#);
    let env = envelope::parse(text.as_bytes()).unwrap();
    let input = Input::new(Scope { path: "/mcp" }, &env, text.as_bytes(), None);
    let said = explain(&s, &input);
    let rules: Vec<(String, String)> = said["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap().into(),
                r["verdict"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        rules[0],
        ("staging-only".into(), "does not cover this call".into())
    );
    assert!(rules[1].1.starts_with("broken:"), "{rules:?}");
    assert_eq!(rules[2], ("small".into(), "met".into()));
}
