//! Downstream TLS over real handshakes (certificates made at run time with rcgen): HTTP/1.1 and
//! h2 by ALPN with curl, certificates chosen by SNI, mTLS, the minimum version, the
//! plain-listener policy, `mcp-edge check`, the expiry metric and the admin listener over mTLS.
//! Reload and bad files: tests/faults/tls_reload.rs.

use crate::support::tls::gateway::{call_request, gateway_yaml, loopback, parse};
use crate::support::tls::{
    client_config, curl, der_of, h1, presented_cert, tls_listener, Ca, TempDir,
};
use crate::support::{call, free_port, Upstreams};
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;

#[test]
fn curl_speaks_http1_and_h2_over_tls_with_the_test_ca() {
    if !crate::support::programs::have(crate::support::programs::CURL) {
        return;
    }
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-curl");
    let ca = Ca::new("mcp-edge test CA");
    let (cert, key) = ca
        .server("gateway", &["localhost", "127.0.0.1"], 30)
        .write(&dir, "gw");
    let ca_file = dir.write("ca.pem", &ca.pem);
    let addr = loopback(free_port());
    let gw = RunningGateway::start(parse(&gateway_yaml(
        &up,
        &tls_listener(addr, &cert, &key, ""),
        "",
    )))
    .unwrap();
    let url = format!("https://localhost:{}/mcp", addr.port());
    let resolve = format!("localhost:{}:127.0.0.1", addr.port());
    for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let (rc, out, err) = curl(&[
            flag,
            "--cacert",
            ca_file.to_str().unwrap(),
            "--resolve",
            &resolve,
            "-w",
            "\n%{http_version} %{http_code}",
            "-H",
            "Content-Type: application/json",
            "-H",
            "MCP-Protocol-Version: 2026-07-28",
            "-H",
            "Mcp-Method: tools/call",
            "-H",
            "Mcp-Name: echo",
            "--data-binary",
            &call(7, "echo"),
            &url,
        ]);
        assert_eq!(rc, 0, "curl {flag}: {err}");
        let (body, tail) = out.rsplit_once('\n').unwrap();
        assert_eq!(tail, format!("{version} 200"), "curl {flag}: {out}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["id"], 7, "the upstream got the request: {body}");
    }
    // The same listener refuses a client that does not trust the CA (curl's own store).
    let (rc, _, err) = curl(&["--resolve", &resolve, &url]);
    assert_ne!(rc, 0, "an untrusted certificate must fail: {err}");
    assert_eq!(up.count(), 2);
    gw.shutdown();
}

