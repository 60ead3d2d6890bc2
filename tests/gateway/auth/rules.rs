//! Who may call what, over real loopback sockets: rate limits keyed on the verified principal
//! (inventing tokens does not help) and on a claim, per-tool allow/deny rules with the verified
//! subject passed upstream, a spoofed `Mcp-Name` refused before any upstream sees it complete,
//! rules reloading with the config, and an open route that cannot be claimed for a guarded call.

use crate::support::auth::testkeys::{self, *};
use crate::support::auth::*;
use crate::support::*;
use serde_json::json;

const RESOURCE: &str = "https://mcp.test/mcp";
const MD: &str = "https://mcp.test/.well-known/oauth-protected-resource/mcp";

#[test]
fn principal_limits_cannot_be_escaped_by_inventing_tokens_and_claim_limits_work() {
    let k = ec("lim");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let up = Upstreams::start(1);
    let limits = "rate_limits:\n  - {name: per-caller, match: {name: echo}, key: [principal], rate: 1/h, burst: 2}\n  - {name: per-tenant, match: {name: deploy}, key: [claim:tenant], rate: 1/h, burst: 2}\n";
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        &format!(
            "default_route: {{pool: default}}\n{limits}{}",
            auth_yaml(RESOURCE, &url_jwks(&jwks), "")
        ),
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();

    // Two different tokens of one subject share alice's bucket.
    let t1 = sign(&k, &claims(ISS, RESOURCE, "alice", ""));
    let mut c2 = claims(ISS, RESOURCE, "alice", "");
    c2["jti"] = json!("another-token");
    let t2 = sign(&k, &c2);
    assert_eq!(
        call_as(&gw, "/mcp", Some(&t1), "echo", "echo", 1).status,
        200
    );
    assert_eq!(
        call_as(&gw, "/mcp", Some(&t2), "echo", "echo", 2).status,
        200
    );
    let r = call_as(&gw, "/mcp", Some(&t1), "echo", "echo", 3);
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(
        call_as(&gw, "/mcp", Some(&t2), "echo", "echo", 4).status,
        429
    );
    // Invented tokens are not new callers: they are not callers at all.
    for i in 0..5 {
        let r = call_as(
            &gw,
            "/mcp",
            Some(&format!("alice-{i}")),
            "echo",
            "echo",
            10 + i,
        );
        assert_eq!(r.status, 401);
    }
    // Bob is another subject with his own bucket.
    assert_eq!(
        call_as(
            &gw,
            "/mcp",
            Some(&sign(&k, &claims(ISS, RESOURCE, "bob", ""))),
            "echo",
            "echo",
            20
        )
        .status,
        200
    );

    // Per tenant: carol and dave of acme share one bucket; erin of globex has her own.
    let of = |sub: &str, tenant: &str| {
        let mut c = claims(ISS, RESOURCE, sub, "");
        c["tenant"] = json!(tenant);
        sign(&k, &c)
    };
    assert_eq!(
        call_as(
            &gw,
            "/mcp",
            Some(&of("carol", "acme")),
            "deploy",
            "deploy",
            30
        )
        .status,
        200
    );
    assert_eq!(
        call_as(
            &gw,
            "/mcp",
            Some(&of("dave", "acme")),
            "deploy",
            "deploy",
            31
        )
        .status,
        200
    );
    assert_eq!(
        call_as(
            &gw,
            "/mcp",
            Some(&of("carol", "acme")),
            "deploy",
            "deploy",
            32
        )
        .status,
        429
    );
    assert_eq!(
        call_as(
            &gw,
            "/mcp",
            Some(&of("erin", "globex")),
            "deploy",
            "deploy",
            33
        )
        .status,
        200
    );
}

const RULES: &str = "  rules:\n    - {name: deploy-writers, match: {method: tools/call, name: deploy*}, when: {scopes: [deploy:write]}}\n    - {name: sre-group, match: {method: tools/call, name: deploy*}, when: {claims: {groups: sre}}}\n    - {name: no-deploys, match: {method: tools/call, name: deploy*}, effect: deny}\n  forward:\n    headers: {x-mcp-edge-subject: principal}\n";

