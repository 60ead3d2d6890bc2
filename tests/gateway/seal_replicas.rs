//! Sealed `requestState` across gateway replicas, over real loopback sockets: one-time use
//! recorded in a real `redis-server` (`one_time: global`) refuses a replay through another
//! replica, where `local` cannot see it (so the test can fail); each `on_store_error` policy
//! when Redis is gone; explain saying whether a state would be accepted and why not; and the
//! official TypeScript SDK v2 client completing MRTR flows whose retries go to a second replica
//! that rotated its keys. The server protects nothing (`support::naive_mrtr`) or is the SDK's
//! own (tests/peers); and a federated endpoint sealing under the prefixed name.

use super::seal::{ask, gateway_with, key_file, refused, retry, KEY_A, KEY_B};
use crate::support::http::{call, first_text, good_headers, request};
use crate::support::limits::Redis;
use crate::support::naive_mrtr::NaiveMrtr;
use crate::support::*;
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::time::Duration;

/// A sealing gateway whose one-time record is `one_time` (and `policy` on a Redis failure).
fn replica(
    server: &NaiveMrtr,
    keys: &std::path::Path,
    one_time: &str,
    policy: Option<&str>,
    redis: &Redis,
) -> RunningGateway {
    let policy = policy.map_or(String::new(), |p| format!(", on_store_error: {p}"));
    let seal = format!(
        "{{key_file: {}, one_time: {one_time}{policy}}}",
        keys.display()
    );
    let extra = format!(
        "redis: {{url: '{}', timeout: 300ms, connect_timeout: 300ms}}\n",
        redis.url()
    );
    gateway_with(server, Some(&seal), &extra)
}

