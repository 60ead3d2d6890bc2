//! Real peers over TLS and h2: the official TypeScript SDK client completing an MRTR tool call
//! over HTTPS through the gateway to the reference backend, and h2load driving many streams
//! over h2c (prior knowledge) and h2 over TLS. With MCP_EDGE_REQUIRE_PEERS=1 (CI) a missing
//! peer fails the test instead of skipping it.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::support::free_port;
use crate::support::tls::{tls_listener, Ca, TempDir};
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;

struct Setup {
    _gw: RunningGateway,
    backends: Option<Pool>,
    tls: SocketAddr,
    h2c: SocketAddr,
    ca_file: PathBuf,
    _dir: TempDir,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(b) = self.backends.take() {
            b.shutdown();
        }
    }
}

/// Two reference backend instances (one state key) behind a gateway with a TLS listener and a
/// loopback h2c listener.
fn setup() -> Setup {
    let backends = Pool::start(PoolOptions::local(2)).unwrap();
    let dir = TempDir::new("peers");
    let ca = Ca::new("peers CA");
    let (cert, key) = ca.server("gateway", &["localhost"], 30).write(&dir, "gw");
    let ca_file = dir.write("ca.pem", &ca.pem);
    let tls = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let h2c = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let list: Vec<String> = backends.addrs().iter().map(|a| a.to_string()).collect();
    let y = format!(
        "work_stealing: true\nlisten:\n  mcp: {}\n  extra: [ {{ address: {h2c}, h2c: true }} ]\n  admin: 127.0.0.1:{}\npools:\n  backends:\n    instances: [{}]\ndefault_route: {{ pool: backends }}\n",
        tls_listener(tls, &cert, &key, ""),
        free_port(),
        list.join(", ")
    );
    let cfg = Config::parse(&y, "peers.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"));
    Setup {
        _gw: RunningGateway::start(cfg).unwrap(),
        backends: Some(backends),
        tls,
        h2c,
        ca_file,
        _dir: dir,
    }
}

/// Where .ci/run installs the TS SDK (`npm install` into a folder git ignores).
fn ts_sdk_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MCP_EDGE_TS_SDK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ts-sdk"));
    let found = dir
        .join("node_modules/@modelcontextprotocol/client/package.json")
        .exists();
    if !found {
        crate::support::programs::missing(
            &format!(
                "@modelcontextprotocol/client is not installed in {}",
                dir.display()
            ),
            "mkdir -p target/ts-sdk && cd target/ts-sdk && npm install @modelcontextprotocol/client@2.4.0",
        );
    }
    found.then_some(dir)
}

#[test]
fn the_typescript_sdk_completes_an_mrtr_call_over_https() {
    if !crate::support::programs::have(crate::support::programs::NODE) {
        return;
    }
    let Some(sdk) = ts_sdk_dir() else { return };
    let s = setup();
    // The script resolves the SDK from the folder it runs in.
    let script = sdk.join("mrtr_over_https.mjs");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ts_sdk/mrtr_over_https.mjs"),
        &script,
    )
    .unwrap();
    let url = format!("https://localhost:{}/mcp", s.tls.port());
    let out = std::process::Command::new("node")
        .arg(&script)
        .arg(&url)
        .env("NODE_EXTRA_CA_CERTS", &s.ca_file)
        .current_dir(&sdk)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the SDK client failed:\n{stdout}\n{stderr}"
    );
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "create_repo"),
        "{v}"
    );
    assert_eq!(v["elicitations"], 1, "one input_required round: {v}");
    assert!(v["text"].as_str().unwrap().contains("octocat/demo"), "{v}");

    // Without the test CA the same client refuses the gateway's certificate.
    let out = std::process::Command::new("node")
        .arg(&script)
        .arg(&url)
        .env_remove("NODE_EXTRA_CA_CERTS")
        .current_dir(&sdk)
        .output()
        .unwrap();
    assert!(!out.status.success(), "an untrusted certificate must fail");
    drop(s);
}

/// Run h2load and return (succeeded, total) from its summary.
fn h2load(args: &[&str]) -> (u64, u64, String) {
    let out = std::process::Command::new("h2load")
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("requests:"))
        .unwrap_or_else(|| panic!("no summary: {text}{}", String::from_utf8_lossy(&out.stderr)));
    let num = |word: &str| -> u64 {
        let words: Vec<&str> = line.split([',', ':']).map(str::trim).collect();
        words
            .iter()
            .find_map(|w| w.strip_suffix(word).map(|n| n.trim().parse().unwrap()))
            .unwrap()
    };
    (num("succeeded"), num("total"), text)
}

#[test]
fn h2load_drives_many_streams_over_h2c_and_h2_over_tls() {
    if !crate::support::programs::have(crate::support::programs::H2LOAD) {
        return;
    }
    let s = setup();
    let dir = TempDir::new("h2load");
    let body = dir.write("body.json", &crate::support::call(1, "echo"));
    let body = body.to_str().unwrap();
    for url in [
        format!("http://{}/mcp", s.h2c),
        format!("https://localhost:{}/mcp", s.tls.port()),
    ] {
        let (ok, total, text) = h2load(&[
            "-n",
            "400",
            "-c",
            "2",
            "-m",
            "20",
            "-d",
            body,
            "-H",
            "content-type: application/json",
            "-H",
            "mcp-protocol-version: 2026-07-28",
            "-H",
            "mcp-method: tools/call",
            "-H",
            "mcp-name: echo",
            &url,
        ]);
        assert_eq!((ok, total), (400, 400), "{url}:\n{text}");
        assert!(
            text.contains("400 2xx"),
            "{url}: every answer a 2xx:\n{text}"
        );
        if url.starts_with("https") {
            assert!(
                text.contains("TLSv1.3") && text.contains("Application protocol: h2"),
                "{text}"
            );
        }
    }
    drop(s);
}
