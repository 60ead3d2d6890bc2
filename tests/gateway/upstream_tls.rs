//! Upstream TLS per pool: `mcp-edge backend` instances behind a TLS terminator, verified against
//! the test CA (health checks over TLS too), connections reused, a client certificate for
//! upstream mTLS, HTTP/2 to an h2-only upstream over TLS and h2c, and a wrong CA answered with a
//! clear 502 / JSON-RPC error and a log line naming the pool and the reason.

use crate::support;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::tls::{server_config, server_config_mtls, Ca, H2Upstream, TempDir, Terminator};
use crate::support::{eventually, free_port};
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;

fn yaml(pool: &str, extra: &str) -> String {
    format!(
        "work_stealing: true\nlisten:\n  mcp: 127.0.0.1:{}\n  admin: 127.0.0.1:{}\npools:\n  secure:\n{pool}\ndefault_route: {{ pool: secure }}\n{extra}",
        free_port(),
        free_port()
    )
}

fn instances(addrs: &[SocketAddr]) -> String {
    let l: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    format!("[{}]", l.join(", "))
}

fn parse(y: &str) -> Config {
    Config::parse(y, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"))
}

fn echo(gw: SocketAddr, id: i64, text: &str) -> support::http::Reply {
    support::http::call(
        gw,
        id,
        "echo",
        json!({"text": text}),
        json!({}),
        None,
        json!({}),
    )
}

#[test]
fn a_backend_pool_behind_tls_is_verified_reused_and_health_checked() {
    let backends = Pool::start(PoolOptions::local(2)).unwrap();
    let dir = TempDir::new("up-tls");
    let ca = Ca::new("upstream CA");
    let cert = ca.server("backend", &["localhost", "127.0.0.1"], 30);
    let term = Terminator::start(backends.addrs(), server_config(&cert, &[b"http/1.1"]));
    let ca_file = dir.write("ca.pem", &ca.pem);
    let pool = format!(
        "    instances: {}\n    tls: {{ ca_file: {}, sni: localhost }}\n    health: {{ check: off }}",
        instances(&term.addrs),
        ca_file.display()
    );
    let gw = RunningGateway::start(parse(&yaml(&pool, ""))).unwrap();
    for id in 0..20 {
        let r = echo(gw.mcp_addr, id, "over tls");
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(support::http::first_text(&r.result()), "over tls");
    }
    let handshakes = term.handshakes.load(Ordering::SeqCst);
    assert!(
        (1..=4).contains(&handshakes),
        "20 requests over kept-alive TLS connections, {handshakes} handshakes"
    );
    gw.shutdown();

    // The MCP health check speaks TLS too: with the right CA the instances stay up, with SNI
    // defaulting to each instance's host (127.0.0.1, an IP SAN of the certificate).
    let pool = format!(
        "    instances: {}\n    tls: {{ ca_file: {} }}\n    health: {{ check: mcp, interval: 100ms, timeout: 2s }}",
        instances(&term.addrs),
        ca_file.display()
    );
    let gw = RunningGateway::start(parse(&yaml(&pool, ""))).unwrap();
    let before = term.handshakes.load(Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(10), || term
        .handshakes
        .load(Ordering::SeqCst)
        >= before + 4));
    let m = support::http::request(gw.admin_addr.unwrap(), "GET", "/readyz", &[], b"");
    assert_eq!(m.status, 200, "{}", m.text());
    let r = echo(gw.mcp_addr, 1, "checked");
    assert_eq!(r.status, 200, "{}", r.text());
    gw.shutdown();
    backends.shutdown();
}

#[test]
fn a_client_certificate_is_presented_to_an_upstream_that_requires_one() {
    let backends = Pool::start(PoolOptions::local(1)).unwrap();
    let dir = TempDir::new("up-mtls");
    let ca = Ca::new("upstream CA");
    let clients = Ca::new("gateway client CA");
    let cert = ca.server("backend", &["localhost"], 30);
    let term = Terminator::start(backends.addrs(), server_config_mtls(&cert, &clients.pem));
    let ca_file = dir.write("ca.pem", &ca.pem);
    let (cc, ck) = clients.client("mcp-edge").write(&dir, "client");
    let with = format!(
        "    instances: {}\n    tls: {{ ca_file: {}, sni: localhost, client_cert: {}, client_key: {} }}\n    health: {{ check: off }}",
        instances(&term.addrs),
        ca_file.display(),
        cc.display(),
        ck.display()
    );
    let gw = RunningGateway::start(parse(&yaml(&with, ""))).unwrap();
    let r = echo(gw.mcp_addr, 1, "mtls");
    assert_eq!(r.status, 200, "{}", r.text());
    gw.shutdown();
    let without = format!(
        "    instances: {}\n    tls: {{ ca_file: {}, sni: localhost }}\n    health: {{ check: off }}",
        instances(&term.addrs),
        ca_file.display()
    );
    let gw = RunningGateway::start(parse(&yaml(&without, ""))).unwrap();
    let r = echo(gw.mcp_addr, 2, "no cert");
    assert_eq!(r.status, 502, "{}", r.text());
    gw.shutdown();
    backends.shutdown();
}

