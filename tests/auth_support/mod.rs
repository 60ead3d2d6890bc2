//! Test support for the auth tests: the run-time test keys (shared with the unit tests), a tiny
//! loopback JWKS server whose key set and `Cache-Control` a test can change, and an `auth:`
//! config section. Everything stops when dropped.
#![allow(dead_code)]

#[path = "../../src/auth/testkeys.rs"]
pub mod testkeys;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const ISS: &str = "https://issuer.test";

/// A JWKS served at `http://<addr>/jwks.json`.
pub struct JwksServer {
    pub addr: SocketAddr,
    body: Arc<Mutex<String>>,
    cache_control: Arc<Mutex<String>>,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl JwksServer {
    pub fn start(jwks: String) -> JwksServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let body = Arc::new(Mutex::new(jwks));
        let cache_control = Arc::new(Mutex::new("max-age=300".to_string()));
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, c, h, s) = (
            body.clone(),
            cache_control.clone(),
            hits.clone(),
            stop.clone(),
        );
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((mut stream, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                let mut r = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                h.fetch_add(1, Ordering::SeqCst);
                let body = b.lock().unwrap().clone();
                let cc = c.lock().unwrap().clone();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/jwk-set+json\r\nCache-Control: {cc}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        JwksServer {
            addr,
            body,
            cache_control,
            hits,
            stop,
            thread: Some(thread),
        }
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

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The `auth:` section for a gateway whose resource URI is `resource`, keys from `jwks` (a YAML
/// flow mapping such as `{url: …}`), plus `extra` lines (indented by two spaces).
pub fn auth_yaml(resource: &str, jwks: &str, extra: &str) -> String {
    format!("auth:\n  resource: {resource}\n  issuer: {ISS}\n  jwks: {jwks}\n  leeway: 5s\n{extra}")
}
