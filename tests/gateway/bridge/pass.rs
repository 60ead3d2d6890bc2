//! Pass-through with affinity (`pools.<name>.legacy_clients: pass`): 2025-era clients of a pool
//! whose servers serve both eras themselves (the TypeScript SDK v2 with a sessionful legacy
//! leg, `tests/peers/ts_dual_server.mjs`; the Python SDK 2.x with sessions, `py_server.py
//! sessions`), two instances each, balanced round robin. The official 2025-era clients list
//! and call, and answer the instance's own mid-call `elicitation/create`, through one gateway
//! and with their answers sent to a second replica; over raw sockets: the session id the client
//! sees is sealed (the instance's never shows), every follow-up reaches the instance that
//! opened the session, another caller's or an altered id is refused, an instance that is gone
//! costs the client a 404 and a new session on the other one, and the claims policy acts on are
//! the body's (a legacy request's `Mcp-Name` header is never read).

use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::net::SocketAddr;

use super::raw::{ACCEPT, JSON};
use super::{keys_file, Client};
use crate::peers::{installed, Peer, Sdk};
use crate::support::http::{call, first_text, post, request, Reply, SseStream};
use crate::support::{config, sample, scrape};

/// Two instances of `sdk`'s server of both eras.
fn dual_pool(sdk: Sdk) -> Vec<Peer> {
    vec![Peer::start_dual(sdk, "one"), Peer::start_dual(sdk, "two")]
}

/// A gateway passing 2025-era clients through to `peers`, with `extra` YAML.
fn gateway(peers: &[Peer], extra: &str) -> RunningGateway {
    let addrs: Vec<SocketAddr> = peers.iter().map(|p| p.addr).collect();
    let cfg = config(
        &[(
            "dual",
            &addrs,
            "balance: round_robin\n    legacy_clients: pass\n    health: {check: tcp}",
        )],
        &format!("default_route: {{pool: dual}}\n{extra}"),
    );
    RunningGateway::start(cfg).unwrap()
}

/// The tools each SDK's server offers, and the calls that make it ask mid-call.
fn calls(sdk: Sdk) -> (&'static str, &'static str) {
    match sdk {
        Sdk::TypeScript => ("whoami;confirm={\"what\":\"deploy\"}", "confirm"),
        Sdk::Python => (
            "greet={\"name\":\"x\",\"times\":1};order={\"item\":\"tea\"}",
            "order",
        ),
    }
}