#[test]
fn one_time_global_refuses_a_replay_through_another_replica_where_local_cannot_see_it() {
    let Some(redis) = Redis::start() else { return };
    let server = NaiveMrtr::start();
    let keys = key_file("global", &[KEY_A]);
    let (a, b) = (
        replica(&server, &keys, "global", None, &redis),
        replica(&server, &keys, "global", None, &redis),
    );
    let state = ask(&a, "deploy", "staging", "alice");
    let v = retry(&b, "deploy", "staging", "alice", &state);
    assert_eq!(first_text(&v["result"]), "deploy: staging", "{v}");
    let n = server.calls();
    for gw in [&a, &b] {
        refused(
            &retry(gw, "deploy", "staging", "alice", &state),
            "already used",
            &server,
            n,
        );
    }
    let m = scrape(&a);
    assert!(
        m.contains(r#"mcp_edge_mrtr_state_refusals_total{pool="naive",reason="state-used"} 1"#),
        "{m}"
    );

    // The same replay between two replicas that each keep their own record goes through.
    let (c, d) = (
        replica(&server, &keys, "local", None, &redis),
        replica(&server, &keys, "local", None, &redis),
    );
    let state = ask(&c, "deploy", "staging", "alice");
    let v = retry(&c, "deploy", "staging", "alice", &state);
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    let v = retry(&d, "deploy", "staging", "alice", &state);
    assert_eq!(v["result"]["resultType"], "complete", "local: {v}");
    std::fs::remove_file(keys).unwrap();
}

/// A retry of `deploy staging` as alice with `state`, whatever its status.
fn retry_raw(gw: &RunningGateway, state: &str) -> (u16, Option<String>, Value) {
    let answers = json!({"confirm": {"action": "accept", "content": {}}});
    let extra = json!({"inputResponses": answers, "requestState": state});
    let caps = json!({"elicitation": {}});
    let r = call(
        gw.mcp_addr,
        2,
        "deploy",
        json!({"env": "staging"}),
        caps,
        Some("alice"),
        extra,
    );
    let after = r.header("retry-after").map(str::to_string);
    (r.status, after, r.json())
}

#[test]
fn when_redis_cannot_answer_each_policy_does_what_it_says() {
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let server = NaiveMrtr::start();
    let keys = key_file("policies", &[KEY_A]);
    let deny = replica(&server, &keys, "global", Some("deny"), &redis);
    let local = replica(&server, &keys, "global", Some("local"), &redis);
    let allow = replica(&server, &keys, "global", Some("allow"), &redis);
    let states: Vec<String> = [&deny, &local, &allow]
        .iter()
        .map(|gw| ask(gw, "deploy", "staging", "alice"))
        .collect();
    redis.kill();

    // deny: 503 + Retry-After + -31019, the server not reached, the state not spent.
    let n = server.calls();
    let (status, after, v) = retry_raw(&deny, &states[0]);
    assert_eq!((status, after.as_deref()), (503, Some("1")), "{v}");
    assert_eq!(v["error"]["code"], -31019, "{v}");
    assert_eq!(server.calls(), n);
    // local: this replica's record decides (once), allow: forwarded unchecked (twice).
    let (status, _, v) = retry_raw(&local, &states[1]);
    assert_eq!(
        (status, &v["result"]["resultType"]),
        (200, &json!("complete"))
    );
    let n = server.calls();
    refused(
        &retry(&local, "deploy", "staging", "alice", &states[1]),
        "already used",
        &server,
        n,
    );
    for _ in 0..2 {
        let (status, _, v) = retry_raw(&allow, &states[2]);
        assert_eq!(
            (status, &v["result"]["resultType"]),
            (200, &json!("complete"))
        );
    }
    let m = scrape(&deny);
    assert!(
        m.contains(
            r#"mcp_edge_limit_store_fallbacks_total{limit="mrtr.seal:naive",policy="deny"} 1"#
        ),
        "{m}"
    );

    // Redis back: the state `deny` did not spend completes (once the circuit lets a probe by).
    redis.restart();
    let done = eventually(Duration::from_secs(15), || {
        let (status, _, v) = retry_raw(&deny, &states[0]);
        status == 200 && v["result"]["resultType"] == "complete"
    });
    assert!(
        done,
        "the unspent state never completed after Redis came back"
    );
    std::fs::remove_file(keys).unwrap();
}

/// `POST /-/explain` of alice's (or `user`'s) retry of `deploy {env}` with `state`: the seal step.
fn explain_seal(gw: &RunningGateway, user: &str, env: &str, state: &str) -> Value {
    let mut headers: serde_json::Map<String, Value> = good_headers("tools/call", Some("deploy"))
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    headers.insert("Authorization".into(), json!(format!("Bearer {user}")));
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "deploy", "arguments": {"env": env}, "requestState": state,
        "inputResponses": {"confirm": {"action": "accept", "content": {}}},
        "_meta": crate::support::http::meta(json!({"elicitation": {}}))}});
    let q = json!({"headers": headers, "body": body.to_string()});
    let h = [("Content-Type", "application/json")];
    let admin = gw.admin_addr.unwrap();
    let r = request(admin, "POST", "/-/explain", &h, q.to_string().as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let steps = v["steps"].as_array().unwrap();
    steps
        .iter()
        .find(|s| s["step"] == "seal")
        .unwrap_or_else(|| panic!("no seal step: {v}"))
        .clone()
}

#[test]
fn explain_says_whether_a_state_would_be_accepted_and_why_not() {
    let server = NaiveMrtr::start();
    let keys = key_file("explain", &[KEY_A]);
    let seal = format!("{{key_file: {}, one_time: local}}", keys.display());
    let gw = gateway_with(&server, Some(&seal), "");
    let state = ask(&gw, "deploy", "staging", "alice");
    let n = server.calls();

    let s = explain_seal(&gw, "alice", "staging", &state);
    assert_eq!(s["outcome"], "pass", "{s}");
    assert_eq!(s["detail"]["state"], "accepted", "{s}");
    for (user, env, reason) in [
        ("mallory", "staging", "state-other-caller"),
        ("alice", "production", "state-other-arguments"),
    ] {
        let s = explain_seal(&gw, user, env, &state);
        assert_eq!(s["outcome"], "refuse", "{s}");
        assert_eq!(s["detail"]["reason"], reason, "{s}");
    }
    // Explain spent nothing: the retry completes; then explain says it was used.
    assert_eq!(server.calls(), n);
    let v = retry(&gw, "deploy", "staging", "alice", &state);
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    let s = explain_seal(&gw, "alice", "staging", &state);
    assert_eq!(s["detail"]["reason"], "state-used", "{s}");
    std::fs::remove_file(keys).unwrap();
}

