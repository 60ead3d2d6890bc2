//! Test-only: key pairs made at run time (RSA 2048, P-256, Ed25519), their JWKS, and tokens
//! signed with them, including the bad ones (`none`, HS256 keyed with the public key, tampered).
//! Compiled into the library's unit tests and included by path into the integration tests.
#![allow(dead_code)]

use base64::Engine as _;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rand::RngCore;
use serde_json::{json, Value};

pub(crate) struct TestKey {
    pub kid: String,
    pub alg: Algorithm,
    pub enc: EncodingKey,
    /// The public JWK (with `kid`, `alg` and `use`).
    pub jwk: Value,
    /// The public key's DER bytes (what an HS256 forger would use as the secret).
    pub public_der: Vec<u8>,
}

fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    b
}

fn finish(kid: &str, alg: Algorithm, enc: EncodingKey, public_der: Vec<u8>) -> TestKey {
    let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    let mut v = if alg == Algorithm::EdDSA {
        // jsonwebtoken derives OKP JWKs from v1 PKCS#8 only; the public key is at hand anyway.
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&public_der);
        json!({ "kty": "OKP", "crv": "Ed25519", "x": x, "alg": "EdDSA" })
    } else {
        serde_json::to_value(Jwk::from_encoding_key(&enc, alg).expect("public JWK")).unwrap()
    };
    v["kid"] = json!(kid);
    v["use"] = json!("sig");
    TestKey {
        kid: kid.to_string(),
        alg,
        enc,
        jwk: v,
        public_der,
    }
}

pub(crate) fn rsa(kid: &str) -> TestKey {
    use rsa::pkcs1::EncodeRsaPrivateKey;
    use rsa::pkcs8::EncodePublicKey;
    use rsa::Generate;
    let key = rsa::PrivateKey::generate();
    let der = key.to_pkcs1_der().unwrap();
    let public = key.to_public_key().to_public_key_der().unwrap();
    finish(
        kid,
        Algorithm::RS256,
        EncodingKey::from_rsa_der(der.as_bytes()),
        public.as_bytes().to_vec(),
    )
}

pub(crate) fn ec(kid: &str) -> TestKey {
    use p256::pkcs8::{EncodePrivateKey, EncodePublicKey};
    let key = loop {
        if let Ok(k) = p256::SecretKey::from_slice(&random32()) {
            break k;
        }
    };
    let der = key.to_pkcs8_der().unwrap();
    let public = key.public_key().to_public_key_der().unwrap();
    finish(
        kid,
        Algorithm::ES256,
        EncodingKey::from_ec_der(der.as_bytes()),
        public.as_bytes().to_vec(),
    )
}

pub(crate) fn ed(kid: &str) -> TestKey {
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    let key = ed25519_dalek::SigningKey::from_bytes(&random32());
    let der = key.to_pkcs8_der().unwrap();
    let public = key.verifying_key().to_bytes().to_vec();
    finish(
        kid,
        Algorithm::EdDSA,
        EncodingKey::from_ed_der(der.as_bytes()),
        public,
    )
}

/// A JWKS document with these keys.
pub(crate) fn jwks(keys: &[&TestKey]) -> String {
    json!({ "keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>() }).to_string()
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Claims valid for an hour.
pub(crate) fn claims(iss: &str, aud: &str, sub: &str, scope: &str) -> Value {
    json!({ "iss": iss, "aud": aud, "sub": sub, "scope": scope, "iat": now(), "exp": now() + 3600 })
}

pub(crate) fn sign(key: &TestKey, claims: &Value) -> String {
    let mut h = Header::new(key.alg);
    h.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&h, claims, &key.enc).unwrap()
}

/// HS256 keyed with the public key's bytes (the classic algorithm-confusion forgery).
pub(crate) fn forge_hs256(key: &TestKey, claims: &Value) -> String {
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some(key.kid.clone());
    let secret = EncodingKey::from_secret(&key.public_der).unwrap();
    jsonwebtoken::encode(&h, claims, &secret).unwrap()
}

/// `alg: none`, no signature.
pub(crate) fn unsigned(kid: &str, claims: &Value) -> String {
    let b = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.",
        b(&json!({"alg": "none", "typ": "JWT", "kid": kid})),
        b(claims)
    )
}

/// The same token with its payload changed (the signature no longer matches).
pub(crate) fn tamper(token: &str, claims: &Value) -> String {
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    parts[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
    parts.join(".")
}