fn assert_passed(sdk: Sdk, client: Client, out: &Value) {
    assert_eq!(out["ok"], true, "{sdk:?} via {client:?}: {out}");
    assert_eq!(out["sessionId"], "present", "{out}");
    assert_eq!(out["protocolVersion"], "2025-11-25", "{out}");
    let r = &out["results"];
    for (tool, v) in r.as_object().unwrap() {
        assert_eq!(v["isError"], false, "{sdk:?} {tool}: {v}");
    }
    let (_, asking) = calls(sdk);
    let asked: Vec<&str> = out["asked"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The instance's own question, on the call's stream, answered by the client's handler.
    assert_eq!(asked, ["elicitation/create"], "{sdk:?} {asking}: {out}");
    match sdk {
        Sdk::TypeScript => {
            // whoami and confirm ran on one instance: the session's.
            let who = r["whoami"]["text"].as_str().unwrap();
            let instance = who.split_whitespace().nth(1).unwrap();
            let done = r["confirm"]["text"].as_str().unwrap();
            assert_eq!(
                done,
                format!("deploy confirmed by Ada on {instance}"),
                "{out}"
            );
        }
        Sdk::Python => assert_eq!(r["order"]["text"], "ordered tea (Ada)", "{out}"),
    }
}

#[test]
fn the_v1_clients_use_servers_of_both_eras_through_the_gateway_and_across_replicas() {
    for sdk in [Sdk::TypeScript, Sdk::Python] {
        if !installed(sdk) {
            continue;
        }
        let peers = dual_pool(sdk);
        let keys = keys_file();
        let extra = format!("legacy: {{ keys_file: {} }}\n", keys.display());
        let (a, b) = (gateway(&peers, &extra), gateway(&peers, &extra));
        let url_a = format!("http://{}/mcp", a.mcp_addr);
        let url_b = format!("http://{}/mcp", b.mcp_addr);
        let (list, _) = calls(sdk);
        for client in [Client::TypeScriptV1, Client::PythonV1] {
            if !client.installed() {
                continue;
            }
            // Round robin would put every other request on the other instance: each session
            // completes only because its requests all reach the instance that opened it.
            for _ in 0..2 {
                let out = client.run(&url_a, list, None);
                assert_passed(sdk, client, &out);
            }
            // The client's answer goes to the other replica, which sends it to the instance.
            let out = client.run(&url_a, list, Some(&url_b));
            assert_passed(sdk, client, &out);
            if matches!(client, Client::TypeScriptV1) {
                assert_eq!(out["answersSentElsewhere"], 1, "{out}");
            }
        }
        let m = scrape(&a);
        for kind in ["initialize", "request", "notification", "answer"] {
            let n = sample(&m, "mcp_edge_legacy_passed_total", &["dual", kind]);
            assert!(n >= 1.0, "{sdk:?}: no {kind} passed: {m}");
        }
        // Nothing was bridged: the gateway opened no session of its own.
        assert_eq!(sample(&m, "mcp_edge_legacy_sessions_total", &[]), 0.0);
        let _ = std::fs::remove_dir_all(keys.parent().unwrap());
    }
}

fn headers(sid: Option<&str>) -> Vec<(&str, &str)> {
    let mut h = vec![JSON, ACCEPT, ("MCP-Protocol-Version", "2025-11-25")];
    if let Some(s) = sid {
        h.push(("Mcp-Session-Id", s));
    }
    h
}

fn initialize(gw: SocketAddr) -> (String, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "1"}}});
    let r = post(gw, &[JSON, ACCEPT], &body.to_string());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["serverInfo"]["name"], "ts-dual");
    let sid = r.header("mcp-session-id").expect("a session id").to_owned();
    let instance = r.header("x-mcp-edge-upstream").unwrap().to_owned();
    (sid, instance)
}

fn whoami(gw: SocketAddr, sid: &str, extra: &[(&str, &str)]) -> Reply {
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}}});
    let mut h = headers(Some(sid));
    h.extend_from_slice(extra);
    post(gw, &h, &call.to_string())
}

