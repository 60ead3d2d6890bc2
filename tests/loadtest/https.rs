//! https targets: real TLS handshakes on 127.0.0.1 with a CA and a server certificate made at
//! test time (rcgen). HTTP/2 when the target offers `h2` by ALPN, HTTP/1.1 otherwise; `--cacert`
//! and `--insecure`; an untrusted certificate is an error whose message says why.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use crate::support::loadtest::{Target, TargetOptions};
use mcp_edge::loadtest::{execute, LoadTestArgs};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

/// A CA (PEM, for --cacert) and a server config with a certificate for 127.0.0.1 it signed.
fn pki(alpn: &[&[u8]]) -> (String, Arc<ServerConfig>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    (ca.pem(), Arc::new(cfg))
}

async fn https_target(alpn: &[&[u8]]) -> (Target, String, std::path::PathBuf) {
    let (ca_pem, cfg) = pki(alpn);
    let target = Target::start(TargetOptions {
        tls: Some(cfg),
        ..TargetOptions::default()
    })
    .await;
    let url = format!("https://{}/mcp", target.addr);
    let ca = std::env::temp_dir().join(format!(
        "mcp-edge-ca-{}-{}.pem",
        std::process::id(),
        target.addr.port()
    ));
    std::fs::write(&ca, ca_pem).unwrap();
    (target, url, ca)
}

fn args(url: &str, extra: &[&str]) -> LoadTestArgs {
    let mut argv = vec![
        "--target",
        url,
        "--timeout",
        "5s",
        "--duration",
        "20s",
        "--quiet",
    ];
    argv.extend_from_slice(extra);
    LoadTestArgs::from_cli(argv).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_cacert_speaks_http2_when_offered() {
    let (target, url, ca) = https_target(&[b"h2", b"http/1.1"]).await;
    let a = args(
        &url,
        &[
            "--cacert",
            ca.to_str().unwrap(),
            "--scenario",
            "mrtr",
            "--flows",
            "60",
            "--concurrency",
            "4",
        ],
    );
    let r = execute(&a).await.unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(r.measures.flows_completed, 60);
    assert!(r.cross_instance_fraction().unwrap() > 0.3);
    // Every request, preflight included, came over HTTP/2.
    let all = target.stats.requests.load(SeqCst) + target.stats.preflight.load(SeqCst);
    assert_eq!(target.stats.h2_requests.load(SeqCst), all);
    assert_eq!(target.stats.requests.load(SeqCst), r.requests());
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_without_h2_falls_back_to_http1() {
    let (target, url, ca) = https_target(&[b"http/1.1"]).await;
    let a = args(
        &url,
        &[
            "--cacert",
            ca.to_str().unwrap(),
            "--scenario",
            "mixed",
            "--flows",
            "40",
            "--concurrency",
            "2",
        ],
    );
    let r = execute(&a).await.unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(r.measures.flows_completed, 40);
    assert_eq!(target.stats.h2_requests.load(SeqCst), 0);
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_an_error_that_says_why_and_insecure_accepts_it() {
    let (target, url, _ca) = https_target(&[b"h2", b"http/1.1"]).await;
    // The public roots do not know the test CA.
    let r = execute(&args(&url, &["--scenario", "echo", "--flows", "5"]))
        .await
        .unwrap();
    assert_eq!(r.errors(), 5);
    let groups = r.measures.tally.error_groups();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].0.kind, "transport");
    assert!(
        groups[0].0.message.contains("UnknownIssuer"),
        "{}",
        groups[0].0.message
    );
    assert!(r
        .discovery
        .as_ref()
        .unwrap()
        .discover_error
        .as_deref()
        .unwrap()
        .contains("TLS handshake"));
    assert_eq!(target.stats.requests.load(SeqCst), 0);
    // --insecure: the same target, no verification.
    let r = execute(&args(
        &url,
        &["--insecure", "--scenario", "echo", "--flows", "5"],
    ))
    .await
    .unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    target.stop().await;
}
