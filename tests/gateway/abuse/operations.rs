//! Reloads, shutdown, DNS, health intervals, the upgrade socket, legacy clients.

use super::*;

#[test]
fn i13_6_concurrent_reloads_let_the_newest_file_win() {
    let up = Upstreams::start(1);
    let path = std::env::temp_dir().join(format!(
        "mcp-edge-reload-{}-{}.yaml",
        std::process::id(),
        free_port()
    ));
    let version = |n: u32| {
        format!(
            "listen: {{ mcp: 127.0.0.1:1, admin: null }}\npools:\n  p{n}:\n    instances: [{}]\ndefault_route: {{ pool: p{n} }}\n",
            up.addrs[0]
        )
    };
    // Written whole and renamed into place, as an operator's deploy step does.
    let write = |n: u32| {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, version(n)).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    };
    write(0);
    let first = Gateway::new(Config::load(&path).unwrap(), None).unwrap();
    let live = std::sync::Arc::new(Live::new(first, Some(path.clone())));
    for n in 1..=30 {
        let l = live.clone();
        let first = std::thread::spawn(move || l.reload_from_file());
        write(n);
        let l = live.clone();
        let second = std::thread::spawn(move || l.reload_from_file());
        first.join().unwrap().unwrap();
        second.join().unwrap().unwrap();
        let pools: Vec<String> = live.load().pools.iter().map(|p| p.name.clone()).collect();
        assert_eq!(
            pools,
            [format!("p{n}")],
            "an older file won the reload race"
        );
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn i13_6_sigterm_on_an_idle_gateway_exits_at_once() {
    let up = Upstreams::start(1);
    let port = free_port();
    let path = std::env::temp_dir().join(format!(
        "mcp-edge-sigterm-{}-{port}.yaml",
        std::process::id()
    ));
    std::fs::write(
        &path,
        format!(
            "listen: {{ mcp: 127.0.0.1:{port}, admin: null }}\npools:\n  p:\n    instances: [{}]\ndefault_route: {{ pool: p }}\nshutdown: {{ grace_period: 20s, wind_down: 1s }}\n",
            up.addrs[0]
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["serve", "--config"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(eventually(Duration::from_secs(10), || TcpStream::connect(
        addr
    )
    .is_ok()));
    let h = call_headers("get_weather");
    assert_eq!(post(addr, &refs(&h), &call(1, "get_weather")).status, 200);
    let sent = Instant::now();
    assert!(crate::support::programs::signal(child.id(), "TERM"));
    let exited = eventually(Duration::from_secs(8), || {
        child.try_wait().unwrap().is_some()
    });
    let took = sent.elapsed();
    if !exited {
        let _ = child.kill();
    }
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
    assert!(
        exited && took < Duration::from_secs(5),
        "idle gateway took {took:?} to stop (grace 20 s)"
    );
}

#[test]
fn i13_6_an_instance_that_resolves_elsewhere_is_picked_up() {
    let up = Upstreams::start(1);
    let port = up.addrs[0].port();
    let yaml = format!(
        "listen: {{ mcp: 127.0.0.1:1, admin: null }}\npools:\n  p:\n    instances: [\"localhost:{port}\"]\ndefault_route: {{ pool: p }}\n"
    );
    let cfg = Config::parse(&yaml, "dns.yaml").unwrap();
    let mut gw = Gateway::new(cfg, None).unwrap();
    // What the gateway had resolved before the name moved.
    let stale: std::net::SocketAddr = "127.0.0.2:9".parse().unwrap();
    gw.pools[0].instances[0].addr = stale;
    assert_eq!(dns::changes(&gw).len(), 1);
    let live = Live::new(gw, None);
    dns::refresh(&live);
    let now = live.load().pools[0].instances[0].addr;
    assert_ne!(now, stale);
    assert_eq!(now.port(), port);
    assert!(dns::changes(&live.load()).is_empty());
}

#[test]
fn i13_6_health_checks_every_zero_seconds_are_refused() {
    let yaml =
        "pools:\n  p:\n    instances: [127.0.0.1:1]\n    health: { check: tcp, interval: 0s }\n";
    let e = Config::parse(yaml, "gateway.yaml").unwrap_err().to_string();
    assert!(
        e.contains("gateway.yaml:4") && e.contains("interval"),
        "{e}"
    );
}

#[test]
fn i13_6_the_upgrade_socket_is_in_a_private_directory() {
    use std::os::unix::fs::PermissionsExt;
    let cfg = Config::parse("pools: { p: { instances: [127.0.0.1:1] } }\n", "g.yaml").unwrap();
    let sock = mcp_edge::gateway::runtime::server::upgrade_socket(&cfg);
    let dir = std::path::Path::new(&sock).parent().unwrap();
    let mode = std::fs::metadata(dir).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o077,
        0,
        "{} is open to others ({mode:o})",
        dir.display()
    );
}

#[test]
fn i13_7_a_2025_initialize_learns_the_supported_versions_where_legacy_clients_are_refused() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "legacy: { clients: refuse }\n");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}"#;
    let r = post(gw.mcp_addr, &[("Content-Type", "application/json")], body);
    assert_eq!((r.status, r.error_code()), (400, -32022), "{}", r.text());
    let data = &r.json()["error"]["data"];
    assert_eq!(data["supported"], serde_json::json!(["2026-07-28"]));
    assert_eq!(data["requested"], "2025-11-25");
    assert_eq!(r.json()["id"], 1);
    assert_eq!(up.count(), 0);
}