#[test]
fn a_pinned_session_is_sealed_kept_on_its_instance_and_reopened_when_the_instance_is_gone() {
    if !installed(Sdk::TypeScript) {
        return;
    }
    let mut peers = dual_pool(Sdk::TypeScript);
    let gw = gateway(&peers, "");
    let a = gw.mcp_addr;
    let (sid, instance) = initialize(a);
    assert!(sid.starts_with("ep1."), "{sid}");
    let mut upstream_sid = String::new();
    for _ in 0..4 {
        let r = whoami(a, &sid, &[]);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-mcp-edge-upstream"), Some(instance.as_str()));
        let text = r.result()["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        upstream_sid = text.rsplit(' ').next().unwrap().to_owned();
        assert!(
            upstream_sid.len() >= 32,
            "the instance's own session: {text}"
        );
    }
    assert!(
        !sid.contains(&upstream_sid),
        "the instance's session id never reaches the client"
    );

    // A 2026 client of the same pool is served as before, by the instances' 2026 handler.
    let modern = call(a, 3, "whoami", json!({}), json!({}), None, json!({}));
    assert_eq!(modern.status, 200, "{}", modern.text());
    assert_eq!(
        first_text(&modern.result()).rsplit(' ').next(),
        Some("none"),
        "no session on the 2026 leg: {}",
        modern.text()
    );

    // Another caller's, an altered and the instance's own session id are not found.
    let other = whoami(a, &sid, &[("Authorization", "Bearer mallory")]);
    assert_eq!((other.status, other.error_code()), (404, -31014));
    assert_eq!(other.json()["error"]["data"]["reason"], "other_caller");
    let mut altered = sid.clone().into_bytes();
    let i = altered.len() - 4;
    altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
    let r = whoami(a, &String::from_utf8(altered).unwrap(), &[]);
    assert_eq!((r.status, r.error_code()), (404, -31014), "{}", r.text());
    let r = whoami(a, &upstream_sid, &[]);
    assert_eq!(r.status, 404, "{}", r.text());

    // The session's instance goes away: 404, and a new session lands on the other one.
    let held = peers
        .iter()
        .position(|p| p.addr.to_string() == instance)
        .unwrap();
    peers[held].stop();
    let r = whoami(a, &sid, &[]);
    assert_eq!((r.status, r.error_code()), (404, -31014), "{}", r.text());
    assert_eq!(r.json()["error"]["data"]["reason"], "instance_gone");
    let (again, on) = initialize(a);
    assert_ne!(on, instance);
    let r = whoami(a, &again, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_legacy_passed_total", &["dual", "gone"]),
        1.0
    );

    // The console and explain say what happens to such a client, and to this session.
    let admin = gw.admin_addr.unwrap();
    let s = request(admin, "GET", "/-/console.json", &[], b"").json();
    let eras = &s["eras"];
    assert_eq!(eras["endpoints"][0]["legacy_clients"], "pass", "{eras}");
    assert_eq!(eras["pools"][0]["legacy_clients"], "pass", "{eras}");
    assert!(
        eras["legacy_clients"]["passed"]["request"]
            .as_f64()
            .unwrap()
            >= 5.0,
        "{eras}"
    );
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}}});
    let q = json!({"headers": {"Content-Type": "application/json", "Mcp-Session-Id": again,
        "MCP-Protocol-Version": "2025-11-25", "Mcp-Name": "not-what-the-body-says"},
        "body": call.to_string()});
    let h = [("Content-Type", "application/json")];
    let v = request(admin, "POST", "/-/explain", &h, q.to_string().as_bytes()).json();
    assert_eq!(v["verdict"], "passed", "{v}");
    assert_eq!(v["bridge"]["passes_to"], "dual", "{v}");
    assert_eq!(v["bridge"]["session"]["instance"], on.as_str(), "{v}");
    assert_eq!(v["bridge"]["claims"]["name"], "whoami", "{v}");
}

#[test]
fn policy_reads_a_passed_requests_body_never_its_claimed_headers() {
    if !installed(Sdk::TypeScript) {
        return;
    }
    let peers = dual_pool(Sdk::TypeScript);
    // One confirm a minute for everyone; whoami is not limited.
    let limits = "rate_limits:\n  - {name: confirm, match: {method: tools/call, name: confirm}, rate: 1/m}\n";
    let gw = gateway(&peers, limits);
    let a = gw.mcp_addr;
    let (sid, _) = initialize(a);
    let confirm = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "confirm", "arguments": {"what": "x"}}})
        .to_string()
    };
    // A body with 2026-07-28's claims (an instance of both eras could serve it as a 2026
    // request that never met the 2026 checks) is refused, whatever the headers.
    let mixed = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "whoami", "arguments": {}, "requestState": "forged",
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let r = post(a, &headers(Some(&sid)), &mixed.to_string());
    assert_eq!((r.status, r.error_code()), (400, -32600), "{}", r.text());
    assert_eq!(r.json()["id"], 9);

    // The headers claim whoami; the body calls confirm. The first call reaches the instance
    // (it asks: the answer is the instance's elicitation/create on the call's stream).
    let mut h = headers(Some(&sid));
    h.extend_from_slice(&[("Mcp-Method", "tools/call"), ("Mcp-Name", "whoami")]);
    let mut first = SseStream::open(a, &h, &confirm(2));
    assert_eq!(first.status, 200);
    let asked = first.next_message().expect("the instance's question");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    drop(first);
    // The second is counted as the confirm it is.
    let second = post(a, &h, &confirm(3));
    assert_eq!(second.status, 429, "{}", second.text());
    assert!(second.header("retry-after").is_some());
    assert_eq!(whoami(a, &sid, &[]).status, 200);
}

