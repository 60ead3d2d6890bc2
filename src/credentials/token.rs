//! One token request at an OAuth token endpoint: the client credentials grant (RFC 6749 §4.4)
//! or token exchange (RFC 8693 §2.1), the client authenticated by HTTP Basic
//! (`client_secret_basic`) or a signed assertion (`private_key_jwt`), `audience`, `resource`
//! (RFC 8707) and `scope` as configured; then the answer judged: a bearer `access_token`, its
//! lifetime, or why there is none ([`Failure`]: the endpoint down, slow, refusing, or talking
//! nonsense). No request or answer body is ever logged: both carry credentials.

use base64::Engine as _;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::assertion::{Signer, ASSERTION_TYPE};
use super::config::OAuthClientConfig;
use super::secret::{self, Secret};
use crate::fetch::{self, form_encode};

/// RFC 8693's type for access tokens (the subject token, and the token asked for).
pub(crate) const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
pub(crate) const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// Lifetime assumed when an answer has no `expires_in` (RFC 6749 makes it optional).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);

/// A token obtained for a pool: the header value that carries it (marked sensitive, so even
/// `http`'s `Debug` hides it), when to replace it, and until when it may still be sent.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub header: http::HeaderValue,
    pub refresh_at: Instant,
    pub valid_until: Instant,
}

impl Token {
    /// `value` (checked to be a header value) with `lifetime` from `now`: refreshed
    /// `refresh_before` ahead of its end (or at half its life, if it is shorter), sent until
    /// shortly before it ends.
    pub(crate) fn new(
        value: &str,
        lifetime: Duration,
        refresh_before: Duration,
        now: Instant,
    ) -> Option<Token> {
        let mut header = http::HeaderValue::from_str(&format!("Bearer {value}")).ok()?;
        header.set_sensitive(true);
        let margin = lifetime.saturating_sub(refresh_before).max(lifetime / 2);
        let slack = (lifetime / 10).min(Duration::from_secs(1));
        Some(Token {
            header,
            refresh_at: now + margin,
            valid_until: now + lifetime - slack,
        })
    }
}

/// Why no token was obtained. [`Failure::status`] is what the client is answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// The endpoint could not be reached (connect, TLS, a broken exchange).
    Unreachable(String),
    /// No answer within `timeout`.
    Timeout(String),
    /// The endpoint answered with an OAuth error (`error`, as the metric and client see it).
    Refused { status: u16, error: String },
    /// The answer was not a usable token response.
    Invalid(String),
    /// A secret could not be read, or an assertion signed.
    Local(String),
}

impl Failure {
    /// The metric label.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Failure::Unreachable(_) => "unreachable",
            Failure::Timeout(_) => "timeout",
            Failure::Refused { .. } => "refused",
            Failure::Invalid(_) => "invalid_response",
            Failure::Local(_) => "local",
        }
    }

    /// 503 (retry later) when the endpoint is down or slow, 502 when it answered wrongly.
    pub(crate) fn status(&self) -> u16 {
        match self {
            Failure::Unreachable(_) | Failure::Timeout(_) => 503,
            _ => 502,
        }
    }

    /// For the log line (never holds a credential).
    pub(crate) fn describe(&self) -> String {
        match self {
            Failure::Unreachable(e)
            | Failure::Timeout(e)
            | Failure::Invalid(e)
            | Failure::Local(e) => e.clone(),
            Failure::Refused { status, error } => {
                format!("refused with HTTP {status} error={error}")
            }
        }
    }
}

/// A client of one token endpoint, as one pool's `credentials` configure it.
pub(crate) struct Client {
    pub cfg: OAuthClientConfig,
    auth: ClientAuth,
    tls: Arc<rustls::ClientConfig>,
}

enum ClientAuth {
    /// The `Authorization: Basic` value (RFC 6749 §2.3.1: both parts form-encoded).
    Basic(Secret),
    Assertion(Signer),
}

impl Client {
    /// Read the client's secret or key now (on load and every reload).
    pub(crate) fn new(cfg: &OAuthClientConfig) -> Result<Client, String> {
        let auth = match (&cfg.client_secret, &cfg.private_key_jwt) {
            (Some(s), _) => {
                let secret = secret::read(s)?;
                let pair = format!(
                    "{}:{}",
                    form_encode(&cfg.client_id),
                    form_encode(secret.expose())
                );
                let b64 = base64::engine::general_purpose::STANDARD.encode(pair);
                ClientAuth::Basic(Secret::new(format!("Basic {b64}")))
            }
            (None, Some(k)) => ClientAuth::Assertion(Signer::load(k)?),
            (None, None) => return Err("no client authentication configured".into()),
        };
        let tls = fetch::tls_config(cfg.ca_file.as_deref()).map_err(|e| e.to_string())?;
        Ok(Client {
            cfg: cfg.clone(),
            auth,
            tls,
        })
    }

    /// A client credentials token for the configured audience.
    pub(crate) async fn client_credentials(&self) -> Result<Token, Failure> {
        self.request("grant_type=client_credentials".to_string())
            .await
    }

    /// `subject` (the caller's access token) exchanged for one for the configured audience.
    pub(crate) async fn exchange(&self, subject: &str) -> Result<Token, Failure> {
        let form = format!(
            "grant_type={}&subject_token={}&subject_token_type={}&requested_token_type={}",
            form_encode(TOKEN_EXCHANGE_GRANT),
            form_encode(subject),
            form_encode(ACCESS_TOKEN_TYPE),
            form_encode(ACCESS_TOKEN_TYPE),
        );
        self.request(form).await
    }

