//! A caller's own view of the lists, through the gateway in front of the reference backend
//! (`mcp_edge::backend`): two callers with different scopes see different `tools/list` and
//! `prompts/list` results (ttlMs kept, cacheScope private when filtered), an oversized list is
//! withheld rather than sent unfiltered, and an MRTR flow completes with a verified token.

use crate::support::auth::testkeys::{self, *};
use crate::support::auth::*;
use crate::support::*;
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};

const RESOURCE: &str = "http://127.0.0.1/mcp";

const RULES: &str = r#"  rules:
    - {name: ops-deploy, match: {method: tools/call, name: deploy}, when: {scopes: [ops]}}
    - {name: ops-charge, match: {method: tools/call, name: charge*}, when: {scopes: [ops]}}
    - {name: ops-only-deploy, match: {method: tools/call, name: deploy}, effect: deny}
    - {name: ops-only-charge, match: {method: tools/call, name: charge*}, effect: deny}
    - {name: ops-image, match: {method: prompts/get, name: test_prompt_with_image}, when: {scopes: [ops]}}
    - {name: no-image, match: {method: prompts/get, name: test_prompt_with_image}, effect: deny}
"#;

fn start(pool: &Pool, extra_auth: &str) -> (RunningGateway, JwksServer, TestKey) {
    let k = ec("lists");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let cfg = config(
        &[("backend", pool.addrs(), "balance: round_robin")],
        &format!(
            "default_route: {{pool: backend}}\n{}",
            auth_yaml(
                RESOURCE,
                &format!("{{url: {}}}", jwks.url()),
                &format!("{RULES}{extra_auth}")
            )
        ),
    );
    (RunningGateway::start(cfg).unwrap(), jwks, k)
}

fn list(gw: &RunningGateway, method: &str, token: &str, id: u64) -> crate::support::http::Reply {
    let auth = format!("Bearer {token}");
    crate::support::http::rpc(
        gw.mcp_addr,
        json!(id),
        method,
        json!({}),
        &[("Authorization", &auth)],
    )
}