#[test]
fn the_official_ts_client_completes_flows_through_two_sealing_replicas_mid_rotation() {
    use crate::peers::{Peer, Sdk};
    if !crate::peers::installed(Sdk::TypeScript) {
        return;
    }
    let fleet = Peer::fleet(Sdk::TypeScript, 2);
    let addrs: Vec<_> = fleet.iter().map(|p| p.addr).collect();
    // Replica one seals with KEY_A; replica two already rotated: KEY_B on top, KEY_A below.
    let old = key_file("sdk-old", &[KEY_A]);
    let rotated = key_file("sdk-rotated", &[KEY_B, KEY_A]);
    let start = |keys: &std::path::Path| {
        let pool = format!(
            "balance: round_robin\n    mrtr:\n      seal: {{key_file: {}, one_time: local}}",
            keys.display()
        );
        let cfg = config(&[("sdk", &addrs, &pool)], "default_route: {pool: sdk}\n");
        RunningGateway::start(cfg).unwrap()
    };
    let (one, two) = (start(&old), start(&rotated));
    let calls = r#"book={"room":"blue-1"}"#;
    let url = |gw: &RunningGateway| format!("http://{}/mcp", gw.mcp_addr);
    let Some(out) = super::bridge::modern_client(&url(&one), calls, Some(&url(&two))) else {
        return;
    };
    assert_eq!(out["ok"], true, "{out}");
    let text = out["results"]["book"]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("booked blue-1 for Ada"), "{out}");
    assert_eq!(out["retriesElsewhere"], 1, "{out}");
    let m1 = scrape(&one);
    let m2 = scrape(&two);
    assert!(
        m1.contains(r#"mcp_edge_mrtr_states_sealed_total{pool="sdk"}"#),
        "replica one sealed nothing: {m1}"
    );
    assert!(
        m2.contains(r#"mcp_edge_mrtr_states_opened_total{pool="sdk"}"#),
        "replica two opened nothing: {m2}"
    );
    assert!(
        !m2.contains("mcp_edge_mrtr_state_refusals_total"),
        "a retry was refused: {m2}"
    );
    for f in [old, rotated] {
        std::fs::remove_file(f).unwrap();
    }
}

#[test]
fn a_federated_endpoint_seals_and_opens_states_under_the_prefixed_name() {
    let server = NaiveMrtr::start();
    let keys = key_file("federated", &[KEY_A]);
    let pool = format!(
        "balance: round_robin\n    mrtr:\n      seal: {{key_file: {}}}",
        keys.display()
    );
    let cfg = config(
        &[("naive", &[server.addr], &pool)],
        "federation:\n  endpoints:\n    - {path: /mcp, pools: [naive]}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    super::federation::wait_state(&gw, &["naive"], "fresh");
    let state = ask(&gw, "naive__deploy", "staging", "alice");
    assert!(state.starts_with("ers1."), "{state}");
    let n = server.calls();
    refused(
        &retry(&gw, "naive__undeploy", "staging", "alice", &state),
        "another method or name",
        &server,
        n,
    );
    let v = retry(&gw, "naive__deploy", "staging", "alice", &state);
    assert_eq!(first_text(&v["result"]), "deploy: staging", "{v}");
    assert_eq!(
        server.states(),
        [crate::support::naive_mrtr::naive_state("staging")]
    );
    std::fs::remove_file(keys).unwrap();
}
