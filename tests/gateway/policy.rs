//! The argument policy (`argument_policy:`, docs/policy.md) over real loopback sockets: calls
//! allowed and refused for different callers (real tokens verified by the auth tier), a refused
//! call never reaching the upstream (counted there), hostile arguments answered cleanly, a
//! sampled-out route enforced on both legs, and explain naming each rule's verdict.

use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};

use crate::support::auth::testkeys::{self, *};
use crate::support::auth::*;
use crate::support::http::request;
use crate::support::*;

const RESOURCE: &str = "https://mcp.test/mcp";

const RULES: &str = "argument_policy:
  - name: staging-only
    match: {name: deploy}
    unless: {scopes: [deploy:prod]}
    schema: {type: object, required: [environment], properties: {environment: {const: staging}}}
  - name: no-shell
    match: {name: run}
    deny: [{pointer: /command, pattern: '[;&|]'}]
  - name: bounded
    match: {name: '*'}
    limits: {max_string_bytes: 4096, max_array_items: 100, max_depth: 8}
";

/// A tools/call of `name` with these arguments (`args` is JSON text, sent as written).
fn call_with(id: u64, name: &str, args: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args},{META}}}}}"#
    )
}

fn send(gw: &RunningGateway, token: Option<&str>, claimed: &str, body: &str) -> Reply {
    let mut h = call_headers(claimed);
    if let Some(t) = token {
        h.push(("Authorization", format!("Bearer {t}")));
    }
    request(gw.mcp_addr, "POST", "/mcp", &refs(&h), body.as_bytes())
}

/// A refusal by the policy: 403, -31013, the rule named in the message and in `data.rule`.
fn refused_by(r: &Reply, rule: &str) {
    assert_eq!(r.status, 403, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], -31013, "{v}");
    assert_eq!(v["error"]["data"]["rule"], rule, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains(rule),
        "{v}"
    );
}

