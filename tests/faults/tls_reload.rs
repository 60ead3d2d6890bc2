//! Certificates on reload: a new certificate for new handshakes while open connections and an
//! SSE stream keep going, renewal in place picked up by `POST /-/reload` on a serve process, and
//! bad or mismatched files refused (at start and on reload) naming the file, and the zero-downtime
//! upgrade (SIGQUIT) handing TLS and h2c listeners to a new process.

use std::io::{BufReader, Write};

use crate::one_at_a_time;
use crate::support::tls::gateway::{call_request, gateway_yaml, loopback, parse};
use crate::support::tls::{client_config, der_of, presented_cert, tls_listener, Ca, TempDir};
use crate::support::{call, call_headers, free_port, post_bytes, refs, Upstreams};
use mcp_edge::gateway::RunningGateway;

#[test]
fn reload_serves_a_new_certificate_to_new_handshakes_and_keeps_open_connections() {
    let _serial = one_at_a_time();
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-reload");
    let ca = Ca::new("CA");
    let old = ca.server("old", &["localhost"], 30);
    let new = ca.server("new", &["localhost"], 60);
    let (c1, k1) = old.write(&dir, "old");
    let (c2, k2) = new.write(&dir, "new");
    let addr = loopback(free_port());
    let y1 = gateway_yaml(&up, &tls_listener(addr, &c1, &k1, ""), "");
    let gw = RunningGateway::start(parse(&y1)).unwrap();
    let cfg = || client_config(&ca.pem, None, &[b"http/1.1"]);

    // A keep-alive connection and an SSE stream, both open across the reload.
    let mut kept = crate::support::tls::connect(addr, "localhost", cfg()).unwrap();
    let ask = |s: &mut rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>, id| {
        s.write_all(&call_request(id)).unwrap();
        let r = crate::support::http::read_reply(&mut BufReader::new(&mut *s)).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    };
    ask(&mut kept, 1);
    let mut sse = crate::support::tls::connect(addr, "localhost", cfg()).unwrap();
    let mut h = call_headers("slow");
    h.push(("x-test-sse", "6".into()));
    sse.write_all(&post_bytes(&refs(&h), call(2, "slow").as_bytes()))
        .unwrap();
    let mut sse = BufReader::new(sse);
    let mut seen = String::new();
    read_until(&mut sse, &mut seen, "\"progress\":0");

    // Same yaml shape with the new files: the same listener, new material.
    let mut y2 = y1.replace(&c1.display().to_string(), &c2.display().to_string());
    y2 = y2.replace(&k1.display().to_string(), &k2.display().to_string());
    gw.reload(parse(&y2)).unwrap();
    assert_eq!(
        presented_cert(addr, "localhost", cfg()),
        der_of(&new.cert_pem)
    );
    ask(&mut kept, 3);
    read_until(&mut sse, &mut seen, "\"progress\":5");
    assert_eq!(
        kept.conn.peer_certificates().unwrap()[0].to_vec(),
        der_of(&old.cert_pem)
    );

    // A reload whose key does not match its certificate is refused naming the files; the
    // certificate in use stays.
    let y3 = y1.replace(&k1.display().to_string(), &k2.display().to_string());
    let err = format!("{:#}", gw.reload(parse(&y3)).unwrap_err());
    assert!(
        err.contains(&c1.display().to_string()) && err.contains("does not belong"),
        "{err}"
    );
    assert_eq!(
        presented_cert(addr, "localhost", cfg()),
        der_of(&new.cert_pem)
    );
    gw.shutdown();
}

fn read_until(r: &mut impl std::io::BufRead, seen: &mut String, what: &str) {
    let mut line = String::new();
    while !seen.contains(what) {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "stream ended before {what}: {seen}"
        );
        seen.push_str(&line);
    }
}

