//! A real end-user client of the 2025 era through the bridge: `mcp-remote` (npm, 0.15.1, its
//! bundled SDK speaks 2025-11-25), the stdio proxy that desktop MCP clients start for a remote
//! server. The test is the desktop client: it speaks line-delimited JSON-RPC on mcp-remote's
//! stdin and stdout, mcp-remote speaks Streamable HTTP to the gateway in front of the 2026-only
//! reference backend; a mid-call question of the backend reaches the test as mcp-remote's
//! server-initiated `elicitation/create`, and the test's answer completes the call. And the MCP
//! Inspector's CLI of the 2025 era (npm 0.22.0, on the TypeScript SDK v1) listing and calling.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use super::{backend, gateway, peers};

/// mcp-remote running as a child, its stdout read line by line on a thread.
struct Remote {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    _config: std::path::PathBuf,
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self._config);
    }
}

impl Remote {
    fn start(url: &str) -> Option<Remote> {
        let proxy = peers().join("node_modules/mcp-remote/dist/proxy.js");
        if !proxy.exists() {
            crate::support::programs::missing(
                &format!("mcp-remote is not in {}", peers().display()),
                "bash .ci/run",
            );
            return None;
        }
        let config = std::env::temp_dir().join(format!("mcp-remote-{}", std::process::id()));
        std::fs::create_dir_all(&config).unwrap();
        let mut child = Command::new("node")
            .arg(proxy)
            .args([url, "--allow-http", "--transport", "http-only"])
            .env("MCP_REMOTE_CONFIG_DIR", &config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start node");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Some(Remote {
            child,
            stdin,
            lines,
            _config: config,
        })
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next JSON-RPC message on stdout within 30 s (other output lines are skipped).
    fn next(&mut self) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .expect("mcp-remote said nothing for 30 s");
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if v.get("jsonrpc").is_some() {
                    return v;
                }
            }
        }
    }

    /// The response to request `id` (server requests before it are returned to `on_request`).
    fn response(&mut self, id: i64, on_request: &mut dyn FnMut(&mut Remote, Value)) -> Value {
        loop {
            let m = self.next();
            if m["id"] == id && m.get("method").is_none() {
                return m;
            }
            if m.get("method").is_some() && m.get("id").is_some() {
                on_request(self, m);
            }
        }
    }
}

#[test]
fn mcp_remote_lists_calls_and_answers_a_mid_call_question_through_the_bridge() {
    let pool = backend();
    let gw = gateway(&pool, "");
    let url = format!("http://{}/mcp", gw.mcp_addr);
    let Some(mut r) = Remote::start(&url) else {
        return;
    };
    r.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "desktop", "version": "1"}}}),
    );
    let none = &mut |_: &mut Remote, m: Value| panic!("unexpected server request {m}");
    let init = r.response(1, none);
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    r.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    r.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = r.response(2, none);
    let tools: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"create_repo"),
        "{tools:?}"
    );
    r.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}));
    let echo = r.response(3, none);
    assert_eq!(echo["result"]["content"][0]["text"], "hi", "{echo}");

    // The backend asks for a GitHub login mid-call: the question reaches the desktop client.
    r.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "create_repo", "arguments": {"repo": "demo"}}}));
    let mut asked = 0;
    let done = r.response(4, &mut |r: &mut Remote, m: Value| {
        assert_eq!(m["method"], "elicitation/create", "{m}");
        asked += 1;
        r.send(&json!({"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept", "content": {"name": "octocat"}}}));
    });
    assert_eq!(asked, 1);
    assert_eq!(
        done["result"]["content"][0]["text"], "Created github.com/octocat/demo",
        "{done}"
    );
}

/// The MCP Inspector's CLI of the 2025 era (npm `@modelcontextprotocol/inspector` 0.22.0, on
/// the TypeScript SDK v1) run once against `url` with `args`: its exit status and output.
fn inspector(url: &str, args: &[&str]) -> Option<(bool, String)> {
    let cli = peers().join("node_modules/@modelcontextprotocol/inspector/cli/build/cli.js");
    if !cli.exists() {
        crate::support::programs::missing(
            &format!("the MCP Inspector is not in {}", peers().display()),
            "bash .ci/run",
        );
        return None;
    }
    let mut cmd = Command::new("node");
    cmd.arg(cli)
        .args(["--cli", url, "--transport", "http"])
        .args(args);
    let out = super::output_within(&mut cmd, Duration::from_secs(60));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), text))
}

#[test]
fn the_inspector_cli_of_the_2025_era_lists_and_calls_through_the_bridge() {
    let pool = backend();
    let gw = gateway(&pool, "");
    let url = format!("http://{}/mcp", gw.mcp_addr);
    let Some((ok, tools)) = inspector(&url, &["--method", "tools/list"]) else {
        return;
    };
    assert!(ok, "{tools}");
    let tools: Value = serde_json::from_str(&tools).unwrap_or_else(|e| panic!("{e}: {tools}"));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"create_repo"),
        "{names:?}"
    );
    let call = [
        "--method",
        "tools/call",
        "--tool-name",
        "echo",
        "--tool-arg",
        "text=hello",
    ];
    let (ok, echo) = inspector(&url, &call).unwrap();
    assert!(ok, "{echo}");
    let echo: Value = serde_json::from_str(&echo).unwrap_or_else(|e| panic!("{e}: {echo}"));
    assert_eq!(echo["content"][0]["text"], "hello", "{echo}");
    for method in ["resources/list", "prompts/list"] {
        let (ok, out) = inspector(&url, &["--method", method]).unwrap();
        assert!(ok, "{method}: {out}");
    }
    // The CLI declares no elicitation: a tool that would ask is refused with -32021, the
    // question never sent to a client that cannot answer it.
    let ask = [
        "--method",
        "tools/call",
        "--tool-name",
        "create_repo",
        "--tool-arg",
        "repo=demo",
    ];
    let (ok, out) = inspector(&url, &ask).unwrap();
    assert!(!ok && out.contains("-32021"), "{out}");
    assert!(
        out.contains("declare it in initialize"),
        "the 2025-era fix: {out}"
    );
}
