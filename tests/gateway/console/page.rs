//! The console in a real browser: headless Chromium (the system's) driven by puppeteer-core
//! (`tests/console/drive.mjs`, installed by `.ci/run` into target/console-peers). A gateway
//! (`mcp-edge serve` from a file) in front of two `mcp-edge backend` processes gets traffic and
//! a spoofed call, loses one instance, and refuses a broken reload; the script checks that the
//! overview's count is `/metrics`', the dead instance shows down, the spoof shows with the
//! claimed and the real name, the reload's error shows, and explain answers from the form. The
//! page is opened only after the load is in the gateway's history: its charts show that load;
//! the topology shows the dead instance down; every tab opens from its address (`/ui#<tab>`,
//! `/ui/<tab>`) and the arrow keys move between tabs; nothing shows `-0`.
//! Screenshots of each page go to target/console-shots/.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::support::limits::Gateway;
use crate::support::programs::{self, NODE};
use crate::support::*;

fn peers_dir() -> PathBuf {
    std::env::var_os("MCP_EDGE_CONSOLE_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/console-peers"))
}

/// Node, Chromium and puppeteer-core, or a loud skip (a failure under MCP_EDGE_REQUIRE_PEERS=1).
fn browser_ready() -> bool {
    if !programs::have(NODE) {
        return false;
    }
    if !std::path::Path::new("/usr/bin/chromium").exists() {
        return programs::missing("chromium", "sudo apt-get install -y chromium");
    }
    let dir = peers_dir().join("node_modules/puppeteer-core/package.json");
    if !dir.exists() {
        return programs::missing(
            "puppeteer-core",
            "cp tests/console/package*.json target/console-peers/ && (cd target/console-peers && npm ci)",
        );
    }
    true
}

#[test]
fn the_console_shows_traffic_a_down_instance_a_spoof_and_a_failed_reload() {
    if !browser_ready() {
        return;
    }
    let (_procs, addrs) = crate::support::spawn::fleet(2, None);
    let pool = format!(
        "pools:\n  p:\n    instances: [{}, {}]\n    health: {{interval: 300ms, timeout: 300ms}}\ndefault_route: {{pool: p}}\n",
        addrs[0], addrs[1]
    );
    let gw = Gateway::start(&pool);
    for i in 0..6 {
        let r = post(gw.mcp, &refs(&call_headers("echo")), &call(i, "echo"));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let r = post(gw.mcp, &refs(&call_headers("echo")), &call(7, "deploy"));
    assert_eq!(r.status, 400);
    // The page is opened after this load: wait until the gateway's history holds it, so the
    // charts can only show it from there.
    let in_history = || {
        let h = crate::support::http::raw(gw.admin, b"GET /-/history HTTP/1.1\r\nHost: x\r\n\r\n")
            .json();
        h["seconds"]["points"].as_array().map_or(0, |ps| {
            ps.iter()
                .map(|p| p["requests"].as_u64().unwrap_or(0))
                .sum::<u64>()
        }) >= 7
    };
    assert!(
        eventually(Duration::from_secs(10), in_history),
        "the history never held the 7 requests"
    );
    // One instance goes away: health checks take it down.
    let mut procs = _procs;
    let mut dead = procs.0.remove(1);
    let _ = dead.kill();
    let _ = dead.wait();
    let down = format!(
        "mcp_edge_upstream_up{{pool=\"p\",upstream=\"{}\"}} 0",
        addrs[1]
    );
    assert!(eventually(Duration::from_secs(10), || gw
        .metrics()
        .contains(&down)));
    // A reload of a broken file is refused, and says why.
    let listen = std::fs::read_to_string(gw.file()).unwrap();
    let listen = listen.lines().next().unwrap().to_string();
    std::fs::write(
        gw.file(),
        format!("{listen}\npools:\n  p:\n    instances: []\n"),
    )
    .unwrap();
    let r = crate::support::http::raw(
        gw.admin,
        b"POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/console-shots");
    std::fs::create_dir_all(&shots).unwrap();
    // An ES module finds its packages from its own folder: the script runs beside them.
    let script = peers_dir().join("drive.mjs");
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/console/drive.mjs");
    std::fs::copy(&source, &script).unwrap();
    let out = Command::new("node")
        .arg(&script)
        .env("ADMIN", format!("http://{}", gw.admin))
        .env("SHOTS", &shots)
        .env("EXPECT_DOWN", addrs[1].to_string())
        .env("EXPECT_CLAIMED", "echo")
        .env("EXPECT_BODY", "deploy")
        .env("EXPECT_RELOAD_ERROR", "instances")
        .env("EXPECT_REQUESTS_BEFORE", "7")
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "the browser checks failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "overview", "topology", "pools", "refusals", "config", "explain",
    ] {
        assert!(
            shots.join(format!("{page}.png")).exists(),
            "no screenshot of {page}"
        );
    }
}
