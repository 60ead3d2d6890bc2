//! MRTR keeps working behind a token-exchange pool: the retry leg carries a fresh exchanged
//! token (the caller's edge token was renewed between the legs), and the reference backend,
//! binding `requestState` to the verified subject (`--principal-header`, set by the gateway from
//! `auth.forward.headers`), completes it on whichever instance gets it; another caller replaying the state
//! is refused. Against node-oidc-provider on loopback (`tests/oidc/`).

use crate::support::http::{call, first_text};
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;
use serde_json::json;

const EDGE: &str = "https://edge.test/mcp";
const TOOLS: &str = "https://tools.internal/mcp";
const TE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

#[test]
fn a_retry_leg_with_a_fresh_exchanged_token_completes_bound_to_the_subject() {
    let resources = json!({
        EDGE: {"scope": "mcp tools:read", "ttl": 300},
        TOOLS: {"scope": "tools:read", "ttl": 60},
    });
    let c = |id: &str, secret: &str, grants: &[&str]| json!({"client_id": id, "client_secret": secret, "grant_types": grants, "redirect_uris": [], "response_types": []});
    let clients = json!([
        c("gw", "gw-secret-mrtr-1", &["client_credentials", TE]),
        c("alice", "alice-secret-1", &["client_credentials"]),
        c("bob", "bob-secret-2", &["client_credentials"]),
    ]);
    let Some(a) = crate::oidc::AuthServer::start(EDGE, &resources, &clients) else {
        return;
    };
    let backends = Pool::start(PoolOptions {
        principal_header: Some("x-mcp-edge-subject".into()),
        ..PoolOptions::local(2)
    })
    .unwrap();
    let secret = std::env::temp_dir().join(format!("mcp-edge-mrtr-{}", std::process::id()));
    std::fs::write(&secret, "gw-secret-mrtr-1").unwrap();
    let list: Vec<String> = backends.addrs().iter().map(|a| a.to_string()).collect();
    let y = format!(
        "work_stealing: true\nlisten: {{mcp: 127.0.0.1:{}, admin: 127.0.0.1:{}}}\nauth:\n  resource: {EDGE}\n  issuer: {}\n  jwks: {{url: {}}}\n  forward: {{headers: {{x-mcp-edge-subject: principal}}}}\npools:\n  tools:\n    instances: [{}]\n    health: {{check: off}}\n    credentials:\n      token_exchange: {{ token_url: {}, client_id: gw, client_secret: {{file: {}}}, resource: {TOOLS}, scopes: [tools:read] }}\ndefault_route: {{pool: tools}}\n",
        crate::support::free_port(),
        crate::support::free_port(),
        a.issuer(),
        a.jwks_url(),
        list.join(", "),
        a.token_url(),
        secret.display()
    );
    let gw = RunningGateway::start(Config::parse(&y, "mrtr.yaml").unwrap()).unwrap();
    let token = |who: &str, s: &str| a.client_token(who, s, EDGE, "mcp tools:read");
    let repo = json!({"repo": "demo"});
    let caps = json!({"elicitation": {}});

    let alice1 = token("alice", "alice-secret-1");
    let r1 = call(
        gw.mcp_addr,
        1,
        "create_repo",
        repo.clone(),
        caps.clone(),
        Some(&alice1),
        json!({}),
    );
    let r1 = r1.result();
    assert_eq!(r1["resultType"], "input_required", "{r1}");
    let state = r1["requestState"].clone();
    let answer = json!({"inputResponses": {"github_login": {"action": "accept", "content": {"name": "octocat"}}}, "requestState": state});

    // Another caller replaying alice's state is refused (the state is bound to alice's subject).
    let bob = token("bob", "bob-secret-2");
    let stolen = call(
        gw.mcp_addr,
        2,
        "create_repo",
        repo.clone(),
        caps.clone(),
        Some(&bob),
        answer.clone(),
    );
    assert_eq!(stolen.code(), Some(-32602), "{}", stolen.text());

    // Alice's edge token renewed between the legs: a new exchange, a fresh upstream token.
    let alice2 = token("alice", "alice-secret-1");
    assert_ne!(alice1, alice2);
    let r2 = call(
        gw.mcp_addr,
        3,
        "create_repo",
        repo,
        caps,
        Some(&alice2),
        answer,
    )
    .result();
    assert_eq!(r2["resultType"], "complete", "{r2}");
    assert_eq!(first_text(&r2), "Created github.com/octocat/demo");
    assert_eq!(
        a.issued(TE, "gw"),
        3,
        "alice twice (two edge tokens), bob once"
    );
    let _ = std::fs::remove_file(secret);
}
