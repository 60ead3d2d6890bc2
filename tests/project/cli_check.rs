//! `mcp-edge check` and `mcp-edge serve` as a user runs them: good files print the route table,
//! bad files name the file, line, key and fix, and a busy port is named.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
}

fn check(yaml: &str) -> (bool, String, String) {
    let dir = std::env::temp_dir().join(format!(
        "mcp-edge-check-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = bin()
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn rand_suffix() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn the_shipped_gateway_yaml_checks_and_prints_the_route_table() {
    let repo_config = concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.yaml");
    let out = bin()
        .args(["check", "--config", repo_config])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    for want in [
        "OK",
        "routes (first match wins)",
        "tool-calls",
        "127.0.0.1:7001",
        "default",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }
}

#[test]
fn bad_files_name_the_line_the_key_and_the_fix() {
    let cases = [
        ("pools:\n  default:\n    instances: [127.0.0.1:7001]\n    balanse: hash\n", ":4:", "balanse"),
        ("pools:\n  default:\n    instances: [127.0.0.1:7001]\nroutes:\n  - match: {method: tools/call}\n    pool: missing\n", ":6:", "no pool named \"missing\""),
        ("pools:\n  default:\n    instances: [127.0.0.1:7001]\nvalidation:\n  sample: 1.5\n", ":5:", "between 0.0"),
        ("pools:\n  default:\n    instances: [127.0.0.1:7001]\ntimeouts:\n  connect: fast\n", ":5:", "write e.g. 500ms"),
        ("pools: [\n", ":1:", "expected a map"),
    ];
    for (yaml, line, words) in cases {
        let (ok, _, err) = check(yaml);
        assert!(!ok, "{yaml} should be refused");
        assert!(
            err.contains("gateway.yaml") && err.contains(line) && err.contains(words),
            "for {yaml:?} got: {err}"
        );
    }
    let (ok, _, err) = bin()
        .args(["check", "--config", "/nonexistent/gw.yaml"])
        .output()
        .map(|o| {
            (
                o.status.success(),
                (),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .unwrap();
    assert!(!ok && err.contains("cannot read the config file"), "{err}");
}

#[test]
fn serve_names_a_busy_port() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let dir = std::env::temp_dir().join(format!("mcp-edge-busy-{}", rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.yaml");
    std::fs::write(&file, format!("listen:\n  mcp: 127.0.0.1:{port}\n  admin: null\npools:\n  d:\n    instances: [127.0.0.1:1]\n")).unwrap();
    let out = bin()
        .args(["serve", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("port {port}")) && err.contains("listen.mcp"),
        "{err}"
    );
}
