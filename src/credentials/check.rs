//! The checks of `pools.<name>.credentials` serde cannot make (run by `mcp-edge check`, at
//! start and on reload): one mode, the keys each needs, URLs, and the secrets and signing keys
//! themselves read (with [`super::secret`] and [`super::assertion`]), so a missing or empty one
//! is refused before it is needed, never printed.

use super::config::{CredentialsConfig, Mode, OAuthClientConfig, SecretSource, StaticCredential};

/// The checks serde cannot make, for pool `pool`: one error as (key path, message with the fix).
pub(crate) fn check(
    pool: &str,
    c: &CredentialsConfig,
    has_auth: bool,
) -> Result<(), (String, String)> {
    let at = |k: &str| format!("pools.{pool}.credentials{k}");
    let Some(mode) = c.mode() else {
        return Err((at(""), format!(
            "pools.{pool}.credentials: give exactly one of static:, client_credentials: or token_exchange:"
        )));
    };
    match mode {
        Mode::Static => {
            let s = c.fixed.as_ref().expect("static mode");
            check_static(&at(".static"), s)
        }
        Mode::ClientCredentials => {
            let o = c.client_credentials.as_ref().expect("mode");
            check_oauth(&at(".client_credentials"), o, false)
        }
        Mode::TokenExchange => {
            if !has_auth {
                return Err((at(".token_exchange"), format!(
                    "pools.{pool}.credentials.token_exchange: exchanges the verified caller's token, so it needs an auth: section (or use client_credentials)"
                )));
            }
            let o = c.token_exchange.as_ref().expect("mode");
            check_oauth(&at(".token_exchange"), o, true)
        }
    }
}

fn check_static(at: &str, s: &StaticCredential) -> Result<(), (String, String)> {
    let Ok(name) = http::HeaderName::from_bytes(s.header.as_bytes()) else {
        return Err((
            format!("{at}.header"),
            format!("{at}.header: {:?} is not a valid header name", s.header),
        ));
    };
    let reserved = crate::mcp::header::is_checked(name.as_str());
    if reserved && name != http::header::AUTHORIZATION {
        return Err((format!("{at}.header"), format!(
            "{at}.header: {name} is a header the gateway checks or routes on; name the header the server reads its key from, e.g. x-api-key or authorization"
        )));
    }
    let secret = read_secret(&format!("{at}.secret"), &s.secret)?;
    let scheme = s.scheme.as_deref().unwrap_or("");
    if http::HeaderValue::from_str(&format!("{scheme} {secret}")).is_err() {
        return Err((
            format!("{at}.secret"),
            format!("{at}.secret: the secret holds characters a header cannot carry (control characters or non-ASCII); store it as printable text"),
        ));
    }
    Ok(())
}

fn check_oauth(at: &str, o: &OAuthClientConfig, exchange: bool) -> Result<(), (String, String)> {
    let loopback = |u: &str| {
        ["http://127.", "http://localhost", "http://[::1]"]
            .iter()
            .any(|p| u.starts_with(p))
    };
    if !(o.token_url.starts_with("https://") || loopback(&o.token_url)) {
        return Err((format!("{at}.token_url"), format!(
            "{at}.token_url: {:?} must be an https:// URL (http:// only on loopback: the request carries the client's credentials)",
            o.token_url
        )));
    }
    if o.client_id.is_empty() {
        return Err((
            format!("{at}.client_id"),
            format!("{at}.client_id: name the client the gateway is at the authorization server"),
        ));
    }
    match (&o.client_secret, &o.private_key_jwt) {
        (Some(s), None) => {
            read_secret(&format!("{at}.client_secret"), s)?;
        }
        (None, Some(k)) => {
            super::assertion::Signer::load(k)
                .map_err(|e| (format!("{at}.private_key_jwt.key_file"), format!("{at}.private_key_jwt: {e}")))?;
        }
        _ => {
            return Err((at.to_string(), format!(
                "{at}: give exactly one of client_secret: {{file: …}} / {{env: …}} or private_key_jwt: {{key_file: …}}"
            )))
        }
    }
    if o.audience.is_none() && o.resource.is_none() {
        return Err((at.to_string(), format!(
            "{at}: name what the token is for with audience: and/or resource: (the pool's URI), so that no instance receives a token minted for another audience"
        )));
    }
    if o.timeout.is_zero() {
        return Err((
            format!("{at}.timeout"),
            format!("{at}.timeout: must be above 0s, e.g. 5s"),
        ));
    }
    if !exchange && o.cache_size.is_some() {
        return Err((format!("{at}.cache_size"), format!(
            "{at}.cache_size: only token_exchange keeps one token per caller; remove it (client credentials keep one token)"
        )));
    }
    if o.cache_size == Some(0) {
        return Err((
            format!("{at}.cache_size"),
            format!("{at}.cache_size: must be at least 1"),
        ));
    }
    Ok(())
}

/// Read a secret as validation does: refused when absent or empty, with the fix. The value is
/// returned to the caller only to check its shape; it never enters a message.
pub(crate) fn read_secret(at: &str, s: &SecretSource) -> Result<String, (String, String)> {
    super::secret::read(s)
        .map(|s| s.expose().to_string())
        .map_err(|e| (at.to_string(), format!("{at}: {e}")))
}
