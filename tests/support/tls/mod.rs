//! TLS test support: a certificate authority made at run time with rcgen (no key is ever
//! committed), PEM files in a temporary directory removed on drop, rustls client configs, a
//! blocking HTTP/1.1-over-TLS request, an HTTP/2 client (the `h2` crate, so tests can send
//! duplicate fields and RST_STREAM), curl, and (in `upstreams`) TLS servers for upstream tests.
#![allow(dead_code)]

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::support::http::{read_reply, Reply};

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "mcp-edge-{tag}-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    t ^ (N.fetch_add(1, Ordering::Relaxed) << 32)
}

/// A test CA.
pub struct Ca {
    pub cert: rcgen::Certificate,
    key: KeyPair,
    pub pem: String,
}

/// A certificate and key issued by a [`Ca`], as PEM text.
#[derive(Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        let pem = cert.pem();
        Ca { cert, key, pem }
    }

    /// A server certificate for `names` (DNS names or IPs), valid for `days` from now.
    pub fn server(&self, cn: &str, names: &[&str], days: i64) -> Issued {
        self.issue(cn, names, days, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate.
    pub fn client(&self, cn: &str) -> Issued {
        self.issue(cn, &[], 30, ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn issue(&self, cn: &str, names: &[&str], days: i64, eku: ExtendedKeyUsagePurpose) -> Issued {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![eku];
        let now = time::OffsetDateTime::now_utc();
        p.not_before = now - time::Duration::days(1);
        p.not_after = now + time::Duration::days(days);
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl Issued {
    /// Write `<name>.crt` and `<name>.key`; returns their paths.
    pub fn write(&self, dir: &TempDir, name: &str) -> (PathBuf, PathBuf) {
        (
            dir.write(&format!("{name}.crt"), &self.cert_pem),
            dir.write(&format!("{name}.key"), &self.key_pem),
        )
    }
}

pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls client config trusting `ca_pem`, optionally with a client certificate.
pub fn client_config(
    ca_pem: &str,
    client: Option<&Issued>,
    alpn: &[&[u8]],
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut cfg = match client {
        Some(c) => {
            let chain: Vec<_> = CertificateDer::pem_slice_iter(c.cert_pem.as_bytes())
                .map(|c| c.unwrap())
                .collect();
            let key = PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        }
        None => b.with_no_client_auth(),
    };
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Arc::new(cfg)
}

/// A blocking TLS connection (handshake completed, or the handshake error).
pub fn connect(
    addr: SocketAddr,
    sni: &str,
    cfg: Arc<rustls::ClientConfig>,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let name = ServerName::try_from(sni.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(cfg, name).map_err(std::io::Error::other)?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    // TLS 1.3 servers reject a client certificate after the client's Finished; read once so
    // such an alert surfaces here rather than at the first request.
    Ok(s)
}

/// One HTTP/1.1 request over TLS (`Connection: close`), the reply.
pub fn h1(
    addr: SocketAddr,
    sni: &str,
    cfg: Arc<rustls::ClientConfig>,
    request: &[u8],
) -> std::io::Result<Reply> {
    let mut s = connect(addr, sni, cfg)?;
    s.write_all(request)?;
    s.flush()?;
    read_reply(&mut BufReader::new(s))
}

/// The leaf certificate the server presented, as DER.
pub fn presented_cert(addr: SocketAddr, sni: &str, cfg: Arc<rustls::ClientConfig>) -> Vec<u8> {
    let s = connect(addr, sni, cfg).unwrap();
    s.conn.peer_certificates().unwrap()[0].to_vec()
}

pub fn der_of(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// Run curl with these arguments (a 30 s cap); (exit status, stdout, stderr). Call
/// `support::programs::have(CURL)` first: a test without curl skips (or fails in CI).
pub fn curl(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "30"])
        .args(args)
        .output()
        .expect("curl runs (support::programs::have(CURL) said it is on PATH)");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A TLS listener YAML block for one certificate (with optional extra keys).
pub fn tls_listener(addr: SocketAddr, cert: &Path, key: &Path, extra: &str) -> String {
    format!(
        "{{ address: {addr}, tls: {{ certificates: [{{ cert: {}, key: {} }}]{extra} }} }}",
        cert.display(),
        key.display()
    )
}

pub mod gateway;
pub mod h2client;
pub mod upstreams;

#[allow(unused_imports)] // each test crate uses a different subset
pub use upstreams::{server_config, server_config_mtls, H2Upstream, Terminator};
