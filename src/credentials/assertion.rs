//! `private_key_jwt` client authentication (RFC 7523 §2.2, OpenID Connect Core §9): a short JWT
//! signed with the gateway's private key, `iss` = `sub` = the client id, `aud` = the token
//! endpoint, a fresh `jti`, valid for 60 seconds. jsonwebtoken signs (RustCrypto backend).

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use std::fmt;

use super::config::PrivateKeyJwt;

/// The assertion type of RFC 7523.
pub(crate) const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// A loaded private key and the algorithm it signs with.
pub(crate) struct Signer {
    key: EncodingKey,
    alg: Algorithm,
    kid: Option<String>,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Signer({:?}, key [redacted])", self.alg)
    }
}

impl Signer {
    /// Read and check the key: it must parse, fit `algorithm`, and sign.
    pub(crate) fn load(cfg: &PrivateKeyJwt) -> Result<Signer, String> {
        let path = cfg.key_file.display();
        let alg = match cfg.algorithm.as_str() {
            "RS256" => Algorithm::RS256,
            "RS384" => Algorithm::RS384,
            "RS512" => Algorithm::RS512,
            "PS256" => Algorithm::PS256,
            "ES256" => Algorithm::ES256,
            "ES384" => Algorithm::ES384,
            "EdDSA" => Algorithm::EdDSA,
            a => {
                return Err(format!(
                    "algorithm {a:?} is not one of RS256, RS384, RS512, PS256, ES256, ES384, EdDSA"
                ))
            }
        };
        let der = PrivateKeyDer::from_pem_file(&cfg.key_file)
            .map_err(|e| format!("{path}: not a readable PEM private key ({e})"))?;
        let rsa = matches!(
            alg,
            Algorithm::RS256 | Algorithm::RS384 | Algorithm::RS512 | Algorithm::PS256
        );
        let key = match (&der, rsa) {
            (PrivateKeyDer::Pkcs1(k), true) => EncodingKey::from_rsa_der(k.secret_pkcs1_der()),
            (PrivateKeyDer::Pkcs8(k), true) => {
                use rsa::pkcs1::EncodeRsaPrivateKey;
                use rsa::pkcs8::DecodePrivateKey;
                let k = rsa::PrivateKey::from_pkcs8_der(k.secret_pkcs8_der())
                    .map_err(|_| format!("{path}: {} needs an RSA key", cfg.algorithm))?;
                let pkcs1 = k.to_pkcs1_der().map_err(|e| format!("{path}: {e}"))?;
                EncodingKey::from_rsa_der(pkcs1.as_bytes())
            }
            (PrivateKeyDer::Pkcs8(k), false) if alg == Algorithm::EdDSA => {
                EncodingKey::from_ed_der(k.secret_pkcs8_der())
            }
            (PrivateKeyDer::Pkcs8(k), false) => EncodingKey::from_ec_der(k.secret_pkcs8_der()),
            _ => {
                return Err(format!(
                    "{path}: write the key as PKCS#8 (`openssl pkcs8 -topk8 -nocrypt -in key.pem -out key.p8.pem`)"
                ))
            }
        };
        let signer = Signer {
            key,
            alg,
            kid: cfg.kid.clone(),
        };
        signer
            .assertion("check", "https://check.invalid/token")
            .map_err(|_| {
                format!(
                    "{path}: the key cannot sign {} (a key of another type?)",
                    cfg.algorithm
                )
            })?;
        Ok(signer)
    }

    /// A fresh client assertion for `client_id` at `token_url`.
    pub(crate) fn assertion(&self, client_id: &str, token_url: &str) -> Result<String, String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let jti: [u8; 16] = rand::random();
        let claims = serde_json::json!({
            "iss": client_id,
            "sub": client_id,
            "aud": token_url,
            "iat": now,
            "exp": now + 60,
            "jti": crate::credentials::hex(&jti),
        });
        let mut header = Header::new(self.alg);
        header.kid = self.kid.clone();
        jsonwebtoken::encode(&header, &claims, &self.key).map_err(|e| e.to_string())
    }
}
