//! The official TypeScript SDK client (`@modelcontextprotocol/client` 2.4.x, installed by
//! `.ci/run` into `target/ts-sdk`, the folder the HTTPS peer test uses too, or
//! `MCP_EDGE_TS_SDK_DIR`) through the gateway with auth on, in front of the reference backend:
//! with a valid static token it completes an MRTR call and sees its own tool list; without a
//! token, with a bad one, or calling a tool a rule denies, it gets a clean 401 / 403. Skipped
//! (with a message) when the SDK is not installed, unless `MCP_EDGE_REQUIRE_PEERS=1`, which makes
//! a missing peer a failure.

use crate::support;
use crate::support::auth::testkeys::{self, *};
use crate::support::auth::*;
use crate::support::*;
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::gateway::RunningGateway;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// The SDK folder, or why it cannot be used.
fn sdk_dir() -> Result<PathBuf, String> {
    let dir = std::env::var_os("MCP_EDGE_TS_SDK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ts-sdk"));
    let pkg = dir.join("node_modules/@modelcontextprotocol/client/package.json");
    let text = std::fs::read_to_string(&pkg).map_err(|e| format!("{}: {e}", pkg.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let version = v["version"].as_str().unwrap_or("");
    if !version.starts_with("2.4.") {
        return Err(format!("{} is version {version}, not 2.4.x", pkg.display()));
    }
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        return Err("node is not on PATH".into());
    }
    Ok(dir)
}

/// Run the client script; its one JSON line.
fn run_client(dir: &std::path::Path, url: &str, token: &str, tool: &str) -> Value {
    let out = Command::new("node")
        .arg(dir.join("mcp-edge-auth-client.mjs"))
        .args([url, token, tool])
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_else(|| {
        panic!(
            "no output from the SDK client; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_typescript_sdk_client_calls_with_a_token_and_is_refused_cleanly_without() {
    let dir = match sdk_dir() {
        Ok(d) => d,
        Err(why) => {
            support::programs::missing(
                &format!("the TypeScript SDK client cannot run ({why})"),
                "mkdir -p target/ts-sdk && cd target/ts-sdk && npm install @modelcontextprotocol/client@2.4.0 (needs node: sudo apt-get install -y nodejs npm)",
            );
            return;
        }
    };
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/auth_sdk/client.mjs"),
        dir.join("mcp-edge-auth-client.mjs"),
    )
    .unwrap();

    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let k = rsa("sdk");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let rules = "  scopes: [mcp]\n  forward: {token_to_pools: [backend]}\n  rules:\n    - {name: ops-deploy, match: {method: tools/call, name: deploy}, when: {scopes: [ops]}}\n    - {name: no-deploy, match: {method: tools/call, name: deploy}, effect: deny}\n";
    let yaml = format!(
        "work_stealing: true\nlisten: {{mcp: 127.0.0.1:{port}, admin: null}}\npools:\n  backend:\n    instances: [{}]\ndefault_route: {{pool: backend}}\n{}",
        pool.addrs().iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", "),
        auth_yaml(&resource, &format!("{{url: {}}}", jwks.url()), rules)
    );
    let cfg = mcp_edge::config::Config::parse(&yaml, "sdk.yaml").unwrap();
    let gw = RunningGateway::start(cfg).unwrap();

    let token = sign(&k, &claims(ISS, &resource, "alice", "mcp"));
    let ok = run_client(&dir, &resource, &token, "create_repo");
    assert_eq!(ok["ok"], true, "{ok}");
    assert_eq!(ok["text"], "Created github.com/octocat/demo", "{ok}");
    let tools: Vec<&str> = ok["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"create_repo") && !tools.contains(&"deploy"),
        "{tools:?}"
    );

    for bad in [
        "-",
        "not-a-jwt",
        &sign(&k, &claims(ISS, "https://other.test/mcp", "alice", "mcp")),
    ] {
        let r = run_client(&dir, &resource, bad, "create_repo");
        assert_eq!(r["ok"], false, "{r}");
        assert_eq!(r["status"], 401, "{r}");
        assert_eq!(r["name"], "UnauthorizedError", "{r}");
        let challenge = r["wwwAuthenticate"].as_str().unwrap_or("");
        assert!(challenge.contains("resource_metadata="), "{r}");
    }
    let denied = run_client(&dir, &resource, &token, "deploy");
    assert_eq!(denied["ok"], false, "{denied}");
    assert_eq!(denied["status"], 403, "{denied}");
    let challenge = denied["wwwAuthenticate"].as_str().unwrap_or("");
    assert!(
        challenge.contains(r#"error="insufficient_scope""#),
        "{denied}"
    );
    drop(gw);
}
