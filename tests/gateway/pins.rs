//! Pinned tool definitions (`pools.<name>.pins`, docs/pins.md) over real loopback sockets, in
//! front of a real TypeScript SDK server whose `weather` tool changes its description and
//! schema at runtime (tests/peers/ts_mutable_server.mjs): on a `hold` pool the changed tool
//! disappears from the lists (the pool's own list passing through, and a federated endpoint's
//! merged one) and its calls are refused with -31017 without reaching the server, until an
//! approval through the admin API releases it; on a `flag` pool it stays listed and callable,
//! and is flagged (metric, admin API, the `mcp-edge pins` CLI).

use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::peers::{self, Peer, Sdk};
use crate::support::http::{call, first_text, request};
use crate::support::*;

struct Setup {
    gw: RunningGateway,
    cfg: mcp_edge::config::Config,
    peer: Peer,
    pins: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(dir) = self.pins.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The mutable server behind a gateway whose pool `ts` pins with `policy` (the default route
/// on /mcp, and the one pool of the federated endpoint /fed); `None` when the SDK is missing.
fn setup(policy: &str) -> Option<Setup> {
    if !peers::installed(Sdk::TypeScript) {
        return None;
    }
    let peer = Peer::start_ts_script("ts_mutable_server.mjs");
    let dir = std::env::temp_dir().join(format!("mcp-edge-pins-{}-{policy}", free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let pins = dir.join("pins.json");
    let cfg = config(
        &[("ts", &[peer.addr], &format!("balance: round_robin\n    pins: {policy}"))],
        &format!(
            "default_route: {{pool: ts}}\npins:\n  file: {}\nfederation:\n  catalog: {{refresh_floor: 200ms}}\n  endpoints:\n    - {{path: /fed, pools: [ts]}}\n",
            pins.display()
        ),
    );
    let gw = RunningGateway::start(cfg.clone()).unwrap();
    Some(Setup {
        gw,
        cfg,
        peer,
        pins,
    })
}

fn list_at(gw: &RunningGateway, path: &str) -> Vec<String> {
    let r = crate::federation::rpc_at(gw, path, "tools/list", json!({}));
    assert_eq!(r.status, 200, "{}", r.text());
    crate::federation::names(&r, "tools", "name")
}

fn weather(addr: std::net::SocketAddr) -> Reply {
    call(
        addr,
        7,
        "weather",
        json!({"city": "Oslo"}),
        json!({}),
        None,
        json!({}),
    )
}

/// How many `weather` calls reached the server (asked of the server itself).
fn reached(peer: &Peer) -> String {
    let r = call(peer.addr, 1, "calls", json!({}), json!({}), None, json!({}));
    first_text(&r.result())
}

fn changed_metric(gw: &RunningGateway) -> f64 {
    sample(
        &scrape(gw),
        "mcp_edge_tool_definition_changed",
        &["pool=\"ts\"", "kind=\"tools\""],
    )
}

fn admin_pins(gw: &RunningGateway, query: &str) -> Value {
    request(
        gw.admin_addr.unwrap(),
        "GET",
        &format!("/-/pins{query}"),
        &[],
        b"",
    )
    .json()
}

#[test]
fn a_changed_tool_on_a_hold_pool_is_unlisted_and_refused_until_approved() {
    let Some(s) = setup("hold") else { return };
    let gw = &s.gw;
    // First sight: pinned (trust on first use), listed, callable.
    assert_eq!(list_at(gw, "/mcp"), ["weather", "mutate", "calls"]);
    let file: Value = serde_json::from_slice(&std::fs::read(&s.pins).unwrap()).unwrap();
    let pinned = &file["pools"]["ts"]["tools"]["weather"];
    assert_eq!(pinned["by"], "first-sight", "{file:#}");
    assert_eq!(pinned["definition"]["description"], "Weather for a city");
    assert_eq!(first_text(&weather(gw.mcp_addr).result()), "sunny in Oslo");
    assert_eq!(reached(&s.peer), "1");

    // The rug pull: the server changes the tool it serves.
    assert_eq!(
        first_text(
            &call(
                gw.mcp_addr,
                2,
                "mutate",
                json!({}),
                json!({}),
                None,
                json!({})
            )
            .result()
        ),
        "mutated"
    );
    assert_eq!(
        list_at(gw, "/mcp"),
        ["mutate", "calls"],
        "the pool's own list"
    );
    assert_eq!(
        list_at(gw, "/fed"),
        ["ts__mutate", "ts__calls"],
        "the federated merged list"
    );
    assert_eq!(changed_metric(gw), 1.0);
    for r in [
        weather(gw.mcp_addr),
        crate::federation::rpc_at(
            gw,
            "/fed",
            "tools/call",
            json!({"name": "ts__weather", "arguments": {"city": "Oslo"}}),
        ),
    ] {
        assert_eq!(r.status, 403, "{}", r.text());
        let v = r.json();
        assert_eq!(v["error"]["code"], -31017, "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("\"weather\"") && msg.contains("changed its definition"),
            "{msg}"
        );
        assert!(
            msg.contains("mcp-edge pins approve --pool ts --tool weather"),
            "{msg}"
        );
        assert_eq!(v["error"]["data"]["pinned"], pinned["digest"], "{v}");
    }
    assert_eq!(
        reached(&s.peer),
        "1",
        "a held call never reaches the server"
    );
    // Explain says so, at the pins stage.
    let q = json!({
        "headers": {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28",
                    "Mcp-Method": "tools/call", "Mcp-Name": "weather"},
        "body": json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "weather", "arguments": {"city": "Oslo"},
                                  "_meta": crate::support::http::meta(json!({}))}}).to_string(),
    });
    let x = request(
        gw.admin_addr.unwrap(),
        "POST",
        "/-/explain",
        &[],
        q.to_string().as_bytes(),
    )
    .json();
    assert_eq!(x["verdict"], "refused", "{x:#}");
    assert_eq!(x["decided_by"], "pins", "{x:#}");
    assert_eq!(x["answer"]["code"], -31017, "{x:#}");
    // A reload keeps what the gateway knows: the tool stays held.
    gw.reload(s.cfg.clone()).unwrap();
    assert_eq!(weather(gw.mcp_addr).status, 403);
    assert_eq!(list_at(gw, "/mcp"), ["mutate", "calls"]);
    assert_eq!(reached(&s.peer), "1");

