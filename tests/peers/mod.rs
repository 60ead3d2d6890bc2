//! MCP servers written with the official SDKs, started on loopback for the load-tester tests: a
//! fleet that is not mcp-edge's reference backend (and `ts_mutable_server.mjs`, a server whose
//! tool changes at runtime, for the pinned-definitions tests). `ts_server.mjs` uses the TypeScript SDK v2
//! (`package.json`), `py_server.py` the Python SDK (`requirements.txt`). `.ci/run` installs
//! both into `target/peers` (or `$MCP_EDGE_PEERS_DIR`): `node_modules/` and `venv/`.
//!
//! When they are not installed, [`installed`] says so loudly and the tests skip, unless
//! `MCP_EDGE_REQUIRE_PEERS=1` (set by `.ci/run`), which turns a missing peer into a failure
//! (`support::programs::missing`, the rule every peer test follows).
//! Every process is killed when its [`Peer`] is dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The key every instance of one fleet shares (the TS codec needs ≥ 32 bytes).
pub const SHARED_KEY: &str = "mcp-edge-loadtest-shared-key-0123456789";

/// Where the peers are installed.
pub fn dir() -> PathBuf {
    std::env::var_os("MCP_EDGE_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/peers"))
}

fn source(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    TypeScript,
    Python,
}

impl Sdk {
    fn missing(self) -> Option<String> {
        let d = dir();
        match self {
            Sdk::TypeScript => {
                for pkg in ["server", "node"] {
                    let p = d.join(format!(
                        "node_modules/@modelcontextprotocol/{pkg}/package.json"
                    ));
                    if !p.exists() {
                        return Some(format!("{} is missing", p.display()));
                    }
                }
                let node = Command::new("node").arg("--version").output();
                if !node.is_ok_and(|o| o.status.success()) {
                    return Some("node is not on PATH".into());
                }
                None
            }
            Sdk::Python => {
                let py = d.join("venv/bin/python");
                let ok = Command::new(&py)
                    .args(["-c", "import mcp.server.mcpserver"])
                    .output()
                    .is_ok_and(|o| o.status.success());
                (!ok).then(|| {
                    format!(
                        "{} cannot import mcp (pip install mcp==2.3.0)",
                        py.display()
                    )
                })
            }
        }
    }
}

/// Whether `sdk`'s peer can run. When it cannot: fails the test if `MCP_EDGE_REQUIRE_PEERS=1`,
/// else prints why (loudly) and returns false so the test returns early.
pub fn installed(sdk: Sdk) -> bool {
    let Some(why) = sdk.missing() else {
        return true;
    };
    let install = match sdk {
        Sdk::TypeScript => "cp tests/peers/package*.json target/peers/ && (cd target/peers && npm ci) (needs node: sudo apt-get install -y nodejs npm)",
        Sdk::Python => "python3 -m venv target/peers/venv && target/peers/venv/bin/pip install -r tests/peers/requirements.txt (needs sudo apt-get install -y python3-venv)",
    };
    crate::support::programs::missing(
        &format!("the {sdk:?} SDK peer is not installed ({why})"),
        install,
    )
}

/// One running SDK server.
pub struct Peer {
    pub addr: SocketAddr,
    child: Child,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

use crate::support::free_port;

/// Copy a TS script next to `node_modules` (ESM resolves packages from the script's folder).
fn ts_script(file: &str) -> PathBuf {
    let target = dir().join(file);
    let text = std::fs::read(source(file)).unwrap();
    if std::fs::read(&target).ok().as_deref() != Some(text.as_slice()) {
        let tmp = dir().join(format!("{file}.{}", std::process::id()));
        std::fs::write(&tmp, &text).unwrap();
        std::fs::rename(&tmp, &target).unwrap();
    }
    target
}

impl Peer {
    /// Start one instance named `name` (TS only uses it) and wait until it accepts connections.
    pub fn start(sdk: Sdk, name: &str) -> Peer {
        let port = free_port();
        let cmd = match sdk {
            Sdk::TypeScript => {
                let mut c = Command::new("node");
                c.arg(ts_script("ts_server.mjs"))
                    .arg(port.to_string())
                    .arg(name)
                    .arg(SHARED_KEY);
                c
            }
            Sdk::Python => {
                let mut c = Command::new(dir().join("venv/bin/python"));
                c.arg(source("py_server.py"))
                    .arg(port.to_string())
                    .arg(SHARED_KEY);
                c
            }
        };
        Peer::spawn(cmd, port, &format!("{sdk:?} peer {name}"))
    }

    /// Start another TS script of tests/peers (`node SCRIPT PORT`) and wait until it listens.
    pub fn start_ts_script(file: &str) -> Peer {
        Peer::start_ts_script_with(file, &[])
    }

    /// [`Peer::start_ts_script`] with `args` after the port.
    pub fn start_ts_script_with(file: &str, args: &[&str]) -> Peer {
        let port = free_port();
        let mut cmd = Command::new("node");
        cmd.arg(ts_script(file)).arg(port.to_string()).args(args);
        Peer::spawn(cmd, port, file)
    }

    /// A server of both eras (`legacy_clients: pass` pools): `ts_dual_server.mjs` named
    /// `name`, or the Python one (`py_server.py` with sessions for 2025-era clients).
    pub fn start_dual(sdk: Sdk, name: &str) -> Peer {
        match sdk {
            Sdk::TypeScript => Peer::start_ts_script_with("ts_dual_server.mjs", &[name]),
            Sdk::Python => {
                let port = free_port();
                let mut c = Command::new(dir().join("venv/bin/python"));
                c.arg(source("py_server.py"))
                    .args([&port.to_string(), SHARED_KEY, "sessions"]);
                Peer::spawn(c, port, &format!("Python dual peer {name}"))
            }
        }
    }

    /// Stop it now (its sessions are gone).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn spawn(mut cmd: Command, port: u16, what: &str) -> Peer {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting the {what}: {e}"));
        let stdout = child.stdout.take().unwrap();
        // Drain stdout so the peer never blocks on a full pipe.
        std::thread::spawn(move || for _ in BufReader::new(stdout).lines() {});
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the {what} exited before listening: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "the {what} did not listen within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Peer { addr, child }
    }

    /// `n` instances of one fleet (shared key, one server name).
    pub fn fleet(sdk: Sdk, n: usize) -> Vec<Peer> {
        (0..n)
            .map(|i| Peer::start(sdk, &format!("{sdk:?}-{i}")))
            .collect()
    }
}