#[test]
fn a_passed_call_waits_for_its_clients_answer_past_the_upstream_read_timeout() {
    if !installed(Sdk::TypeScript) {
        return;
    }
    let peers = dual_pool(Sdk::TypeScript);
    let gw = gateway(&peers, "timeouts: {upstream_read: 1s}\n");
    let a = gw.mcp_addr;
    let (sid, instance) = initialize(a);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "confirm", "arguments": {"what": "release"}}});
    let h = headers(Some(&sid));
    let mut stream = SseStream::open(a, &h, &call.to_string());
    assert_eq!(stream.status, 200);
    let asked = stream.next_message().expect("the instance's question");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    // The person takes longer than upstream_read to answer: the call waits (legacy.answer_timeout).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"confirm": true, "name": "Grace"}}});
    let r = post(a, &h, &answer.to_string());
    assert_eq!(r.status, 202, "{}", r.text());
    let done = stream.next_message().expect("the call's result");
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        text,
        format!(
            "release confirmed by Grace on {}",
            name_of(&peers, &instance)
        ),
        "{done}"
    );
}

/// The instance name (`one`, `two`) of the peer at `addr`.
fn name_of(peers: &[Peer], addr: &str) -> &'static str {
    match peers.iter().position(|p| p.addr.to_string() == addr) {
        Some(0) => "one",
        Some(_) => "two",
        None => panic!("{addr} is not a peer"),
    }
}

#[test]
fn pingoras_pipe_carries_a_passed_session_too() {
    if !installed(Sdk::TypeScript) || !Client::TypeScriptV1.installed() {
        return;
    }
    let peers = dual_pool(Sdk::TypeScript);
    let gw = gateway(&peers, "connections: {upstream_leg: pingora}\n");
    let url = format!("http://{}/mcp", gw.mcp_addr);
    let (list, _) = calls(Sdk::TypeScript);
    let out = Client::TypeScriptV1.run(&url, list, None);
    assert_passed(Sdk::TypeScript, Client::TypeScriptV1, &out);
    // The pipe replays at most its retry buffer of a body read before it: a larger one is
    // refused whole, never sent cut short.
    let (sid, _) = initialize(gw.mcp_addr);
    let big = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "confirm", "arguments": {"what": "x".repeat(70_000)}}});
    let r = post(gw.mcp_addr, &headers(Some(&sid)), &big.to_string());
    assert_eq!((r.status, r.error_code()), (413, -32600), "{}", r.text());
    assert_eq!(r.json()["id"], 5);
}