#[test]
fn bad_files_are_refused_at_start_naming_the_file() {
    let _serial = one_at_a_time();
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-bad");
    let ca = Ca::new("CA");
    let (cert, key) = ca.server("gw", &["localhost"], 30).write(&dir, "gw");
    let (_, other_key) = ca.server("other", &["localhost"], 30).write(&dir, "other");
    let garbage = dir.write("garbage.pem", "not a certificate\n");
    let missing = dir.0.join("missing.pem");
    let addr = loopback(free_port());
    let cases = [
        (
            &garbage,
            &key,
            garbage.display().to_string(),
            "no PEM certificate",
        ),
        (&missing, &key, missing.display().to_string(), "cannot read"),
        (
            &cert,
            &garbage,
            garbage.display().to_string(),
            "private key",
        ),
        (
            &cert,
            &other_key,
            cert.display().to_string(),
            "does not belong",
        ),
    ];
    for (c, k, named, why) in cases {
        let cfg = parse(&gateway_yaml(&up, &tls_listener(addr, c, k, ""), ""));
        let err = format!(
            "{:#}",
            RunningGateway::start(cfg).err().expect("must be refused")
        );
        assert!(
            err.contains(&named) && err.contains(why) && err.contains("listen.mcp.tls"),
            "{err}"
        );
    }
}

/// A `mcp-edge serve` process, killed on drop.
struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn certificates_renewed_in_place_are_picked_up_by_post_reload_and_bad_ones_refused() {
    let _serial = one_at_a_time();
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-renew");
    let ca = Ca::new("CA");
    let first = ca.server("first", &["localhost"], 30);
    let (cert, key) = first.write(&dir, "gw");
    let addr = loopback(free_port());
    let y = gateway_yaml(&up, &tls_listener(addr, &cert, &key, ""), "");
    let admin = parse(&y).listen.admin.unwrap();
    let file = dir.write("gateway.yaml", &y);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["serve", "--config", file.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _serve = Serve(child);
    assert!(
        crate::support::eventually(std::time::Duration::from_secs(20), || {
            std::net::TcpStream::connect(admin).is_ok()
                && std::net::TcpStream::connect(addr).is_ok()
        }),
        "the gateway did not start"
    );
    let cfg = || client_config(&ca.pem, None, &[b"http/1.1"]);
    assert_eq!(
        presented_cert(addr, "localhost", cfg()),
        der_of(&first.cert_pem)
    );
    let mut kept = crate::support::tls::connect(addr, "localhost", cfg()).unwrap();

    // Renewed at the same paths, then POST /-/reload.
    let renewed = ca.server("renewed", &["localhost"], 90);
    renewed.write(&dir, "gw");
    let r = crate::support::http::request(admin, "POST", "/-/reload", &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        presented_cert(addr, "localhost", cfg()),
        der_of(&renewed.cert_pem)
    );
    kept.write_all(&call_request(1)).unwrap();
    let r = crate::support::http::read_reply(&mut BufReader::new(&mut kept)).unwrap();
    assert_eq!(
        r.status, 200,
        "a connection from before the reload still serves"
    );

    // A half-written renewal (a key from another certificate): refused, named, old one kept.
    let (_, other_key) = ca.server("other", &["localhost"], 30).write(&dir, "other");
    std::fs::copy(&other_key, &key).unwrap();
    let r = crate::support::http::request(admin, "POST", "/-/reload", &[], b"");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains(&cert.display().to_string()) && r.text().contains("does not belong"),
        "{}",
        r.text()
    );
    assert_eq!(
        presented_cert(addr, "localhost", cfg()),
        der_of(&renewed.cert_pem)
    );
}