#[test]
fn rules_allow_and_refuse_by_arguments_and_caller_before_any_upstream() {
    let k = ec("pol");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let up = Upstreams::start(1);
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        &format!(
            "default_route: {{pool: default}}\n{RULES}{}",
            auth_yaml(RESOURCE, &url_jwks(&jwks), "")
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let alice = sign(&k, &claims(ISS, RESOURCE, "alice", "tools"));
    let bob = sign(&k, &claims(ISS, RESOURCE, "bob", "tools deploy:prod"));
    let (a, b) = (Some(alice.as_str()), Some(bob.as_str()));

    let staging = call_with(1, "deploy", r#"{"environment":"staging"}"#);
    let prod = call_with(2, "deploy", r#"{"environment":"prod"}"#);
    assert_eq!(send(&gw, a, "deploy", &staging).status, 200);
    refused_by(&send(&gw, a, "deploy", &prod), "staging-only");
    refused_by(
        &send(&gw, a, "deploy", &call_with(3, "deploy", "{}")),
        "staging-only",
    );
    // Bob holds deploy:prod: exempt from that rule, not from the others.
    assert_eq!(send(&gw, b, "deploy", &prod).status, 200);
    let r = send(
        &gw,
        b,
        "run",
        &call_with(4, "run", r#"{"command":"ls && rm -rf /"}"#),
    );
    refused_by(&r, "no-shell");
    assert_eq!(r.json()["id"], 4);
    assert_eq!(
        send(
            &gw,
            b,
            "run",
            &call_with(5, "run", r#"{"command":"ls -l"}"#)
        )
        .status,
        200
    );
    assert_eq!(up.count(), 3, "only the allowed calls reached the upstream");

    // Hostile arguments, each answered cleanly and none forwarded.
    let huge = call_with(6, "echo", &format!(r#"{{"s":"{}"}}"#, "x".repeat(200_000)));
    refused_by(&send(&gw, a, "echo", &huge), "bounded");
    let deep = call_with(
        7,
        "echo",
        &format!(r#"{{"a":{}1{}}}"#, "[".repeat(20), "]".repeat(20)),
    );
    refused_by(&send(&gw, a, "echo", &deep), "bounded");
    let deeper = call_with(
        8,
        "echo",
        &format!(r#"{{"a":{}1{}}}"#, "[".repeat(100), "]".repeat(100)),
    );
    let r = send(&gw, a, "echo", &deeper);
    assert_eq!((r.status, r.error_code()), (400, -32600), "{}", r.text());
    assert_eq!(
        r.json()["id"],
        8,
        "the strict reader refuses past 64 levels, with the id"
    );
    let r = send(&gw, a, "echo", &call_with(9, "echo", r#"{"n":1e400}"#));
    assert_eq!(r.status, 400, "{}", r.text());
    let many = call_with(
        10,
        "echo",
        &format!(r#"{{"a":[{}]}}"#, ["0"; 101].join(",")),
    );
    refused_by(&send(&gw, a, "echo", &many), "bounded");
    assert_eq!(up.count(), 3, "no hostile call reached the upstream");
    let odd = call_with(
        11,
        "echo",
        r#"{"n":-0,"m":1e-400,"k":18446744073709551616}"#,
    );
    assert_eq!(send(&gw, a, "echo", &odd).status, 200);
    assert_eq!(up.count(), 4);

    // Explain names every rule's verdict for the caller.
    let q = json!({"headers": {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call", "Mcp-Name": "deploy", "Authorization": format!("Bearer {alice}")},
        "body": prod});
    let v = explain(&gw, &q);
    assert_eq!(v["decided_by"], "argument_policy", "{v:#}");
    let step = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "argument_policy")
        .unwrap();
    let verdicts: Vec<&str> = step["detail"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert!(verdicts[0].starts_with("broken:"), "{verdicts:?}");
    assert_eq!(verdicts[1..], ["does not cover this call", "met"]);
    assert_eq!(up.count(), 4, "explain forwards nothing");
}

#[test]
fn a_sampled_out_route_still_enforces_the_rules_on_both_legs() {
    let up = Upstreams::start(1);
    for leg in ["direct", "pingora"] {
        let cfg = config(
            &[("default", &up.addrs, "balance: round_robin")],
            &format!("default_route: {{pool: default}}\nvalidation: {{sample: 0.0}}\nconnections: {{upstream_leg: {leg}}}\n{RULES}"),
        );
        let gw = RunningGateway::start(cfg).unwrap();
        let before = up.count();
        let bad = call_with(1, "run", r#"{"command":"a; b"}"#);
        refused_by(&send(&gw, None, "run", &bad), "no-shell");
        // The claim is not what the rule reads: a spoofed Mcp-Name does not route around it.
        refused_by(&send(&gw, None, "harmless", &bad), "no-shell");
        // A body past 64 KiB (held chunk by chunk on pingora's pipe) is judged all the same.
        let big = call_with(
            2,
            "run",
            &format!(
                r#"{{"command":"a; b","pad":[{}]}}"#,
                vec![r#""xxxxxxxx""#; 8000].join(",")
            ),
        );
        let r = send(&gw, None, "run", &big);
        assert_eq!(r.status, 403, "{leg}: {}", r.text());
        assert_eq!(
            up.count(),
            before,
            "{leg}: nothing refused reached the upstream"
        );
        assert_eq!(
            send(
                &gw,
                None,
                "run",
                &call_with(3, "run", r#"{"command":"ls"}"#)
            )
            .status,
            200
        );
        assert_eq!(up.count(), before + 1, "{leg}");
    }
}

#[test]
fn a_reload_changes_the_rules() {
    let up = Upstreams::start(1);
    let port = free_port();
    let with = |rules: &str| {
        let y = format!(
            "work_stealing: true\nlisten: {{mcp: 127.0.0.1:{port}, admin: null}}\npools:\n  default:\n    instances: [{}]\ndefault_route: {{pool: default}}\n{rules}",
            up.addrs[0]
        );
        mcp_edge::config::Config::parse(&y, "gateway.yaml").unwrap()
    };
    let gw = RunningGateway::start(with(RULES)).unwrap();
    let bad = call_with(1, "run", r#"{"command":"a; b"}"#);
    refused_by(&send(&gw, None, "run", &bad), "no-shell");
    gw.reload(with("")).unwrap();
    assert_eq!(send(&gw, None, "run", &bad).status, 200, "the rule is gone");
    gw.reload(with(RULES)).unwrap();
    refused_by(&send(&gw, None, "run", &bad), "no-shell");
    assert_eq!(up.count(), 1);
}

#[test]
fn bad_rules_are_refused_at_load_with_the_key_and_the_fix() {
    let text = "pools:\n  p:\n    instances: [127.0.0.1:7001]\ndefault_route: {pool: p}\nargument_policy:\n  - name: x\n    deny: [{pointer: /a, pattern: '(unclosed'}]\n";
    let e = mcp_edge::config::Config::parse(text, "gateway.yaml").unwrap_err();
    let shown = e.to_string();
    assert!(shown.starts_with("gateway.yaml:7:"), "{shown}");
    assert!(
        shown.contains("argument_policy[0].deny[0].pattern")
            && shown.contains("regular expression"),
        "{shown}"
    );
}

/// `POST /-/explain` with `q` on the gateway's admin listener.
fn explain(gw: &RunningGateway, q: &Value) -> Value {
    let h = [("Content-Type", "application/json")];
    let r = request(
        gw.admin_addr.unwrap(),
        "POST",
        "/-/explain",
        &h,
        q.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}