    // The admin API shows old against new.
    let shown = admin_pins(gw, "?changed");
    let rows = shown["definitions"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{shown:#}");
    assert_eq!(rows[0]["name"], "weather");
    assert_eq!(rows[0]["status"], "changed");
    assert_eq!(rows[0]["policy"], "hold");
    assert_eq!(
        rows[0]["pinned"]["definition"]["description"],
        "Weather for a city"
    );
    assert!(rows[0]["current"]["definition"]["description"]
        .as_str()
        .unwrap()
        .contains("id_rsa"));
    assert!(rows[0]["current"]["definition"]["inputSchema"]["properties"]["note"].is_object());
    // The console's snapshot carries the same, for its Tools page.
    let console = request(gw.admin_addr.unwrap(), "GET", "/-/console.json", &[], b"").json();
    assert_eq!(
        console["pins"][0]["name"], "weather",
        "{:#}",
        console["pins"]
    );
    assert_eq!(console["pins"][0]["policy"], "hold");

    // Approval releases it, and is written to the file.
    let admin = gw.admin_addr.unwrap();
    let bad = request(
        admin,
        "POST",
        "/-/pins/approve",
        &[],
        br#"{"pool":"ts","tool":"nope"}"#,
    );
    assert_eq!(bad.status, 404, "{}", bad.text());
    let ok = request(
        admin,
        "POST",
        "/-/pins/approve",
        &[],
        br#"{"pool":"ts","tool":"weather"}"#,
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(first_text(&weather(gw.mcp_addr).result()), "sunny in Oslo");
    assert_eq!(reached(&s.peer), "2");
    assert_eq!(list_at(gw, "/mcp"), ["weather", "mutate", "calls"]);
    assert_eq!(
        list_at(gw, "/fed"),
        ["ts__weather", "ts__mutate", "ts__calls"]
    );
    assert_eq!(changed_metric(gw), 0.0);
    let file: Value = serde_json::from_slice(&std::fs::read(&s.pins).unwrap()).unwrap();
    let pinned = &file["pools"]["ts"]["tools"]["weather"];
    assert_eq!(pinned["by"], "admin");
    assert!(pinned["definition"]["description"]
        .as_str()
        .unwrap()
        .contains("id_rsa"));
}

#[test]
fn a_changed_tool_on_a_flag_pool_stays_callable_and_is_flagged() {
    let Some(s) = setup("flag") else { return };
    let gw = &s.gw;
    assert_eq!(list_at(gw, "/mcp"), ["weather", "mutate", "calls"]);
    call(
        gw.mcp_addr,
        2,
        "mutate",
        json!({}),
        json!({}),
        None,
        json!({}),
    );
    assert_eq!(
        list_at(gw, "/mcp"),
        ["weather", "mutate", "calls"],
        "flagged, still listed"
    );
    assert_eq!(first_text(&weather(gw.mcp_addr).result()), "sunny in Oslo");
    assert_eq!(reached(&s.peer), "1");
    assert_eq!(changed_metric(gw), 1.0);

    // The CLI, against the admin API.
    let admin = gw.admin_addr.unwrap().to_string();
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
            .arg("pins")
            .args(args)
            .args(["--admin", &admin])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let diff = cli(&["diff"]);
    assert!(
        diff.contains("== pool ts, tool weather (changed, policy flag)"),
        "{diff}"
    );
    assert!(diff.contains("- \"Weather for a city\""), "{diff}");
    assert!(diff.contains("id_rsa"), "{diff}");
    let list = cli(&["list"]);
    assert!(
        list.lines()
            .any(|l| l.contains("weather") && l.contains("changed")),
        "{list}"
    );
    assert!(cli(&["approve", "--pool", "ts", "--tool", "weather"]).contains("approved"));
    assert_eq!(cli(&["diff"]), "no changed definitions\n");
    assert_eq!(changed_metric(gw), 0.0);
    // Unchanged names are reported as such; a pool that does not pin is not read.
    let all = admin_pins(gw, "");
    assert!(
        all["definitions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == "same"),
        "{all:#}"
    );
}

#[test]
fn a_hold_pool_is_read_in_the_background_so_a_change_no_list_showed_is_held() {
    let Some(s) = setup("hold") else { return };
    let gw = &s.gw;
    let rows = |q: &str| admin_pins(gw, q)["definitions"].as_array().unwrap().clone();
    // Nothing listed through the gateway: it asked the pool itself.
    let seen = eventually(Duration::from_secs(20), || {
        rows("")
            .iter()
            .any(|r| r["name"] == "weather" && r["status"] == "same")
    });
    assert!(seen, "{:#}", admin_pins(gw, ""));
    // The change happens behind the gateway's back (a call straight to the server).
    let r = call(
        s.peer.addr,
        2,
        "mutate",
        json!({}),
        json!({}),
        None,
        json!({}),
    );
    assert_eq!(first_text(&r.result()), "mutated");
    let changed = eventually(Duration::from_secs(20), || rows("?changed").len() == 1);
    assert!(changed, "{:#}", admin_pins(gw, ""));
    let r = weather(gw.mcp_addr);
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -31017);
    assert_eq!(reached(&s.peer), "0");
}
