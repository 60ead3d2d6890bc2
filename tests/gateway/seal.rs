//! `requestState` sealed at the edge (`pools.<name>.mrtr.seal`), over real loopback sockets, in
//! front of a server that protects nothing (`support::naive_mrtr`): the revision's attacks
//! (a tampered state, another caller's, other arguments, another tool, an expired one) and a
//! replay after completion are refused before the server, which counts its calls; the same
//! server behind a gateway without sealing is fooled by each (so these tests can fail).

use crate::support::http::{call, first_text};
use crate::support::naive_mrtr::{naive_state, NaiveMrtr};
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

/// A key file with one key (and the old one below it when given): its path.
pub(super) fn key_file(tag: &str, lines: &[&str]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-edge-seal-{}-{tag}", std::process::id()));
    std::fs::write(&dir, lines.join("\n")).unwrap();
    dir
}

pub(super) const KEY_A: &str = "0101010101010101010101010101010101010101010101010101010101010101";
pub(super) const KEY_B: &str = "0202020202020202020202020202020202020202020202020202020202020202";

fn gateway(server: &NaiveMrtr, seal: Option<&str>) -> mcp_edge::gateway::RunningGateway {
    gateway_with(server, seal, "")
}

/// A gateway in front of `server`, sealing with `seal` when given; `extra`: more top-level
/// config (e.g. `redis:`).
pub(super) fn gateway_with(
    server: &NaiveMrtr,
    seal: Option<&str>,
    extra: &str,
) -> mcp_edge::gateway::RunningGateway {
    let pool = match seal {
        Some(s) => format!("balance: round_robin\n    mrtr:\n      seal: {s}"),
        None => "balance: round_robin".to_string(),
    };
    let addrs = [server.addr];
    let cfg = config(
        &[("naive", &addrs, &pool)],
        &format!("default_route: {{pool: naive}}\nflows: {{enabled: true}}\n{extra}"),
    );
    mcp_edge::gateway::RunningGateway::start(cfg).unwrap()
}

