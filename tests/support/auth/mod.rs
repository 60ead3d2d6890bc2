//! Test support for the auth tests: the run-time test keys (shared with the unit tests), a tiny
//! loopback JWKS server whose key set and `Cache-Control` a test can change, and an `auth:`
//! config section, and the request and refusal checks the auth tests share. Everything stops
//! when dropped.
#![allow(dead_code)]

#[path = "../../../src/auth/testkeys.rs"]
pub mod testkeys;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::background::AcceptLoop;
use super::{call, call_headers, refs, Reply};

pub const ISS: &str = "https://issuer.test";

/// A JWKS served at `http://<addr>/jwks.json`.
pub struct JwksServer {
    pub addr: SocketAddr,
    body: Arc<Mutex<String>>,
    cache_control: Arc<Mutex<String>>,
    delay: Arc<Mutex<std::time::Duration>>,
    hits: Arc<AtomicUsize>,
    _server: AcceptLoop,
}

/// A private CA and a certificate for 127.0.0.1 / localhost signed by it: (CA PEM, TLS config).
pub fn test_tls() -> (String, Arc<rustls::ServerConfig>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (ca.pem(), Arc::new(cfg))
}

/// Read one request head and answer it with the current key set.
fn answer(stream: &mut (impl std::io::Read + Write), body: &Mutex<String>, cc: &Mutex<String>) {
    let mut r = BufReader::new(&mut *stream);
    let mut line = String::new();
    while r.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let body = body.lock().unwrap().clone();
    let cc = cc.lock().unwrap().clone();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/jwk-set+json\r\nCache-Control: {cc}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

impl JwksServer {
    pub fn start(jwks: String) -> JwksServer {
        Self::start_with(jwks, None)
    }

    /// Like [`JwksServer::start`], over TLS with this config (see [`test_tls`]).
    pub fn start_with(jwks: String, tls: Option<Arc<rustls::ServerConfig>>) -> JwksServer {
        let body = Arc::new(Mutex::new(jwks));
        let cache_control = Arc::new(Mutex::new("max-age=300".to_string()));
        let hits = Arc::new(AtomicUsize::new(0));
        let delay = Arc::new(Mutex::new(std::time::Duration::ZERO));
        let (b, c, h, d) = (
            body.clone(),
            cache_control.clone(),
            hits.clone(),
            delay.clone(),
        );
        let server = AcceptLoop::start(move |mut stream| {
            h.fetch_add(1, Ordering::SeqCst);
            // A slow issuer: the answer leaves this long after the connection was accepted.
            std::thread::sleep(*d.lock().unwrap());
            match &tls {
                Some(cfg) => {
                    let conn = rustls::ServerConnection::new(cfg.clone()).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, stream);
                    answer(&mut tls, &b, &c);
                    tls.conn.send_close_notify();
                    let _ = tls.conn.complete_io(&mut tls.sock);
                }
                None => answer(&mut stream, &b, &c),
            }
        });
        JwksServer {
            addr: server.addr,
            body,
            cache_control,
            delay,
            hits,
            _server: server,
        }
    }

    /// Answer each fetch this long after accepting it.
    pub fn set_delay(&self, delay: std::time::Duration) {
        *self.delay.lock().unwrap() = delay;
    }

    pub fn https_url(&self) -> String {
        format!("https://{}/jwks.json", self.addr)
    }

    pub fn url(&self) -> String {
        format!("http://{}/jwks.json", self.addr)
    }

    pub fn set(&self, jwks: String) {
        *self.body.lock().unwrap() = jwks;
    }

    pub fn set_cache_control(&self, cc: &str) {
        *self.cache_control.lock().unwrap() = cc.to_string();
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// The `auth:` section for a gateway whose resource URI is `resource`, keys from `jwks` (a YAML
/// flow mapping such as `{url: …}`), plus `extra` lines (indented by two spaces).
pub fn auth_yaml(resource: &str, jwks: &str, extra: &str) -> String {
    format!("auth:\n  resource: {resource}\n  issuer: {ISS}\n  jwks: {jwks}\n  leeway: 5s\n{extra}")
}

/// A loopback RFC 7662 endpoint at `http://<addr>/introspect`: answers from a token → JSON map
/// (unknown tokens are inactive), counts requests and records the `Authorization` it saw.
pub struct IntrospectServer {
    pub addr: SocketAddr,
    pub answers: Arc<Mutex<std::collections::HashMap<String, serde_json::Value>>>,
    hits: Arc<AtomicUsize>,
    pub last_authorization: Arc<Mutex<Option<String>>>,
    _server: AcceptLoop,
}

impl IntrospectServer {
    pub fn start() -> IntrospectServer {
        let answers: Arc<Mutex<std::collections::HashMap<String, serde_json::Value>>> =
            Arc::default();
        let hits = Arc::new(AtomicUsize::new(0));
        let last_authorization = Arc::new(Mutex::new(None));
        let (a, h, la) = (answers.clone(), hits.clone(), last_authorization.clone());
        let server = AcceptLoop::start(move |mut stream| {
            h.fetch_add(1, Ordering::SeqCst);
            let mut r = BufReader::new(stream.try_clone().unwrap());
            let (mut line, mut len) = (String::new(), 0usize);
            while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                if lower.starts_with("authorization:") {
                    *la.lock().unwrap() = Some(line[14..].trim().to_string());
                }
                line.clear();
            }
            let mut body = vec![0u8; len];
            let _ = std::io::Read::read_exact(&mut r, &mut body);
            let body = String::from_utf8_lossy(&body).to_string();
            let token = body
                .split('&')
                .find_map(|kv| kv.strip_prefix("token="))
                .unwrap_or("")
                .to_string();
            let answer = a
                .lock()
                .unwrap()
                .get(&token)
                .cloned()
                .unwrap_or(serde_json::json!({"active": false}))
                .to_string();
            let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
        });
        IntrospectServer {
            addr: server.addr,
            answers,
            hits,
            last_authorization,
            _server: server,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/introspect", self.addr)
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A `jwks:` section fetching from `s`, quick to refetch for the key-rotation tests.
pub fn url_jwks(s: &JwksServer) -> String {
    format!(
        "{{url: {}, min_refresh: 1s, unknown_kid_interval: 200ms}}",
        s.url()
    )
}

/// POST a tools/call of `name` (claimed and in the body), with these extra headers and path.
pub fn call_as(
    gw: &mcp_edge::gateway::RunningGateway,
    path: &str,
    token: Option<&str>,
    claimed: &str,
    body_name: &str,
    id: u64,
) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut h = call_headers(claimed);
    if let Some(a) = auth {
        h.push(("Authorization", a));
    }
    super::http::request(
        gw.mcp_addr,
        "POST",
        path,
        &refs(&h),
        call(id, body_name).as_bytes(),
    )
}

/// An auth refusal: its status, `WWW-Authenticate` challenge and JSON-RPC error, from the gateway
/// itself (no instance named).
pub fn expect_refusal(r: &Reply, status: u16, code: i64, id: u64, challenge: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(
        r.header("www-authenticate"),
        Some(challenge),
        "{}",
        r.text()
    );
    let v = r.json();
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], id, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(r.header("x-mcp-edge-upstream").is_none());
}
