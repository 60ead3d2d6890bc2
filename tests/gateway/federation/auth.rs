//! Auth through a federated endpoint: the merged lists are filtered per caller by the same rules
//! as calls (on the names clients see), such an answer is `private`, and a call the rules refuse
//! is refused whichever pool serves it.

use serde_json::{json, Value};
use std::time::Duration;

use super::scripted::discover;
use super::{gateway_with, names, wait_state};
use crate::support::auth::testkeys::{self, *};
use crate::support::auth::*;
use crate::support::scripted::{cacheable, Script, Scripted};

const RESOURCE: &str = "http://127.0.0.1/mcp";

fn server(tools: &'static [&'static str]) -> Scripted {
    Scripted::start(move |req: &Value| {
        let r = match req["method"].as_str().unwrap_or("") {
            "server/discover" => discover(json!({"tools": {}})),
            "tools/list" => {
                let t: Vec<Value> = tools
                    .iter()
                    .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                    .collect();
                cacheable(json!({ "tools": t }), json!(60_000), "public")
            }
            _ => json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]}),
        };
        Script::Result(r, Duration::ZERO)
    })
}

#[test]
fn each_caller_sees_and_calls_only_what_the_rules_allow() {
    let (a, b) = (server(&["greet", "pay"]), server(&["ship"]));
    let k = ec("fed");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let rules = "  rules:\n    - {name: ops-pay, match: {method: tools/call, name: a__pay}, when: {scopes: [ops]}}\n    - {name: no-pay, match: {method: tools/call, name: a__pay}, effect: deny}\n";
    let extra = auth_yaml(RESOURCE, &format!("{{url: {}}}", jwks.url()), rules);
    let gw = gateway_with(
        &[("a", &[a.addr]), ("b", &[b.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n",
        &extra,
    );
    wait_state(&gw, &["a", "b"], "fresh");
    let ops = sign(&k, &claims(ISS, RESOURCE, "olga", "ops"));
    let dev = sign(&k, &claims(ISS, RESOURCE, "dan", "read"));
    let list = |token: &str| {
        let auth = format!("Bearer {token}");
        crate::support::http::rpc(
            gw.mcp_addr,
            json!(1),
            "tools/list",
            json!({}),
            &[("Authorization", &auth)],
        )
    };
    let all = list(&ops);
    assert_eq!(
        names(&all, "tools", "name"),
        ["a__greet", "a__pay", "b__ship"]
    );
    let mine = list(&dev);
    assert_eq!(names(&mine, "tools", "name"), ["a__greet", "b__ship"]);
    assert_eq!(
        mine.result()["cacheScope"],
        "private",
        "filtered for one caller"
    );
    assert_eq!(
        all.result()["cacheScope"],
        "private",
        "filtered lists are per caller, even when nothing was removed"
    );
    let call = |token: &str| {
        crate::support::http::call(
            gw.mcp_addr,
            2,
            "a__pay",
            json!({}),
            json!({}),
            Some(token),
            json!({}),
        )
    };
    assert_eq!(call(&dev).status, 403);
    assert_eq!(a.count_method("tools/call"), 0);
    assert_eq!(call(&ops).result()["content"][0]["text"], "done");
    let unauthenticated =
        crate::support::http::rpc(gw.mcp_addr, json!(3), "tools/list", json!({}), &[]);
    assert_eq!(unauthenticated.status, 401);
}

#[test]
fn lists_fetched_for_a_caller_carry_what_a_forwarded_call_would() {
    // b's list is private: it is fetched for each answer, on the caller's behalf. The token may
    // go to a (its audience) only; b gets the identity header the gateway sets, never the token.
    let a = Scripted::start(|req: &Value| private_list(req, "greet"));
    let b = Scripted::start(|req: &Value| private_list(req, "ship"));
    let k = ec("fwd");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let fwd = "  forward:\n    token_to_pools: [a]\n    headers: {x-caller: principal}\n";
    let extra = auth_yaml(RESOURCE, &format!("{{url: {}}}", jwks.url()), fwd);
    let gw = gateway_with(
        &[("a", &[a.addr]), ("b", &[b.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n",
        &extra,
    );
    wait_state(&gw, &["a", "b"], "fresh");
    let token = sign(&k, &claims(ISS, RESOURCE, "olga", "read"));
    let auth = format!("Bearer {token}");
    // A client-sent identity header is not what the pools see either.
    let r = crate::support::http::rpc(
        gw.mcp_addr,
        json!(1),
        "tools/list",
        json!({}),
        &[("Authorization", &auth), ("X-Caller", "mallory")],
    );
    assert_eq!(names(&r, "tools", "name"), ["a__greet", "b__ship"]);
    let last = |s: &Scripted| s.headers_of("tools/list").pop().unwrap();
    let (ha, hb) = (last(&a), last(&b));
    assert_eq!(ha.get("authorization").unwrap(), auth.as_str());
    assert!(
        hb.get("authorization").is_none(),
        "the token never reaches a pool that is not its audience"
    );
    assert_eq!(hb.get("x-caller").unwrap(), "olga");
    assert_eq!(ha.get("x-caller").unwrap(), "olga");
}

fn private_list(req: &Value, tool: &str) -> Script {
    let r = match req["method"].as_str().unwrap_or("") {
        "server/discover" => discover(json!({"tools": {}})),
        "tools/list" => cacheable(
            json!({"tools": [{"name": tool, "inputSchema": {"type": "object"}}]}),
            json!(0),
            "private",
        ),
        _ => json!({"resultType": "complete", "content": []}),
    };
    Script::Result(r, Duration::ZERO)
}