/// Every TLS request during the hand-over is answered. This used to lose about 1 request in
/// 2,000 in a third of the runs: pingora's cleanup dropped each connection waiting for a
/// request, including one whose TLS handshake had just finished in the old process, so its
/// first request was reset. `shutdown.close_idle_after` defers that drop (see
/// `gateway::transport::head_deadline`). Measured here: 1 failing run in 8 without it, 0 in 25 with it;
/// again 15 of 15 passing runs in a row on a 2-core VM also running three builds (load ~5).
#[test]
fn a_zero_downtime_upgrade_hands_tls_and_h2c_listeners_to_a_new_process() {
    let _serial = one_at_a_time();
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-upgrade");
    let ca = Ca::new("CA");
    let (cert, key) = ca.server("gw", &["localhost"], 30).write(&dir, "gw");
    let sock = dir.0.join("upgrade.sock");
    let (tls, plain) = (loopback(free_port()), loopback(free_port()));
    let y = gateway_yaml(
        &up,
        &tls_listener(tls, &cert, &key, ""),
        &format!(
            "shutdown: {{ grace_period: 1s, wind_down: 1s, upgrade_socket: {} }}\n",
            sock.display()
        ),
    )
    .replacen(
        "  admin:",
        &format!("  extra: [ {{ address: {plain}, h2c: true }} ]\n  admin:"),
        1,
    );
    let admin = parse(&y).listen.admin.unwrap();
    let file = dir.write("gateway.yaml", &y);
    let serve = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
            .args(["serve", "--config", file.to_str().unwrap()])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut old = Serve(serve(&[]));
    let listening = || {
        [tls, plain, admin]
            .iter()
            .all(|a| std::net::TcpStream::connect(a).is_ok())
    };
    assert!(crate::support::eventually(
        std::time::Duration::from_secs(20),
        listening
    ));

    // Clients call through the hand-over over TLS, a new connection (and handshake) each time.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (stop2, served2, ca_pem) = (stop.clone(), served.clone(), ca.pem.clone());
    let clients = std::thread::spawn(move || {
        let (mut ok, mut failed) = (0, Vec::new());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !stop2.load(std::sync::atomic::Ordering::Relaxed)
            && std::time::Instant::now() < deadline
        {
            let cfg = client_config(&ca_pem, None, &[b"http/1.1"]);
            match crate::support::tls::h1(tls, "localhost", cfg, &call_request(1)) {
                Ok(r) if r.status == 200 => {
                    ok += 1;
                    served2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(r) => failed.push(format!("status {}", r.status)),
                Err(e) => failed.push(e.to_string()),
            }
        }
        (ok, failed)
    });
    // The old process serves some clients before the hand-over starts.
    let served_by = |n: usize| served.load(std::sync::atomic::Ordering::Relaxed) >= n;
    let soon = std::time::Duration::from_secs(10);
    assert!(crate::support::eventually(soon, || served_by(5)));
    let mut new = Serve(serve(&["--upgrade"]));
    // The new process waits on the upgrade socket once it has bound it (the old one retries its
    // connect until the new one listens).
    assert!(
        crate::support::eventually(std::time::Duration::from_secs(10), || sock.exists()),
        "the new process never bound {}",
        sock.display()
    );
    let kill = |sig: &str, pid: u32| {
        assert!(
            crate::support::programs::signal(pid, sig),
            "kill -s {sig} {pid}"
        );
    };
    kill("QUIT", old.0.id());
    assert!(
        old.0.wait().unwrap().success(),
        "the old process drains and exits 0"
    );
    // And the new one serves them after it.
    let before = served.load(std::sync::atomic::Ordering::Relaxed);
    assert!(crate::support::eventually(soon, || served_by(before + 5)));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, failed) = clients.join().unwrap();
    assert!(ok > 10, "{ok} requests");
    assert!(
        failed.is_empty(),
        "{} of {} TLS requests failed during the upgrade: {failed:?}",
        failed.len(),
        ok + failed.len()
    );
    // The new process serves TLS and the h2c listener.
    let r = crate::support::tls::h1(
        tls,
        "localhost",
        client_config(&ca.pem, None, &[]),
        &call_request(2),
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(crate::support::raw(plain, &call_request(3)).status, 200);
    kill("TERM", new.0.id());
    assert!(new.0.wait().unwrap().success());
}