#[test]
fn rules_allow_and_deny_per_tool_and_a_spoofed_name_is_refused_before_the_upstream() {
    let k = rsa("rules");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let up = Upstreams::start(1);
    // Sampling off on the default route: rules force the body check anyway.
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        &format!(
            "default_route: {{pool: default}}\nvalidation: {{sample: 0.0}}\n{}",
            auth_yaml(RESOURCE, &url_jwks(&jwks), RULES)
        ),
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let plain = sign(&k, &claims(ISS, RESOURCE, "pat", "mcp"));
    let writer = sign(&k, &claims(ISS, RESOURCE, "wes", "mcp deploy:write"));
    let mut sre = claims(ISS, RESOURCE, "sam", "mcp");
    sre["groups"] = json!(["dev", "sre"]);
    let sre = sign(&k, &sre);

    let r = call_as(&gw, "/mcp", Some(&plain), "deploy", "deploy", 1);
    let msg = r#"Rule no-deploys of auth.rules denies tools/call deploy to this caller"#;
    expect_refusal(
        &r,
        403,
        -31009,
        1,
        &format!(
            r#"Bearer error="insufficient_scope", error_description="{msg}", scope="deploy:write", resource_metadata="{MD}""#
        ),
    );
    assert_eq!(r.json()["error"]["data"]["rule"], "no-deploys");
    assert_eq!(up.count(), 0);
    assert_eq!(
        call_as(&gw, "/mcp", Some(&plain), "echo", "echo", 2).status,
        200
    );
    assert_eq!(
        call_as(&gw, "/mcp", Some(&writer), "deploy", "deploy", 3).status,
        200
    );
    assert_eq!(
        call_as(&gw, "/mcp", Some(&sre), "deploy", "deploy", 4).status,
        200
    );
    let seen: Vec<_> = up
        .received()
        .iter()
        .map(|r| {
            r.headers
                .get("x-mcp-edge-subject")
                .unwrap()
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        seen,
        ["pat", "wes", "sam"],
        "the verified subject goes upstream"
    );

    // Spoofed: claims echo (allowed) while the body names deploy (denied).
    let before = up.count();
    let r = call_as(&gw, "/mcp", Some(&plain), "echo", "deploy", 5);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -32020);
    assert_eq!(r.json()["id"], 5);
    assert_eq!(
        up.count(),
        before,
        "the upstream saw the spoofed request complete"
    );

    // A client-sent identity header never reaches the upstream as sent.
    let mut h = call_headers("echo");
    h.push(("Authorization", format!("Bearer {plain}")));
    h.push(("x-mcp-edge-subject", "root".into()));
    let r = crate::support::http::request(
        gw.mcp_addr,
        "POST",
        "/mcp",
        &refs(&h),
        call(6, "echo").as_bytes(),
    );
    assert_eq!(r.status, 200);
    let last = up.received().pop().unwrap();
    let subj: Vec<_> = last.headers.get_all("x-mcp-edge-subject").iter().collect();
    assert_eq!(subj, ["pat"]);

    // Rules reload with the config: without them, the plain caller may deploy.
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        &format!(
            "default_route: {{pool: default}}\n{}",
            auth_yaml(RESOURCE, &url_jwks(&jwks), "")
        ),
    );
    gw.reload(cfg).unwrap();
    assert_eq!(
        call_as(&gw, "/mcp", Some(&plain), "deploy", "deploy", 7).status,
        200
    );

    let m = crate::support::http::raw(
        gw.admin_addr.unwrap(),
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .text();
    assert!(m.contains(r#"mcp_edge_auth_decisions_total{reason="rule_denied",result="forbidden",rule="no-deploys"} 1"#), "{m}");
    assert!(
        m.contains(
            r#"mcp_edge_auth_decisions_total{reason="ok",result="allowed",rule="deploy-writers"} 1"#
        ),
        "{m}"
    );
    assert!(m.contains("mcp_edge_auth_jwks_age_seconds"), "{m}");
    assert!(
        m.contains("mcp_edge_auth_jwks_refresh_failures_total 0"),
        "{m}"
    );
}

#[test]
fn an_open_route_cannot_be_claimed_to_smuggle_a_guarded_call() {
    let k = ec("open");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let up = Upstreams::start(1);
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        &format!(
            "routes:\n  - {{match: {{method: server/discover}}, pool: default, auth: {{required: false}}}}\ndefault_route: {{pool: default}}\nvalidation: {{sample: 0.0}}\n{}",
            auth_yaml(RESOURCE, &url_jwks(&jwks), "")
        ),
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    // The open route works without a token ...
    let h = plain_headers("server/discover");
    let r = crate::support::http::request(
        gw.mcp_addr,
        "POST",
        "/mcp",
        &h,
        plain(1, "server/discover").as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // ... but claiming it for a tools/call body is refused, sampling or not.
    let r = crate::support::http::request(
        gw.mcp_addr,
        "POST",
        "/mcp",
        &h,
        call(2, "deploy").as_bytes(),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -32020);
    assert_eq!(up.count(), 1, "the smuggled call reached the upstream");
}