/// Round one of `tool {env}` as `user`: the state the client got.
pub(super) fn ask(
    gw: &mcp_edge::gateway::RunningGateway,
    tool: &str,
    env: &str,
    user: &str,
) -> String {
    let r = call(
        gw.mcp_addr,
        1,
        tool,
        json!({"env": env}),
        json!({"elicitation": {}}),
        Some(user),
        json!({}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // Rewritten whole and sent with its new length, not chunked.
    let length = r
        .header("content-length")
        .map(|l| l.parse::<usize>().unwrap());
    assert_eq!(length, Some(r.body.len()), "{:?}", r.headers);
    assert!(r.header("transfer-encoding").is_none());
    let v = r.json();
    assert_eq!(v["result"]["resultType"], "input_required", "{v}");
    v["result"]["requestState"].as_str().unwrap().to_string()
}

/// The retry of `tool {env}` as `user` with `state`: the JSON-RPC response.
pub(super) fn retry(
    gw: &mcp_edge::gateway::RunningGateway,
    tool: &str,
    env: &str,
    user: &str,
    state: &str,
) -> Value {
    let answers = json!({"confirm": {"action": "accept", "content": {}}});
    let extra = json!({"inputResponses": answers, "requestState": state});
    let r = call(
        gw.mcp_addr,
        2,
        tool,
        json!({"env": env}),
        json!({"elicitation": {}}),
        Some(user),
        extra,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// A refusal at the edge: -32602 with a message saying `why`, and the server not reached.
pub(super) fn refused(v: &Value, why: &str, server: &NaiveMrtr, calls_before: usize) {
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(why), "{msg:?} does not say {why:?}");
    assert_eq!(
        server.calls(),
        calls_before,
        "a refused retry reached the server"
    );
}

#[test]
fn the_revisions_attacks_are_refused_at_the_edge_and_never_reach_the_server() {
    let server = NaiveMrtr::start();
    let keys = key_file("attacks", &[KEY_A]);
    let seal = format!("{{key_file: {}, ttl: 2s, one_time: local}}", keys.display());
    let gw = gateway(&server, Some(&seal));

    let state = ask(&gw, "deploy", "staging", "alice");
    assert!(
        state.starts_with("ers1."),
        "the client got the server's state: {state}"
    );
    assert_ne!(state, naive_state("staging"));
    let n = server.calls();

    // Tampered: one character of the envelope changed; or the naive state forged outright.
    let mut b = state.clone().into_bytes();
    let i = b.len() - 6;
    b[i] = if b[i] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(b).unwrap();
    refused(
        &retry(&gw, "deploy", "staging", "alice", &tampered),
        "integrity",
        &server,
        n,
    );
    let forged = naive_state("production");
    refused(
        &retry(&gw, "deploy", "staging", "alice", &forged),
        "not one this gateway issued",
        &server,
        n,
    );
    // Another caller, other arguments, another tool.
    refused(
        &retry(&gw, "deploy", "staging", "mallory", &state),
        "another caller",
        &server,
        n,
    );
    refused(
        &retry(&gw, "deploy", "production", "alice", &state),
        "other arguments",
        &server,
        n,
    );
    refused(
        &retry(&gw, "undeploy", "staging", "alice", &state),
        "another method or name",
        &server,
        n,
    );

    // The rightful retry completes, and the server got exactly the bytes it issued.
    let v = retry(&gw, "deploy", "staging", "alice", &state);
    assert_eq!(first_text(&v["result"]), "deploy: staging", "{v}");
    assert_eq!(server.states(), [naive_state("staging")]);
    // A replay after completion: one-time use.
    let n = server.calls();
    refused(
        &retry(&gw, "deploy", "staging", "alice", &state),
        "already used",
        &server,
        n,
    );

    // Expired: a state presented after its TTL.
    let late = ask(&gw, "deploy", "staging", "alice");
    std::thread::sleep(Duration::from_millis(2_100));
    let n = server.calls();
    refused(
        &retry(&gw, "deploy", "staging", "alice", &late),
        "expired",
        &server,
        n,
    );

    let m = scrape(&gw);
    assert!(
        m.contains(
            r#"mcp_edge_mrtr_state_refusals_total{pool="naive",reason="state-other-caller"} 1"#
        ),
        "{m}"
    );
    assert!(
        m.contains(r#"mcp_edge_mrtr_states_opened_total{pool="naive"} 1"#),
        "{m}"
    );
    std::fs::remove_file(keys).unwrap();
}

#[test]
fn without_sealing_the_same_server_is_fooled_by_each_attack() {
    let server = NaiveMrtr::start();
    let gw = gateway(&server, None);
    let state = ask(&gw, "deploy", "staging", "alice");
    assert_eq!(state, naive_state("staging"));
    // Edited state: the server deploys production.
    let v = retry(
        &gw,
        "deploy",
        "staging",
        "alice",
        &naive_state("production"),
    );
    assert_eq!(first_text(&v["result"]), "deploy: production");
    // Another caller, other arguments, another tool, a replay: all accepted.
    for (tool, env, user) in [
        ("deploy", "staging", "mallory"),
        ("deploy", "production", "alice"),
        ("undeploy", "staging", "alice"),
        ("deploy", "staging", "alice"),
    ] {
        let v = retry(&gw, tool, env, user, &state);
        assert_eq!(v["result"]["resultType"], "complete", "{v}");
    }
}

#[test]
fn a_state_in_an_event_stream_is_sealed_and_rotation_keeps_it_valid() {
    let server = NaiveMrtr::start();
    let keys = key_file("sse", &[KEY_A]);
    let seal = format!("{{key_file: {}}}", keys.display());
    let gw = gateway(&server, Some(&seal));
    let r = call(
        gw.mcp_addr,
        1,
        "deploy_sse",
        json!({"env": "staging"}),
        json!({"elicitation": {}}),
        Some("alice"),
        json!({}),
    );
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let messages = r.sse_messages();
    assert_eq!(
        messages.len(),
        2,
        "the progress notification passed too: {}",
        r.text()
    );
    let state = messages[1]["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(state.starts_with("ers1."), "{state}");

    // Rotation mid-flow: a replica with the new key on top (and the old below) opens it.
    let rotated = key_file("sse-rotated", &[KEY_B, KEY_A]);
    let gw2 = gateway(
        &server,
        Some(&format!("{{key_file: {}}}", rotated.display())),
    );
    let v = retry(&gw2, "deploy_sse", "staging", "alice", &state);
    assert_eq!(first_text(&v["result"]), "deploy_sse: staging", "{v}");
    // A replica that dropped the old key names it.
    let only_new = key_file("sse-new", &[KEY_B]);
    let gw3 = gateway(
        &server,
        Some(&format!("{{key_file: {}}}", only_new.display())),
    );
    let n = server.calls();
    refused(
        &retry(&gw3, "deploy_sse", "staging", "alice", &state),
        "no longer holds",
        &server,
        n,
    );
    for f in [keys, rotated, only_new] {
        std::fs::remove_file(f).unwrap();
    }
}