/// With `auth` on, a passed-through session is bound to who the token stands for (a refreshed
/// token keeps it, another subject's never opens it), and a per-tool rule judges the tool the
/// body calls (the header claiming another is removed).
#[test]
fn with_auth_a_passed_session_is_the_subjects_and_rules_judge_the_body() {
    use crate::support::auth::testkeys::{self, *};
    use crate::support::auth::*;
    if !installed(Sdk::TypeScript) {
        return;
    }
    const RESOURCE: &str = "http://127.0.0.1/mcp";
    let k = ec("pass");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let rule = "  rules:\n    - { name: confirmers, match: { method: tools/call, name: confirm }, when: { scopes: [confirm] } }\n    - { name: no-confirm, match: { method: tools/call, name: confirm }, effect: deny }\n";
    let peers = dual_pool(Sdk::TypeScript);
    let gw = gateway(&peers, &auth_yaml(RESOURCE, &url_jwks(&jwks), rule));
    let a = gw.mcp_addr;
    let first = sign(&k, &claims(ISS, RESOURCE, "alice", "tools"));
    let mut later = claims(ISS, RESOURCE, "alice", "tools");
    later["iat"] = json!(now() + 60);
    later["exp"] = json!(now() + 7200);
    let refreshed = sign(&k, &later);
    let mallory = sign(&k, &claims(ISS, RESOURCE, "mallory", "tools"));
    let bearer = |t: &str| format!("Bearer {t}");

    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "1"}}});
    let alice = bearer(&first);
    let r = post(
        a,
        &[JSON, ACCEPT, ("Authorization", alice.as_str())],
        &body.to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let sid = r.header("mcp-session-id").unwrap().to_owned();

    let again = bearer(&refreshed);
    let r = whoami(a, &sid, &[("Authorization", again.as_str())]);
    assert_eq!(
        r.status,
        200,
        "the refreshed token lost the session: {}",
        r.text()
    );
    let theirs = bearer(&mallory);
    let r = whoami(a, &sid, &[("Authorization", theirs.as_str())]);
    assert_eq!((r.status, r.error_code()), (404, -31014), "{}", r.text());
    // Without a token it is no one's session: 404, and the client's new initialize meets auth.
    let r = whoami(a, &sid, &[]);
    assert_eq!((r.status, r.error_code()), (404, -31014), "{}", r.text());
    let r = post(a, &[JSON, ACCEPT], &body.to_string());
    assert_eq!(r.status, 401, "{}", r.text());

    // alice lacks the confirm scope: her confirm is refused though its headers claim whoami.
    let confirm = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "confirm", "arguments": {"what": "x"}}});
    let mut h = headers(Some(&sid));
    h.extend_from_slice(&[("Authorization", again.as_str()), ("Mcp-Name", "whoami")]);
    let r = post(a, &h, &confirm.to_string());
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r
        .header("www-authenticate")
        .is_some_and(|c| c.contains("insufficient_scope")));
}

/// The eras a config declares are checked against the instances when the gateway starts: the
/// console (and the log) name a pool whose servers do not speak what it says, with the fix.
#[test]
fn the_era_check_at_start_names_a_pool_that_does_not_speak_its_declared_era() {
    if !installed(Sdk::TypeScript) {
        return;
    }
    let dual = Peer::start_dual(Sdk::TypeScript, "one");
    // The TypeScript SDK v2's default handler serves 2025-era clients one request at a time.
    let stateless = Peer::start(Sdk::TypeScript, "stateless");
    let reference = super::backend();
    let pools = [
        ("dual", vec![dual.addr], "legacy_clients: pass"),
        ("stateless", vec![stateless.addr], "legacy_clients: pass"),
        ("wrong", reference.addrs().to_vec(), "era: 2025-11-25"),
    ];
    let pools: Vec<(&str, &[SocketAddr], &str)> = pools
        .iter()
        .map(|(n, a, e)| (*n, a.as_slice(), *e))
        .collect();
    let cfg = config(&pools, "default_route: {pool: dual}\n");
    let gw = RunningGateway::start(cfg).unwrap();
    let admin = gw.admin_addr.unwrap();
    let mut eras = Value::Null;
    let checked = crate::support::eventually(std::time::Duration::from_secs(20), || {
        eras = request(admin, "GET", "/-/console.json", &[], b"").json()["eras"].clone();
        eras["pools"]
            .as_array()
            .is_some_and(|p| p.iter().all(|p| p["checked"] == true))
    });
    assert!(checked, "{eras}");
    let found = |pool: &str| {
        let p = eras["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pool"] == pool);
        p.unwrap()["found"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(found("dual"), "", "{eras}");
    assert!(
        found("stateless").contains("keeps no 2025-era sessions"),
        "{eras}"
    );
    assert!(found("wrong").contains("remove `era:`"), "{eras}");
}
