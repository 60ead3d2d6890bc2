//! A real authorization server on loopback for the credentials tests: node-oidc-provider
//! (`as.mjs`, pinned in `package.json` / `package-lock.json`), installed by `.ci/run` into
//! `target/oidc` (or `$MCP_EDGE_OIDC_DIR`). When node or the package is absent,
//! [`AuthServer::start`] says so loudly and returns `None` (the test skips), unless
//! `MCP_EDGE_REQUIRE_PEERS=1`, which makes it a failure (`support::programs::missing`).
//! The process is killed and reaped when the [`AuthServer`] is dropped; [`AuthServer::stop`]
//! and [`AuthServer::restart`] take it down and bring it back on the same port and keys.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support;

/// Where the package is installed.
pub fn dir() -> PathBuf {
    std::env::var_os("MCP_EDGE_OIDC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/oidc"))
}

const INSTALL: &str = "scripts/ci-local.sh (or: mkdir -p target/oidc && cp tests/oidc/package*.json target/oidc/ && (cd target/oidc && npm ci))";

/// The program, copied next to its `node_modules` so that its imports resolve.
fn script() -> PathBuf {
    let target = dir().join("as.mjs");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oidc/as.mjs");
    let text = std::fs::read(src).unwrap();
    if std::fs::read(&target).ok().as_deref() != Some(text.as_slice()) {
        let tmp = dir().join(format!("as.mjs.{}", std::process::id()));
        std::fs::write(&tmp, &text).unwrap();
        std::fs::rename(&tmp, &target).unwrap();
    }
    target
}

pub struct AuthServer {
    pub port: u16,
    env: Vec<(&'static str, String)>,
    child: Option<Child>,
    key_dir: PathBuf,
}

impl AuthServer {
    /// Start it: `edge_resource` is the gateway's own resource (subject tokens must be for it),
    /// `resources` maps resource URIs to `{scope, ttl}`, `clients` is oidc-provider client
    /// metadata. `None`: not installed (skipped loudly).
    pub fn start(edge_resource: &str, resources: &Value, clients: &Value) -> Option<AuthServer> {
        if !support::programs::have(support::programs::NODE) {
            return None;
        }
        let pkg = dir().join("node_modules/oidc-provider/package.json");
        if !pkg.exists() {
            support::programs::missing(&format!("{} is missing", pkg.display()), INSTALL);
            return None;
        }
        let port = support::free_port();
        let key_dir =
            std::env::temp_dir().join(format!("mcp-edge-as-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&key_dir).unwrap();
        let env = vec![
            ("PORT", port.to_string()),
            ("KEY_FILE", key_dir.join("key.json").display().to_string()),
            ("EDGE_RESOURCE", edge_resource.to_string()),
            ("RESOURCES", resources.to_string()),
            ("CLIENTS", clients.to_string()),
        ];
        let mut s = AuthServer {
            port,
            env,
            child: None,
            key_dir,
        };
        s.restart();
        Some(s)
    }

    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn token_url(&self) -> String {
        format!("{}/token", self.issuer())
    }

    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.issuer())
    }

    /// Take it down (the port then refuses connections).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// (Re)start it on the same port with the same signing key; returns once it listens.
    pub fn restart(&mut self) {
        self.stop();
        let mut c = Command::new("node");
        c.arg(script())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().expect("node starts");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        self.child = Some(child);
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) if l.starts_with("ready") => {}
            other => panic!("the authorization server did not start: {other:?}"),
        }
    }

    fn post_form(&self, basic: (&str, &str), form: &str) -> support::Reply {
        use base64::Engine as _;
        let b64 =
            base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", basic.0, basic.1));
        let auth = format!("Basic {b64}");
        let addr = format!("127.0.0.1:{}", self.port).parse().unwrap();
        let headers = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ];
        support::http::request(addr, "POST", "/token", &headers, form.as_bytes())
    }

    /// An access token for `client` (client credentials) for `resource` with `scope`: how the
    /// tests' callers get their edge tokens (`sub` is the client id).
    pub fn client_token(&self, client: &str, secret: &str, resource: &str, scope: &str) -> String {
        let form = format!(
            "grant_type=client_credentials&resource={}&scope={}",
            enc(resource),
            enc(scope)
        );
        let r = self.post_form((client, secret), &form);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["access_token"].as_str().unwrap().to_string()
    }

    /// Tokens issued so far: `{"client_credentials": {client: n}, "<token exchange>": {client: n}}`.
    pub fn counts(&self) -> Value {
        let addr = format!("127.0.0.1:{}", self.port).parse().unwrap();
        support::http::request(addr, "GET", "/test/counts", &[], b"").json()
    }

    pub fn issued(&self, grant: &str, client: &str) -> u64 {
        self.counts()[grant][client].as_u64().unwrap_or(0)
    }

    /// The published key set.
    pub fn jwks(&self) -> jsonwebtoken::jwk::JwkSet {
        let addr = format!("127.0.0.1:{}", self.port).parse().unwrap();
        let r = support::http::request(addr, "GET", "/jwks", &[], b"");
        serde_json::from_slice(r.body.as_ref()).unwrap()
    }

    /// Verify `token` as an instance would: signed by this server's keys, for `audience`.
    pub fn verify(&self, token: &str, audience: &str) -> Value {
        let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
        let jwks = self.jwks();
        let kid = jsonwebtoken::decode_header(token).unwrap().kid.unwrap();
        let jwk = jwks.find(&kid).expect("the token's key is published");
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
        let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        v.set_audience(&[audience]);
        v.set_issuer(&[self.issuer()]);
        jsonwebtoken::decode::<Value>(token, &key, &v)
            .unwrap_or_else(|e| panic!("the token does not verify for {audience}: {e}"))
            .claims
    }
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.key_dir);
    }
}