#[test]
fn h2_to_the_upstream_over_tls_and_h2c_multiplexes_one_connection() {
    let dir = TempDir::new("up-h2");
    let ca = Ca::new("upstream CA");
    let cert = ca.server("h2", &["localhost"], 30);
    let ca_file = dir.write("ca.pem", &ca.pem);
    for tls in [true, false] {
        let up = H2Upstream::start(tls.then(|| server_config(&cert, &[b"h2"])));
        let keys = if tls {
            format!(
                "    tls: {{ ca_file: {}, sni: localhost }}\n    http: h2\n",
                ca_file.display()
            )
        } else {
            "    http: h2\n".to_string()
        };
        let pool = format!(
            "    instances: [{}]\n{keys}    health: {{ check: off }}",
            up.addr
        );
        let gw = RunningGateway::start(parse(&yaml(&pool, ""))).unwrap();
        for id in 0..10 {
            let r = echo(gw.mcp_addr, id, "h2");
            assert_eq!(r.status, 200, "tls {tls}: {}", r.text());
            let v = r.json();
            assert_eq!(v["proto"], "h2");
            assert_eq!(v["id"], id);
        }
        assert_eq!(
            up.connections.load(Ordering::SeqCst),
            1,
            "tls {tls}: one h2 connection reused"
        );
        gw.shutdown();
    }
    // `auto` needs TLS (ALPN chooses); on a plain pool it is a config error naming the key.
    let y = yaml("    instances: [127.0.0.1:1]\n    http: auto", "");
    let err = Config::parse(&y, "gw.yaml").unwrap_err().to_string();
    assert!(
        err.contains("pools.secure.http") && err.contains("needs tls"),
        "{err}"
    );
}

#[test]
fn verify_false_accepts_an_untrusted_certificate_and_verify_true_does_not() {
    let backends = Pool::start(PoolOptions::local(1)).unwrap();
    let ca = Ca::new("a CA the gateway does not know");
    let cert = ca.server("backend", &["localhost"], 30);
    let term = Terminator::start(backends.addrs(), server_config(&cert, &[b"http/1.1"]));
    for (verify, status) in [(false, 200), (true, 502)] {
        // No ca_file: the system's CAs, which do not include the test CA.
        let pool = format!(
            "    instances: {}\n    tls: {{ sni: localhost, verify: {verify} }}\n    health: {{ check: off }}",
            instances(&term.addrs)
        );
        let gw = RunningGateway::start(parse(&yaml(&pool, ""))).unwrap();
        let r = echo(gw.mcp_addr, 1, "unverified");
        assert_eq!(r.status, status, "verify {verify}: {}", r.text());
        gw.shutdown();
    }
    backends.shutdown();
}

/// A `mcp-edge serve` process, killed on drop, its stderr collected.
struct Serve {
    child: std::process::Child,
    log: Arc<Mutex<String>>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_wrong_ca_gets_a_clear_502_and_a_log_line_naming_the_pool() {
    let backends = Pool::start(PoolOptions::local(1)).unwrap();
    let dir = TempDir::new("up-wrong-ca");
    let ca = Ca::new("upstream CA");
    let other = Ca::new("some other CA");
    let cert = ca.server("backend", &["localhost"], 30);
    let term = Terminator::start(backends.addrs(), server_config(&cert, &[b"http/1.1"]));
    let wrong = dir.write("wrong.pem", &other.pem);
    let pool = format!(
        "    instances: {}\n    tls: {{ ca_file: {}, sni: localhost }}\n    health: {{ check: off }}",
        instances(&term.addrs),
        wrong.display()
    );
    let y = yaml(&pool, "");
    let cfg = parse(&y);
    let file = dir.write("gateway.yaml", &y);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["serve", "--config", file.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    let serve = Serve { child, log };
    assert!(
        eventually(Duration::from_secs(20), || std::net::TcpStream::connect(
            cfg.listen.mcp
        )
        .is_ok()),
        "the gateway did not start: {}",
        serve.log.lock().unwrap()
    );
    let r = echo(cfg.listen.mcp, 42, "never");
    assert_eq!(r.status, 502, "{}", r.text());
    let v = r.json();
    assert_eq!(v["id"], 42);
    assert_eq!(v["error"]["code"], -31003);
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("TLS handshake failed: invalid peer certificate: UnknownIssuer")
            && msg.contains("not delivered"),
        "{msg}"
    );
    assert!(
        eventually(Duration::from_secs(5), || {
            let l = serve.log.lock().unwrap();
            l.contains("pool secure: instance")
                && l.contains("TLS handshake failed: invalid peer certificate")
        }),
        "no log line naming the pool and the reason:\n{}",
        serve.log.lock().unwrap()
    );
    assert_eq!(
        term.handshakes.load(Ordering::SeqCst),
        0,
        "no handshake completed"
    );
    drop(serve);
    backends.shutdown();
}

#[test]
fn bad_upstream_tls_files_refuse_the_config_naming_the_pool_and_file() {
    let dir = TempDir::new("up-bad");
    let missing = dir.0.join("nope.pem");
    let pool = format!(
        "    instances: [127.0.0.1:1]\n    tls: {{ ca_file: {} }}",
        missing.display()
    );
    let err = format!(
        "{:#}",
        RunningGateway::start(parse(&yaml(&pool, "")))
            .err()
            .unwrap()
    );
    assert!(
        err.contains("pools.secure.tls") && err.contains(&missing.display().to_string()),
        "{err}"
    );
    // `mcp-edge check` reads the same files: exit 2 naming them, or a line per TLS pool.
    let file = dir.write("bad.yaml", &yaml(&pool, ""));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["check", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
    let ca = Ca::new("CA");
    let ca_file = dir.write("ca.pem", &ca.pem);
    let pool = format!(
        "    instances: [127.0.0.1:1]\n    tls: {{ ca_file: {} }}\n    http: auto",
        ca_file.display()
    );
    let file = dir.write("good.yaml", &yaml(&pool, ""));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["check", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("pool secure      TLS to instances, verified against")
            && stdout.contains("h2 or HTTP/1.1 by ALPN"),
        "{stdout}"
    );
    let pool = "    instances: [127.0.0.1:1]\n    tls: { client_cert: a.pem }";
    let err = Config::parse(&yaml(pool, ""), "gw.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("client_cert and client_key go together"),
        "{err}"
    );
}
