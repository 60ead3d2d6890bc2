//! The pipeline over real loopback sockets: a gateway in this process, a small HTTP/1.1
//! upstream that counts the requests it receives whole, and a client writing raw requests.
//!
//! - explain and the proxy agree: for every request of a set (checked and sampled-out routes,
//!   refusals at each stage, both legs), the stages the proxy recorded equal explain's `stages`;
//! - the throwaway stage (`stages/throwaway.rs`, one file and one line in the list) is seen by
//!   explain, the console, a sampled-out route and both legs, and what it refuses never reaches
//!   the upstream, including a body held chunk by chunk on pingora's pipe;
//! - one request path: the direct leg runs the proxy's phases pingora's pipe runs, in order
//!   ([`super::phase_tests`], over these helpers).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::trace;
use crate::config::Config;
use crate::gateway::RunningGateway;

/// An HTTP/1.1 upstream answering every request with a JSON-RPC result; counts the requests it
/// received whole. Stops when dropped.
pub(super) struct Upstream {
    addr: SocketAddr,
    whole: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    pub(super) fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let whole = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (w, s) = (whole.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let w = w.clone();
                if let Ok(conn) = conn {
                    std::thread::spawn(move || serve(conn, &w));
                }
            }
        });
        Upstream { addr, whole, stop }
    }

    /// An upstream's address once it stopped: an instance that refuses connections.
    pub(super) fn gone() -> Upstream {
        Upstream {
            addr: Upstream::start().addr,
            whole: Arc::default(),
            stop: Arc::new(AtomicBool::new(true)),
        }
    }

    fn whole(&self) -> usize {
        self.whole.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
    }
}

/// One keep-alive connection: read each request whole (Content-Length), then answer it.
fn serve(conn: TcpStream, whole: &AtomicUsize) {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.to_ascii_lowercase();
            if let Some(v) = l.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return; // cut off before its end: not a request received whole
        }
        whole.fetch_add(1, Ordering::SeqCst);
        let id: Value =
            serde_json::from_slice::<Value>(&body).map_or(Value::Null, |v| v["id"].clone());
        let resp = json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            resp.len()
        );
        if out
            .write_all(head.as_bytes())
            .and_then(|()| out.write_all(resp.as_bytes()))
            .is_err()
        {
            return;
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A gateway before `up`: endpoint `/guarded` turns the throwaway stage and one argument-policy
/// rule on; a route of tools named `quiet*` is sampled out; the pool has a concurrency limit
/// (the `capacity` stage, with room for every request here).
pub(super) fn gateway(up: &Upstream, endpoint: &str, leg: &str) -> RunningGateway {
    let yaml = format!(
        "work_stealing: true\nlisten: {{mcp: 127.0.0.1:{}, admin: 127.0.0.1:{}}}\nendpoint: {endpoint}\n\
         pools:\n  default:\n    instances: [{}]\n    health: {{check: off}}\n    concurrency: {{adaptive: true}}\n\
         validation: {{sample: 0.0}}\nroutes:\n  - name: quiet\n    match: {{method: tools/call, name: quiet*}}\n    pool: default\n\
         default_route: {{pool: default, validation: {{sample: 1.0}}}}\nconnections: {{upstream_leg: {leg}}}\n{}",
        free_port(),
        free_port(),
        up.addr,
        if endpoint == "/guarded" { POLICY } else { "" },
    );
    let cfg = Config::parse(&yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    RunningGateway::start(cfg).unwrap()
}

/// One argument-policy rule (on the `/guarded` gateway only: `/mcp` has no body stage on).
const POLICY: &str = "argument_policy:\n  - name: staging-only\n    match: {name: \"*deploy\"}\n    schema: {properties: {environment: {const: staging}}}\n";

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

pub(super) fn call(name: &str, args: Value) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":{},"arguments":{args},{META}}}}}"#,
        json!(name)
    )
}

pub(super) fn headers(method: &str, name: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".to_string(), "application/json".to_string()),
        (
            "Accept".to_string(),
            "application/json, text/event-stream".to_string(),
        ),
        ("MCP-Protocol-Version".to_string(), "2026-07-28".to_string()),
        ("Mcp-Method".to_string(), method.to_string()),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name".to_string(), n.to_string()));
    }
    h
}

/// Send one request (`Connection: close`) and read the whole answer: status and body.
pub(super) fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let _ = s.write_all(body); // a refusal may close the connection before the body is sent
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text
        .find("\r\n\r\n")
        .map_or(Vec::new(), |i| out[i + 4..].to_vec());
    (status, body)
}

/// A request of the agreement set: its headers and body.
struct Case {
    what: &'static str,
    headers: Vec<(String, String)>,
    body: String,
}