#[test]
fn sni_chooses_the_certificate_and_unknown_names_get_the_first() {
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-sni");
    let ca = Ca::new("test CA");
    let first = ca.server("first", &["localhost", "127.0.0.1"], 30);
    let second = ca.server("second", &["api.test", "*.tools.test"], 30);
    let (c1, k1) = first.write(&dir, "first");
    let (c2, k2) = second.write(&dir, "second");
    let addr = loopback(free_port());
    let mcp = format!(
        "{{ address: {addr}, tls: {{ certificates: [{{ cert: {}, key: {} }}, {{ cert: {}, key: {} }}] }} }}",
        c1.display(), k1.display(), c2.display(), k2.display()
    );
    let gw = RunningGateway::start(parse(&gateway_yaml(&up, &mcp, ""))).unwrap();
    let cfg = || client_config(&ca.pem, None, &[b"http/1.1"]);
    assert_eq!(
        presented_cert(addr, "localhost", cfg()),
        der_of(&first.cert_pem)
    );
    assert_eq!(
        presented_cert(addr, "api.test", cfg()),
        der_of(&second.cert_pem)
    );
    assert_eq!(
        presented_cert(addr, "x.tools.test", cfg()),
        der_of(&second.cert_pem)
    );
    // A client that names no host (rustls sends no SNI for an IP) gets the first one.
    assert_eq!(
        presented_cert(addr, "127.0.0.1", cfg()),
        der_of(&first.cert_pem)
    );
    let r = h1(addr, "api.test", cfg(), &call_request(3)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    gw.shutdown();
}

#[test]
fn mtls_refuses_missing_and_foreign_client_certificates_at_the_handshake() {
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-mtls");
    let ca = Ca::new("server CA");
    let clients = Ca::new("client CA");
    let stranger = Ca::new("another CA");
    let (cert, key) = ca.server("gw", &["localhost"], 30).write(&dir, "gw");
    let client_ca = dir.write("clients.pem", &clients.pem);
    let addr = loopback(free_port());
    let extra = format!(", client_ca: {}", client_ca.display());
    let gw = RunningGateway::start(parse(&gateway_yaml(
        &up,
        &tls_listener(addr, &cert, &key, &extra),
        "",
    )))
    .unwrap();

    let good = clients.client("alice");
    let r = h1(
        addr,
        "localhost",
        client_config(&ca.pem, Some(&good), &[]),
        &call_request(1),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());

    // TLS 1.3: the server's verdict on the client certificate arrives after the client's
    // Finished, so the refusal shows as an alert on the first read.
    for (what, client) in [
        ("no certificate", None),
        ("another CA", Some(stranger.client("mallory"))),
    ] {
        let got = h1(
            addr,
            "localhost",
            client_config(&ca.pem, client.as_ref(), &[]),
            &call_request(2),
        );
        let err = got.expect_err(&format!("{what}: must be refused"));
        let msg = err.to_string();
        assert!(
            msg.contains("CertificateRequired")
                || msg.contains("UnknownCA")
                || msg.contains("alert")
                || msg.contains("BadCertificate"),
            "{what}: refused by a TLS alert, got {msg}"
        );
    }
    assert_eq!(
        up.count(),
        1,
        "only the authenticated request reached the upstream"
    );
    gw.shutdown();
}

#[test]
fn min_version_13_refuses_a_tls12_only_client() {
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-min");
    let ca = Ca::new("CA");
    let (cert, key) = ca.server("gw", &["localhost"], 30).write(&dir, "gw");
    let addr = loopback(free_port());
    let gw = RunningGateway::start(parse(&gateway_yaml(
        &up,
        &tls_listener(addr, &cert, &key, ", min_version: \"1.3\""),
        "",
    )))
    .unwrap();
    let tls12 = |pem: &str| {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from(der_of(pem)))
            .unwrap();
        std::sync::Arc::new(
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
        )
    };
    // A ClientHello split over records of 64 bytes (59 of it each): the gate reads it across
    // them (it used to let a fragmented TLS 1.2 hello through, unread, to rustls).
    let fragmented = |c: std::sync::Arc<rustls::ClientConfig>| {
        let mut c = (*c).clone();
        c.max_fragment_size = Some(64);
        std::sync::Arc::new(c)
    };
    for (what, config) in [
        ("TLS 1.2", tls12(&ca.pem)),
        ("TLS 1.2 fragmented", fragmented(tls12(&ca.pem))),
    ] {
        let refused = crate::support::tls::connect(addr, "localhost", config).is_err();
        assert!(refused, "{what} must be refused");
    }
    for config in [
        client_config(&ca.pem, None, &[]),
        fragmented(client_config(&ca.pem, None, &[])),
    ] {
        let s = crate::support::tls::connect(addr, "localhost", config).unwrap();
        assert_eq!(
            s.conn.protocol_version(),
            Some(rustls::ProtocolVersion::TLSv1_3)
        );
    }
    gw.shutdown();
}

#[test]
fn a_plain_listener_next_to_tls_must_be_on_loopback() {
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-plain");
    let ca = Ca::new("CA");
    let (cert, key) = ca.server("gw", &["localhost"], 30).write(&dir, "gw");
    let tls = tls_listener(loopback(free_port()), &cert, &key, "");
    let open = format!("listen:\n  extra: [ 0.0.0.0:{} ]\n", free_port());
    let y = gateway_yaml(&up, &tls, "").replacen("listen:\n", &open, 1);
    let err = Config::parse(&y, "gw.yaml").unwrap_err().to_string();
    assert!(
        err.contains("listen.extra[0]") && err.contains("127.0.0.1"),
        "{err}"
    );
    // Loopback is fine, and a TLS listener plus a loopback h2c one serve the same gateway.
    let plain = loopback(free_port());
    let y = gateway_yaml(&up, &tls, "").replacen(
        "  admin:",
        &format!("  extra: [ {{ address: {plain}, h2c: true }} ]\n  admin:"),
        1,
    );
    let gw = RunningGateway::start(parse(&y)).unwrap();
    let r = crate::support::raw(plain, &call_request(4));
    assert_eq!(r.status, 200, "{}", r.text());
    gw.shutdown();
}

