//! `private_key_jwt` client authentication against node-oidc-provider (`tests/oidc/`): the
//! gateway signs its client assertion with an RSA key (PKCS#8 PEM, rewritten as PKCS#1 for
//! signing) and with a P-256 key; the authorization server verifies it against the client's
//! registered JWKS and issues the pool's token. A key that does not fit its algorithm is refused
//! at check time.

use crate::support::*;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey};
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};

const EDGE: &str = "https://edge.test/mcp";
const API: &str = "https://api.internal/mcp";

/// (PKCS#8 PEM, public JWK) of a fresh RSA key and of a fresh P-256 key.
fn keys() -> [(String, Value); 2] {
    use p256::pkcs8::EncodePrivateKey as _;
    use rsa::pkcs1::EncodeRsaPrivateKey as _;
    use rsa::Generate as _;
    let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    let lf = rsa::pkcs8::LineEnding::LF;
    let r = rsa::PrivateKey::generate();
    let rsa_pem = r.to_pkcs8_pem(lf).unwrap().to_string();
    let rsa_enc = EncodingKey::from_rsa_der(r.to_pkcs1_der().unwrap().as_bytes());
    let rsa_jwk = Jwk::from_encoding_key(&rsa_enc, Algorithm::RS256).unwrap();
    let e = loop {
        if let Ok(k) = p256::SecretKey::from_slice(&rand::random::<[u8; 32]>()) {
            break k;
        }
    };
    let der = e.to_pkcs8_der().unwrap();
    let ec_pem = e.to_pkcs8_pem(lf).unwrap().to_string();
    let ec_jwk =
        Jwk::from_encoding_key(&EncodingKey::from_ec_der(der.as_bytes()), Algorithm::ES256)
            .unwrap();
    let v = |j: Jwk, kid: &str| {
        let mut v = serde_json::to_value(j).unwrap();
        v["kid"] = json!(kid);
        v
    };
    [
        (rsa_pem, v(rsa_jwk, "gw-rsa")),
        (ec_pem, v(ec_jwk, "gw-ec")),
    ]
}

#[test]
fn private_key_jwt_authenticates_the_gateway_with_rsa_and_ec_keys() {
    let [(rsa_pem, rsa_jwk), (ec_pem, ec_jwk)] = keys();
    let client = |id: &str, jwk: &Value| {
        json!({"client_id": id, "token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [jwk]},
               "grant_types": ["client_credentials"], "redirect_uris": [], "response_types": []})
    };
    let resources =
        json!({ EDGE: {"scope": "mcp", "ttl": 300}, API: {"scope": "api:read", "ttl": 60} });
    let clients = json!([client("gw-rsa", &rsa_jwk), client("gw-ec", &ec_jwk)]);
    let Some(a) = crate::oidc::AuthServer::start(EDGE, &resources, &clients) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("mcp-edge-jwt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (rsa_file, ec_file) = (dir.join("rsa.pem"), dir.join("ec.pem"));
    std::fs::write(&rsa_file, rsa_pem).unwrap();
    std::fs::write(&ec_file, ec_pem).unwrap();
    let up = Upstreams::start(1);
    let pool = |name: &str, id: &str, file: &std::path::Path, alg: &str| {
        format!(
            "  {name}:\n    instances: [{}]\n    health: {{check: off}}\n    credentials:\n      client_credentials:\n        token_url: {}\n        client_id: {id}\n        private_key_jwt: {{ key_file: {}, algorithm: {alg}, kid: {id} }}\n        resource: {API}\n        scopes: [api:read]\n",
            up.addrs[0],
            a.token_url(),
            file.display()
        )
    };
    let y = format!(
        "work_stealing: true\nlisten: {{mcp: 127.0.0.1:{}, admin: 127.0.0.1:{}}}\npools:\n{}{}routes:\n  - {{ match: {{name: \"ec_*\"}}, pool: ec }}\ndefault_route: {{pool: rsa}}\n",
        free_port(),
        free_port(),
        pool("rsa", "gw-rsa", &rsa_file, "RS256"),
        pool("ec", "gw-ec", &ec_file, "ES256"),
    );
    let gw = RunningGateway::start(Config::parse(&y, "jwt.yaml").unwrap()).unwrap();
    for (i, (name, sub)) in [("echo", "gw-rsa"), ("ec_echo", "gw-ec")]
        .into_iter()
        .enumerate()
    {
        let h = call_headers(name);
        let r = crate::support::http::request(
            gw.mcp_addr,
            "POST",
            "/mcp",
            &refs(&h),
            call(i as u64, name).as_bytes(),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let rec = up.received().pop().unwrap();
        let auth = rec
            .headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let claims = a.verify(auth.strip_prefix("Bearer ").unwrap(), API);
        assert_eq!(claims["sub"], sub);
    }

    // A key that does not fit its algorithm: refused at check time, naming the key and the fix.
    let bad = y.replacen("algorithm: RS256", "algorithm: EdDSA", 1);
    let e = Config::parse(&bad, "jwt.yaml").unwrap_err().to_string();
    assert!(
        e.contains("pools.rsa.credentials.client_credentials.private_key_jwt"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