fn cases() -> Vec<Case> {
    let c = |what, headers, body| Case {
        what,
        headers,
        body,
    };
    let bad_claim = headers("tools/call", Some("echo"));
    vec![
        c(
            "allowed call",
            headers("tools/call", Some("echo")),
            call("echo", json!({"x": 1})),
        ),
        c(
            "guard refuses",
            headers("tools/call", Some("echo")),
            call("echo", json!({"cmd": "rm -rf /"})),
        ),
        c(
            "policy refuses",
            headers("tools/call", Some("deploy")),
            call("deploy", json!({"environment": "prod"})),
        ),
        c(
            "policy allows",
            headers("tools/call", Some("deploy")),
            call("deploy", json!({"environment": "staging"})),
        ),
        c(
            "sampled out, allowed",
            headers("tools/call", Some("quiet")),
            call("quiet", json!({})),
        ),
        c(
            "sampled out, guard refuses",
            headers("tools/call", Some("quiet")),
            call("quiet", json!({"cmd": "rm -rf /"})),
        ),
        // A spoof on the sampled-out route: the claim says quiet, the body says deploy.
        c(
            "sampled out, spoofed deploy",
            headers("tools/call", Some("quiet")),
            call("deploy", json!({"environment": "prod"})),
        ),
        c("header mismatch", bad_claim, call("other", json!({}))),
        c(
            "no MCP headers",
            headers("tools/call", None)[..2].to_vec(),
            call("echo", json!({})),
        ),
        c(
            "a notification without MCP headers",
            headers("tools/call", None)[..2].to_vec(),
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#
                .to_string(),
        ),
        c(
            "list",
            headers("tools/list", None),
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{{{META}}}}}"#),
        ),
        c(
            "not JSON, sampled out",
            headers("tools/call", Some("quiet")),
            "{nope".to_string(),
        ),
    ]
}

/// What explain says of a request, over the admin listener.
fn explain(gw: &RunningGateway, path: &str, case: &Case) -> Value {
    let heads: serde_json::Map<String, Value> = case
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let q = json!({"headers": heads, "body": case.body, "path": path}).to_string();
    let h = vec![("Content-Type".to_string(), "application/json".to_string())];
    let (status, body) = send(
        gw.admin_addr.unwrap(),
        "POST",
        "/-/explain",
        &h,
        q.as_bytes(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn explain_and_the_proxy_run_the_same_stages_in_the_same_order() {
    let up = Upstream::start();
    for (endpoint, leg) in [
        ("/guarded", "direct"),
        ("/guarded", "pingora"),
        ("/mcp", "direct"),
    ] {
        let gw = gateway(&up, endpoint, leg);
        for (n, case) in cases().into_iter().enumerate() {
            let id = format!("{endpoint}-{leg}-{n}");
            let mut h = case.headers.clone();
            h.push(("x-test-trace".to_string(), id.clone()));
            send(gw.mcp_addr, "POST", endpoint, &h, case.body.as_bytes());
            let ran = trace::stages_of(&id);
            if case.what.starts_with("a notification") {
                // Checked on admission, then on through the rest of the list.
                assert_eq!(ran[..2], ["admit", "route"], "{ran:?}");
                assert!(
                    ran.contains(&"check") && ran.contains(&"balance"),
                    "{ran:?}"
                );
            }
            let said = explain(&gw, endpoint, &case);
            let explained: Vec<&str> = said["stages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect();
            assert_eq!(
                ran, explained,
                "{endpoint} {leg}: {}: explain said {said}",
                case.what
            );
        }
    }
}

#[test]
fn a_stage_added_in_one_file_and_one_line_is_seen_everywhere() {
    let up = Upstream::start();
    let bad = call("quiet", json!({"cmd": "rm -rf /"}));
    let big = call(
        "echo",
        json!({"pad": "a".repeat(100 * 1024), "cmd": "rm -rf /"}),
    );
    for leg in ["direct", "pingora"] {
        let gw = gateway(&up, "/guarded", leg);
        let before = up.whole();
        // A sampled-out route, both legs: refused, and the upstream never got it.
        let (status, body) = send(
            gw.mcp_addr,
            "POST",
            "/guarded",
            &headers("tools/call", Some("quiet")),
            bad.as_bytes(),
        );
        assert_eq!(status, 403, "{leg}: {}", String::from_utf8_lossy(&body));
        assert!(
            String::from_utf8_lossy(&body).contains("throwaway guard"),
            "{leg}"
        );
        // A body past 64 KiB: held chunk by chunk on pingora's pipe, read whole on the direct leg.
        let (status, _) = send(
            gw.mcp_addr,
            "POST",
            "/guarded",
            &headers("tools/call", Some("echo")),
            big.as_bytes(),
        );
        assert_eq!(status, 403, "{leg}: a large body");
        assert_eq!(
            up.whole(),
            before,
            "{leg}: nothing refused reached the upstream whole"
        );
        // What it does not refuse goes through.
        let ok = call("quiet", json!({"cmd": "ls"}));
        let (status, _) = send(
            gw.mcp_addr,
            "POST",
            "/guarded",
            &headers("tools/call", Some("quiet")),
            ok.as_bytes(),
        );
        assert_eq!(status, 200, "{leg}");
        assert_eq!(up.whole(), before + 1, "{leg}");
        // Explain names it and its verdict; the console lists it, on.
        let case = Case {
            what: "",
            headers: headers("tools/call", Some("quiet")),
            body: bad.clone(),
        };
        let said = explain(&gw, "/guarded", &case);
        assert_eq!(said["decided_by"], "throwaway_guard", "{said}");
        let (_, snap) = send(gw.admin_addr.unwrap(), "GET", "/-/console.json", &[], b"");
        let snap: Value = serde_json::from_slice(&snap).unwrap();
        let listed = snap["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stage"] == "throwaway_guard")
            .cloned();
        assert_eq!(listed.unwrap()["on"], true, "{snap}");
    }
}
