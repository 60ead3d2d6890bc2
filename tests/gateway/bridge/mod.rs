//! The protocol bridge for 2025-era clients (`legacy:`), over loopback: the official
//! TypeScript SDK v1 and Python SDK 1.x clients (tests/peers_legacy, installed by .ci/run into
//! `MCP_EDGE_LEGACY_PEERS_DIR`, default target/peers-legacy; skipped loudly when absent) in
//! front of the 2026-only reference backend (two instances) list, call and complete every
//! multi round-trip tool, through one gateway and across two replicas (`clients`); forged,
//! altered, other callers' and unanswered sessions and answers (`hostile`); a real end-user
//! client, mcp-remote, answering a mid-call question through the bridge (`remote`). And the other way
//! round: pools of 2025-era servers written with the TypeScript SDK v1 and the Python SDK 1.x
//! (`era: 2025-11-25`) used by the official TypeScript SDK v2 client pinned to 2026-07-28, mid-call
//! questions turned into MRTR, across replicas, with forged states refused (`servers`).

use mcp_edge::backend::{Pool, PoolOptions, StateKeys};
use mcp_edge::gateway::RunningGateway;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

use crate::support::config;

mod catalog;
mod clients;
mod hostile;
mod pass;
mod py_clients;
mod raw;
mod remote;
mod servers;
mod sessions;
mod subscriptions;
mod tokens;

/// The MRTR tools every client completes: elicitation, sampling, roots, three at once, two
/// rounds; and a plain call.
pub(super) const CALLS: &str = "echo={\"text\":\"hi\"};test_input_required_result_elicitation;test_input_required_result_sampling;test_input_required_result_list_roots;test_input_required_result_multiple_inputs;test_input_required_result_multi_round";

/// Two reference backend instances sharing one state key.
pub(super) fn backend() -> Pool {
    Pool::start(PoolOptions::local(2).with_key(StateKeys::random())).expect("backend pool")
}

/// A gateway in front of `pool` with `extra` YAML.
pub(super) fn gateway(pool: &Pool, extra: &str) -> RunningGateway {
    let cfg = config(
        &[("fleet", pool.addrs(), "balance: round_robin")],
        &format!("default_route: {{pool: fleet}}\n{extra}"),
    );
    RunningGateway::start(cfg).unwrap()
}

/// A fresh sealing key file in a folder of its own (remove the folder when done), for
/// replicas that serve each other's sessions.
pub(super) fn keys_file() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mcp-edge-keys-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let keys = dir.join("session.keys");
    let key = mcp_edge::mcp::hex::encode(&rand::random::<[u8; 32]>());
    std::fs::write(&keys, format!("{key}\n")).unwrap();
    keys
}

/// Two gateway replicas in front of `pool` that know each other (`legacy.replicas`) and share
/// a sealing key file (its folder: removed on drop), with `legacy` settings `more` (YAML flow
/// entries after `keys_file`, say `, answer_timeout: 20s`).
pub(super) struct Replicas {
    pub a: RunningGateway,
    pub b: RunningGateway,
    keys: PathBuf,
}

impl Replicas {
    pub(super) fn start(pool: &Pool, more: &str) -> Replicas {
        let keys = keys_file();
        let extra = format!(
            "default_route: {{pool: fleet}}\nlegacy: {{ keys_file: {}{more} }}\n",
            keys.display()
        );
        let fleet = [("fleet", pool.addrs(), "balance: round_robin")];
        let (mut ca, mut cb) = (config(&fleet, &extra), config(&fleet, &extra));
        let all = vec![
            format!("http://{}", ca.listen.mcp),
            format!("http://{}", cb.listen.mcp),
        ];
        ca.legacy.replicas = all.clone();
        cb.legacy.replicas = all;
        let a = RunningGateway::start(ca).unwrap();
        let b = RunningGateway::start(cb).unwrap();
        Replicas { a, b, keys }
    }
}

impl Drop for Replicas {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.keys.parent().unwrap());
    }
}

fn peers() -> PathBuf {
    std::env::var_os("MCP_EDGE_LEGACY_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/peers-legacy"))
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers_legacy")
        .join(name)
}

/// A 2025-era SDK client.
#[derive(Clone, Copy, Debug)]
pub(super) enum Client {
    TypeScriptV1,
    PythonV1,
}

impl Client {
    /// The 2025-era SDK clients that can run here (each missing one skipped loudly).
    pub(super) fn installed_ones() -> Vec<Client> {
        [Client::TypeScriptV1, Client::PythonV1]
            .into_iter()
            .filter(|c| c.installed())
            .collect()
    }

    /// Whether it can run here (else skipped loudly, or a failure under MCP_EDGE_REQUIRE_PEERS).
    pub(super) fn installed(self) -> bool {
        let d = peers();
        let why = match self {
            Client::TypeScriptV1 => {
                let p = d.join("node_modules/@modelcontextprotocol/sdk/package.json");
                (!p.exists()).then(|| format!("{} is missing", p.display()))
            }
            Client::PythonV1 => {
                let ok = Command::new(d.join("venv/bin/python"))
                    .args(["-c", "import mcp.client.streamable_http"])
                    .output()
                    .is_ok_and(|o| o.status.success());
                (!ok).then(|| format!("{}/venv cannot import mcp 1.x", d.display()))
            }
        };
        match why {
            None => true,
            Some(w) => crate::support::programs::missing(
                &w,
                "bash .ci/run (installs tests/peers_legacy into target/peers-legacy)",
            ),
        }
    }