fn names(result: &Value, member: &str) -> Vec<String> {
    result[member]
        .as_array()
        .unwrap_or_else(|| panic!("no {member} in {result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn two_callers_with_different_scopes_see_different_lists() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let (gw, _jwks, k) = start(&pool, "");
    let ops = sign(&k, &claims(ISS, RESOURCE, "olga", "ops"));
    let dev = sign(&k, &claims(ISS, RESOURCE, "dan", "read"));

    let all = list(&gw, "tools/list", &ops, 1);
    assert_eq!(all.status, 200, "{}", all.text());
    let all_result = all.result();
    let mine = list(&gw, "tools/list", &dev, 2);
    assert_eq!(mine.status, 200, "{}", mine.text());
    assert_eq!(mine.json()["id"], 2);
    let mine_result = mine.result();

    let (all_names, my_names) = (names(&all_result, "tools"), names(&mine_result, "tools"));
    assert!(all_names.contains(&"deploy".to_string()) && all_names.contains(&"charge".to_string()));
    let hidden: Vec<_> = all_names.iter().filter(|n| !my_names.contains(n)).collect();
    assert_eq!(
        hidden,
        ["deploy", "charge", "charge_count"],
        "dev sees {my_names:?}"
    );
    assert_eq!(
        all_result["cacheScope"], "public",
        "nothing filtered for ops"
    );
    assert_eq!(mine_result["cacheScope"], "private");
    assert_eq!(mine_result["ttlMs"], all_result["ttlMs"], "ttlMs kept");
    assert!(mine_result["ttlMs"].as_u64().is_some());

    // A call of a hidden tool is refused; of a listed one it goes through.
    let auth = format!("Bearer {dev}");
    let r = crate::support::http::call(
        gw.mcp_addr,
        3,
        "deploy",
        json!({"service": "api"}),
        json!({}),
        None,
        json!({}),
    );
    assert_eq!(r.status, 401);
    let r = crate::support::http::rpc(
        gw.mcp_addr,
        json!(4),
        "tools/call",
        json!({"name": "deploy", "arguments": {}}),
        &[("Authorization", &auth)],
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["error"]["data"]["rule"], "ops-only-deploy");
    let r = crate::support::http::rpc(
        gw.mcp_addr,
        json!(5),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
        &[("Authorization", &auth)],
    );
    assert_eq!(r.status, 200, "{}", r.text());

    // prompts/list follows prompts/get.
    let p_all = names(&list(&gw, "prompts/list", &ops, 6).result(), "prompts");
    let p_mine = names(&list(&gw, "prompts/list", &dev, 7).result(), "prompts");
    assert!(p_all.contains(&"test_prompt_with_image".to_string()));
    assert!(!p_mine.contains(&"test_prompt_with_image".to_string()));
    assert_eq!(p_all.len(), p_mine.len() + 1);
}

#[test]
fn an_oversized_list_is_withheld_not_sent_unfiltered() {
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let (gw, _jwks, k) = start(&pool, "  list_filter: {max_bytes: 64}\n");
    let dev = sign(&k, &claims(ISS, RESOURCE, "dan", "read"));
    let r = list(&gw, "tools/list", &dev, 9);
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["id"], 9);
    assert_eq!(v["error"]["code"], -31011, "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("max_bytes = 64"));
    assert!(!r.text().contains("deploy"));
}

#[test]
fn an_mrtr_flow_completes_with_a_verified_token_and_the_state_stays_bound() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    // The backend binds requestState to the bearer token it sees: forward it to this pool,
    // which is the token's audience here.
    let (gw, _jwks, k) = start(&pool, "  forward: {token_to_pools: [backend]}\n");
    let alice = sign(&k, &claims(ISS, RESOURCE, "alice", "read"));
    let auth = format!("Bearer {alice}");
    let caps = json!({"elicitation": {}});
    let leg1 = crate::support::http::rpc(
        gw.mcp_addr,
        json!(1),
        "tools/call",
        json!({"name": "create_repo", "arguments": {"repo": "demo"}, "_meta": crate::support::http::meta(caps.clone())}),
        &[("Authorization", &auth)],
    );
    assert_eq!(leg1.status, 200, "{}", leg1.text());
    let r1 = leg1.result();
    assert_eq!(r1["resultType"], "input_required", "{r1}");
    let state = r1["requestState"].clone();
    let answers = json!({"github_login": {"action": "accept", "content": {"name": "octocat"}}});
    let leg2 = |token: &str, id: i64| {
        let auth = format!("Bearer {token}");
        crate::support::http::rpc(
            gw.mcp_addr,
            json!(id),
            "tools/call",
            json!({"name": "create_repo", "arguments": {"repo": "demo"}, "inputResponses": answers, "requestState": state, "_meta": crate::support::http::meta(caps.clone())}),
            &[("Authorization", &auth)],
        )
    };
    // Another verified user cannot finish alice's flow.
    let bob = sign(&k, &claims(ISS, RESOURCE, "bob", "read"));
    assert_eq!(leg2(&bob, 2).code(), Some(-32602));
    let done = leg2(&alice, 3);
    assert_eq!(done.status, 200, "{}", done.text());
    assert!(
        crate::support::http::first_text(&done.result()).contains("octocat/demo"),
        "{}",
        done.text()
    );
}

#[test]
fn route_scopes_hide_the_tools_of_that_route_too() {
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let k = ed("routes");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let cfg = config(
        &[("backend", pool.addrs(), "balance: round_robin")],
        &format!(
            "routes:\n  - {{name: billing, match: {{method: tools/call, name: \"charge*\"}}, pool: backend, auth: {{scopes: [billing]}}}}\ndefault_route: {{pool: backend}}\n{}",
            auth_yaml(RESOURCE, &format!("{{url: {}}}", jwks.url()), "")
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let billing = sign(&k, &claims(ISS, RESOURCE, "bill", "billing"));
    let other = sign(&k, &claims(ISS, RESOURCE, "otto", ""));
    let all = names(&list(&gw, "tools/list", &billing, 1).result(), "tools");
    let mine = names(&list(&gw, "tools/list", &other, 2).result(), "tools");
    let hidden: Vec<_> = all.iter().filter(|n| !mine.contains(n)).collect();
    assert_eq!(hidden, ["charge", "charge_count"]);
    let auth = format!("Bearer {other}");
    let r = crate::support::http::rpc(
        gw.mcp_addr,
        json!(3),
        "tools/call",
        json!({"name": "charge_count", "arguments": {}}),
        &[("Authorization", &auth)],
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains(r#"scope="billing""#));
}