#[test]
fn check_prints_listeners_and_warns_about_a_certificate_near_expiry() {
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-check");
    let ca = Ca::new("CA");
    let (cert, key) = ca
        .server("soon.example", &["localhost"], 5)
        .write(&dir, "soon");
    let addr = loopback(free_port());
    let y = gateway_yaml(&up, &tls_listener(addr, &cert, &key, ""), "");
    let file = dir.write("gateway.yaml", &y);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["check", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("listen.mcp") && stdout.contains("TLS (>= TLS 1.2, ALPN h2 http/1.1)"),
        "{stdout}"
    );
    assert!(stdout.contains("CN=soon.example"), "{stdout}");
    assert!(
        stdout.contains("warning: listen.mcp: certificate")
            && (stdout.contains("expires in 4 days") || stdout.contains("expires in 5 days")),
        "{stdout}"
    );

    // A broken key: exit 2, the file named.
    std::fs::write(&key, "junk").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["check", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&key.display().to_string()), "{stderr}");
}

#[test]
fn the_expiry_metric_names_each_listener() {
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-metric");
    let ca = Ca::new("CA");
    let (cert, key) = ca.server("gw", &["localhost"], 20).write(&dir, "gw");
    let addr = loopback(free_port());
    let gw = RunningGateway::start(parse(&gateway_yaml(
        &up,
        &tls_listener(addr, &cert, &key, ""),
        "",
    )))
    .unwrap();
    let m =
        crate::support::http::request(gw.admin_addr.unwrap(), "GET", "/metrics", &[], b"").text();
    let line = m
        .lines()
        .find(|l| l.starts_with("mcp_edge_tls_certificate_expiry_timestamp_seconds{"))
        .unwrap_or_else(|| panic!("no expiry metric in\n{m}"));
    assert!(line.contains("listener=\"listen.mcp\""), "{line}");
    let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let days = (value - now) / 86_400.0;
    assert!(
        (19.9..20.1).contains(&days),
        "expires in {days} days: {line}"
    );
    gw.shutdown();
}

#[test]
fn the_admin_listener_serves_metrics_over_mtls_as_prometheus_scrapes_it() {
    if !crate::support::programs::have(crate::support::programs::CURL) {
        return;
    }
    let up = Upstreams::start(1);
    let dir = TempDir::new("tls-admin");
    let ca = Ca::new("admin CA");
    let scrapers = Ca::new("scraper CA");
    let (cert, key) = ca
        .server("gateway.internal", &["gateway.internal"], 30)
        .write(&dir, "admin");
    let (sc, sk) = scrapers.client("prometheus").write(&dir, "scraper");
    let ca_file = dir.write("ca.pem", &ca.pem);
    let scraper_ca = dir.write("scrapers.pem", &scrapers.pem);
    let admin = loopback(free_port());
    let admin_yaml = tls_listener(
        admin,
        &cert,
        &key,
        &format!(", client_ca: {}", scraper_ca.display()),
    );
    // The helper's plain admin line becomes a comment below the TLS one.
    let y = gateway_yaml(&up, &format!("127.0.0.1:{}", free_port()), "").replacen(
        "  admin: 127.0.0.1:",
        &format!("  admin: {admin_yaml}\n  # plain admin was 127.0.0.1:"),
        1,
    );
    let gw = RunningGateway::start(parse(&y)).unwrap();
    let url = format!("https://gateway.internal:{}/metrics", admin.port());
    let resolve = format!("gateway.internal:{}:127.0.0.1", admin.port());
    let ca_arg = ca_file.to_str().unwrap();
    let (rc, out, err) = curl(&[
        "--cacert",
        ca_arg,
        "--cert",
        sc.to_str().unwrap(),
        "--key",
        sk.to_str().unwrap(),
        "--resolve",
        &resolve,
        "-f",
        &url,
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("mcp_edge_tls_certificate_expiry_timestamp_seconds{certificate="),
        "{out}"
    );
    assert!(out.contains("listener=\"listen.admin\""), "{out}");
    // Without a client certificate the handshake is refused.
    let (rc, _, err) = curl(&["--cacert", ca_arg, "--resolve", &resolve, "-f", &url]);
    assert_ne!(rc, 0, "no client certificate must be refused: {err}");
    gw.shutdown();
}
