//! The backend's shared store (`--store redis://…`) against a real redis-server on a loopback
//! port: three separate `mcp-edge backend` processes with one state key; a confirmed `charge`
//! replayed on each other process is refused (charged once in all), while the same fleet
//! without the store charges again on every process (the contrast is the proof). Without
//! redis-server the store test says so and skips (fails under `MCP_EDGE_REQUIRE_PEERS=1`).

use crate::support::http::*;
use crate::support::limits::Redis;
use crate::support::spawn::Procs;
use crate::support::{eventually, free_port};

use serde_json::{json, Value};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn wait_port(port: u16, what: &str) {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(
        eventually(Duration::from_secs(20), || TcpStream::connect(addr).is_ok()),
        "{what} on {port} did not start"
    );
}

fn backend(port: u16, key: &Path, store: Option<&str>) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp-edge"));
    cmd.args([
        "backend",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--state-key-file",
    ])
    .arg(key);
    if let Some(s) = store {
        cmd.args(["--store", s]);
    }
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_port(port, "backend");
    child
}

fn key_file() -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!(
        "mcp-edge-store-{}-{}.key",
        std::process::id(),
        free_port()
    ));
    std::fs::write(&p, "5a".repeat(32)).unwrap();
    p
}

fn caps() -> Value {
    json!({"elicitation": {}})
}

/// Charge `cart` on `first` up to the confirmed leg; returns that leg's params (to replay).
fn confirmed_leg(first: SocketAddr, cart: &str) -> Value {
    let args = json!({"cart_id": cart, "amount": 42});
    let r = call(first, 1, "charge", args, caps(), Some("alice"), json!({})).result();
    assert_eq!(r["resultType"], "input_required", "{r}");
    json!({
        "requestState": r["requestState"],
        "inputResponses": {"confirm_charge": {"action": "accept", "content": {"confirm": true}}},
    })
}

fn redeem(addr: SocketAddr, cart: &str, leg: &Value) -> Value {
    let args = json!({"cart_id": cart, "amount": 42});
    let r = call(addr, 2, "charge", args, caps(), Some("alice"), leg.clone()).result();
    assert_eq!(r["resultType"], "complete", "{r}");
    r["structuredContent"].clone()
}

fn count(addr: SocketAddr, cart: &str) -> u64 {
    let r = call(
        addr,
        3,
        "charge_count",
        json!({"cart_id": cart}),
        json!({}),
        Some("alice"),
        json!({}),
    )
    .result();
    r["structuredContent"]["charges"].as_u64().unwrap()
}

#[test]
fn a_replayed_confirmed_charge_is_refused_on_every_process_sharing_redis() {
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let key = key_file();
    let url = redis.url();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let _procs = Procs(
        ports
            .iter()
            .map(|p| backend(*p, &key, Some(&url)))
            .collect(),
    );
    let addrs: Vec<SocketAddr> = ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}").parse().unwrap())
        .collect();

    let leg = confirmed_leg(addrs[0], "cart-shared");
    let first = redeem(addrs[0], "cart-shared", &leg);
    assert_eq!(
        (first["alreadyCharged"].as_bool(), first["charges"].as_u64()),
        (Some(false), Some(1)),
        "{first}"
    );
    for a in &addrs {
        let again = redeem(*a, "cart-shared", &leg);
        assert_eq!(
            again["alreadyCharged"], true,
            "a replay on {a} charged again: {again}"
        );
        assert_eq!(again["charges"], 1);
        assert_eq!(
            count(*a, "cart-shared"),
            1,
            "every process reads the shared count"
        );
    }
    // A new confirmation (a new state) is a new charge, whichever process redeems it.
    let leg2 = confirmed_leg(addrs[1], "cart-shared");
    assert_eq!(redeem(addrs[2], "cart-shared", &leg2)["charges"], 2);
    // The resource reads the same count.
    let r = rpc(
        addrs[1],
        json!(9),
        "resources/read",
        json!({"uri": "charges://cart-shared"}),
        &[],
    )
    .result();
    assert!(
        r["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("\"charges\":2"),
        "{r}"
    );

    // Redis gone: a charge is refused in band (nothing charged), not a hang or a crash.
    redis.kill();
    let leg3 = confirmed_leg(addrs[0], "cart-shared");
    let started = std::time::Instant::now();
    let args = json!({"cart_id": "cart-shared", "amount": 42});
    let r = call(addrs[0], 4, "charge", args, caps(), Some("alice"), leg3);
    assert_eq!(r.error_code(), -32603, "{}", r.text());
    assert!(r.text().contains("nothing was charged"), "{}", r.text());
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "took {:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_file(&key);
}

#[test]
fn without_the_store_each_process_charges_a_replay_again() {
    let key = key_file();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let procs = Procs(ports.iter().map(|p| backend(*p, &key, None)).collect());
    let addrs: Vec<SocketAddr> = ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}").parse().unwrap())
        .collect();
    let leg = confirmed_leg(addrs[0], "cart-local");
    for a in &addrs {
        let r = redeem(*a, "cart-local", &leg);
        assert_eq!(
            r["alreadyCharged"], false,
            "each process has its own ledger: {r}"
        );
    }
    assert_eq!(redeem(addrs[0], "cart-local", &leg)["alreadyCharged"], true);
    drop(procs);
    let _ = std::fs::remove_file(&key);
}

#[test]
fn an_unreachable_store_stops_the_backend_at_start_with_a_clear_error() {
    let port = free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args([
            "backend",
            "--listen",
            "127.0.0.1:0",
            "--store",
            &format!("redis://127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the Redis store"), "{err}");
}