    /// Run it against `url`, calling `calls`; `answers_to`: POST its answers to that URL
    /// instead. What it printed, parsed.
    pub(super) fn run(self, url: &str, calls: &str, answers_to: Option<&str>) -> Value {
        self.run_with(url, calls, answers_to, &[])
    }

    /// [`Client::run`] with more environment (a CA to trust, say).
    pub(super) fn run_with(
        self,
        url: &str,
        calls: &str,
        answers_to: Option<&str>,
        env: &[(&str, &std::path::Path)],
    ) -> Value {
        let d = peers();
        let mut cmd = match self {
            Client::TypeScriptV1 => {
                // Node resolves the SDK from the script's folder upwards: run a copy beside it.
                let copy = d.join("legacy_ts_client.mjs");
                std::fs::copy(script("legacy_ts_client.mjs"), &copy).unwrap();
                let mut c = Command::new("node");
                c.arg(copy);
                c
            }
            Client::PythonV1 => {
                let mut c = Command::new(d.join("venv/bin/python"));
                c.arg(script("legacy_py_client.py"));
                c
            }
        };
        cmd.args([url, calls]);
        cmd.envs(env.iter().copied());
        if let Some(a) = answers_to {
            cmd.env("MCP_EDGE_ANSWERS_URL", a);
        }
        let out = output_within(&mut cmd, std::time::Duration::from_secs(60));
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "{self:?} printed no JSON ({e}): {text}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}

/// Run `cmd` to its end, killing it after `limit` (its output so far is then what it printed).
fn output_within(cmd: &mut Command, limit: std::time::Duration) -> std::process::Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the client");
    let end = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

/// A 2025-era SDK server instance (killed on drop).
pub(crate) struct LegacyServer {
    pub addr: std::net::SocketAddr,
    child: std::process::Child,
    kind: ServerKind,
}

/// Which 2025-era server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ServerKind {
    TypeScriptV1,
    PythonV1,
}

impl ServerKind {
    pub(crate) fn installed(self) -> bool {
        match self {
            ServerKind::TypeScriptV1 => Client::TypeScriptV1.installed(),
            ServerKind::PythonV1 => Client::PythonV1.installed(),
        }
    }
}

impl LegacyServer {
    /// Start one on `port` (0: a free one) and wait until it listens.
    pub(crate) fn start(kind: ServerKind, port: u16) -> LegacyServer {
        LegacyServer::start_with(kind, port, &[])
    }

    /// [`LegacyServer::start`] with `env` (the TypeScript one serves HTTPS with
    /// `MCP_EDGE_TLS_CERT` and `MCP_EDGE_TLS_KEY`).
    pub(super) fn start_with(kind: ServerKind, port: u16, env: &[(&str, &str)]) -> LegacyServer {
        use std::process::Stdio;
        let port = if port == 0 {
            crate::support::free_port()
        } else {
            port
        };
        let d = peers();
        let mut cmd = match kind {
            ServerKind::TypeScriptV1 => {
                let copy = d.join("legacy_ts_server.mjs");
                std::fs::copy(script("legacy_ts_server.mjs"), &copy).unwrap();
                let mut c = Command::new("node");
                c.arg(copy);
                c
            }
            ServerKind::PythonV1 => {
                let mut c = Command::new(d.join("venv/bin/python"));
                c.arg(script("legacy_py_server.py"));
                c
            }
        };
        let mut child = cmd
            .envs(env.iter().copied())
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the {kind:?} server exited"
            );
            assert!(
                std::time::Instant::now() < end,
                "the {kind:?} server did not listen within 30 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        LegacyServer { addr, child, kind }
    }

    /// Stop it and start it again on the same port: its sessions are gone.
    pub(super) fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut again = LegacyServer::start(self.kind, self.addr.port());
        // `again` takes the dead child with it when it is dropped.
        std::mem::swap(&mut self.child, &mut again.child);
    }
}

impl Drop for LegacyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The official TypeScript SDK v2 client, pinned to 2026-07-28 (`MCP_EDGE_TS_SDK_DIR`, as the
/// other TS client tests), against `url`; `retries_to`: send every retry leg there instead.
pub(super) fn modern_client(url: &str, calls: &str, retries_to: Option<&str>) -> Option<Value> {
    let dir = std::env::var_os("MCP_EDGE_TS_SDK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ts-sdk"));
    if !dir
        .join("node_modules/@modelcontextprotocol/client/package.json")
        .exists()
    {
        crate::support::programs::missing(
            &format!("the TypeScript SDK v2 client is not in {}", dir.display()),
            "bash .ci/run",
        );
        return None;
    }
    let copy = dir.join("modern_ts_client.mjs");
    std::fs::copy(script("modern_ts_client.mjs"), &copy).unwrap();
    let mut cmd = Command::new("node");
    cmd.arg(copy).args([url, calls]);
    if let Some(r) = retries_to {
        cmd.env("MCP_EDGE_RETRY_URL", r);
    }
    let out = output_within(&mut cmd, std::time::Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    Some(serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "the TS v2 client printed no JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    }))
}