    async fn request(&self, mut form: String) -> Result<Token, Failure> {
        let c = &self.cfg;
        for (k, v) in [("audience", &c.audience), ("resource", &c.resource)] {
            if let Some(v) = v {
                form.push_str(&format!("&{k}={}", form_encode(v)));
            }
        }
        if !c.scopes.is_empty() {
            form.push_str(&format!("&scope={}", form_encode(&c.scopes.join(" "))));
        }
        let authorization = match &self.auth {
            ClientAuth::Basic(b) => Some(b.expose().to_string()),
            ClientAuth::Assertion(s) => {
                let jwt = s
                    .assertion(&c.client_id, &c.token_url)
                    .map_err(Failure::Local)?;
                form.push_str(&format!(
                    "&client_id={}&client_assertion_type={}&client_assertion={jwt}",
                    form_encode(&c.client_id),
                    form_encode(ASSERTION_TYPE)
                ));
                None
            }
        };
        let out = fetch::Outgoing {
            method: http::Method::POST,
            authorization,
            form: Some(form),
        };
        let url = c.token_url.as_str();
        let answer = fetch::send_status(url, c.timeout, &self.tls, out)
            .await
            .map_err(|e| match e {
                fetch::SendError::Timeout => {
                    Failure::Timeout(format!("{url}: no answer within {:?}", c.timeout))
                }
                fetch::SendError::Failed(e) => Failure::Unreachable(format!("{url}: {e}")),
            })?;
        judge(
            url,
            answer.status,
            &answer.body,
            c.refresh_before,
            Instant::now(),
        )
    }
}

/// The token in a token endpoint's answer, or why there is none.
pub(crate) fn judge(
    url: &str,
    status: http::StatusCode,
    body: &[u8],
    refresh_before: Duration,
    now: Instant,
) -> Result<Token, Failure> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if status != http::StatusCode::OK {
        // RFC 6749 §5.2: {"error": "invalid_client", ...}. Only the code is kept: bounded, and
        // never a credential.
        let error = json
            .as_ref()
            .and_then(|v| v.get("error")?.as_str().map(String::from))
            .filter(|e| e.len() <= 64 && e.bytes().all(|b| b.is_ascii_graphic()))
            .unwrap_or_else(|| "none".into());
        return Err(Failure::Refused {
            status: status.as_u16(),
            error,
        });
    }
    let Some(Value::Object(o)) = json else {
        return Err(Failure::Invalid(format!(
            "{url}: the answer is not a JSON object"
        )));
    };
    let Some(token) = o
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return Err(Failure::Invalid(format!(
            "{url}: the answer has no access_token"
        )));
    };
    let kind = o.get("token_type").and_then(Value::as_str).unwrap_or("");
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(Failure::Invalid(format!(
            "{url}: token_type {kind:?} is not Bearer (sender-constrained tokens are not supported)"
        )));
    }
    if let Some(t) = o.get("issued_token_type").and_then(Value::as_str) {
        if t != ACCESS_TOKEN_TYPE {
            return Err(Failure::Invalid(format!(
                "{url}: issued_token_type {t:?} is not an access token"
            )));
        }
    }
    let lifetime = match o.get("expires_in") {
        Some(v) => match v.as_f64() {
            Some(s) if s >= 1.0 => Duration::from_secs(s as u64),
            _ => {
                return Err(Failure::Invalid(format!(
                    "{url}: expires_in is not a positive number of seconds"
                )))
            }
        },
        None => DEFAULT_LIFETIME,
    };
    Token::new(token, lifetime, refresh_before, now).ok_or_else(|| {
        Failure::Invalid(format!(
            "{url}: the access_token holds characters a header cannot carry"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:1/token";

    #[test]
    fn a_token_answer_is_judged() {
        let now = Instant::now();
        let ok = br#"{"access_token":"abc","token_type":"bearer","expires_in":100}"#;
        let t = judge(URL, http::StatusCode::OK, ok, Duration::from_secs(30), now).unwrap();
        assert_eq!(t.header.to_str().unwrap(), "Bearer abc");
        assert!(format!("{t:?}").contains("Sensitive") && !format!("{t:?}").contains("abc"));
        assert_eq!(t.refresh_at - now, Duration::from_secs(70));
        assert_eq!(t.valid_until - now, Duration::from_secs(99));
        let short = br#"{"access_token":"abc","token_type":"Bearer","expires_in":4}"#;
        let t = judge(
            URL,
            http::StatusCode::OK,
            short,
            Duration::from_secs(30),
            now,
        )
        .unwrap();
        assert_eq!(
            t.refresh_at - now,
            Duration::from_secs(2),
            "half its life when shorter than the margin"
        );
        let refused = br#"{"error":"invalid_client","error_description":"bad secret s3cr3t"}"#;
        let e = judge(
            URL,
            http::StatusCode::UNAUTHORIZED,
            refused,
            Duration::ZERO,
            now,
        )
        .unwrap_err();
        assert_eq!(
            e,
            Failure::Refused {
                status: 401,
                error: "invalid_client".into()
            }
        );
        assert!(!e.describe().contains("s3cr3t"));
        for bad in [
            &br#"{"token_type":"Bearer"}"#[..],
            br#"{"access_token":"a","token_type":"DPoP"}"#,
            b"<html>",
        ] {
            let e = judge(URL, http::StatusCode::OK, bad, Duration::ZERO, now).unwrap_err();
            assert_eq!(e.reason(), "invalid_response");
            assert_eq!(e.status(), 502);
        }
    }
}
