//! What the bridge reads of a 2025-era request's head: the path, the session id, the
//! `Authorization` and who it names (with auth on, the token's issuer and subject), the
//! client's address, and whether another replica sent
//! the request on; and the checks its head must pass before its body ([`head_ok`]).

use super::session::{caller_of, caller_of_subject};
use crate::auth::answer::Refusal;
use crate::auth::Auth;
use crate::mcp::legacy::{SESSION_ID, SESSION_ID_NAME};
use crate::mcp::{codes, Rejection};

/// What the bridge reads of a legacy request's head.
#[derive(Clone)]
pub(crate) struct Input {
    pub path: String,
    pub session_id: Option<String>,
    pub authorization: Option<String>,
    pub caller: String,
    /// The client's address (limits keyed on `client_ip` see it through the hop).
    pub client_ip: Option<std::net::IpAddr>,
    /// Set when another replica sent this answer on (it is never sent on again).
    pub hopped: bool,
}

/// The header a replica sets on an answer it sends on to the replica holding the call.
pub(crate) const HOPPED: &str = "mcp-edge-answer-hop";

impl Input {
    /// Read a legacy request's `headers` on `path`. With `auth`, the caller is who the token
    /// stands for (its issuer and subject), not the token's bytes, so a refreshed token keeps
    /// its session; `Err`: auth refuses the token (the pipeline would too).
    pub(crate) async fn read(
        headers: &http::HeaderMap,
        path: &str,
        client_ip: Option<std::net::IpAddr>,
        auth: Option<&Auth>,
    ) -> Result<Input, Refusal> {
        let get = |n: http::HeaderName| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let authorization = get(http::header::AUTHORIZATION);
        let mut caller = caller_of(authorization.as_deref().map(str::as_bytes));
        if let Some(id) = match auth {
            Some(a) => a.identify(headers).await?,
            None => None,
        } {
            let iss = id.claim_text("iss").unwrap_or_default();
            caller = caller_of_subject(&iss, &id.subject);
        }
        Ok(Input {
            path: path.to_owned(),
            session_id: get(SESSION_ID_NAME),
            caller,
            authorization,
            client_ip,
            hopped: headers.contains_key(HOPPED),
        })
    }
}

/// The head checks a legacy request needs before its body: an allowed `Origin`, and one
/// `Authorization` and one session id (two copies could be read differently behind us).
pub(super) fn head_ok(
    req: &pingora::http::RequestHeader,
    config: &crate::config::Config,
) -> Result<(), Rejection> {
    if let Some(origin) = req.headers.get(http::header::ORIGIN) {
        if !config.origins.allows(origin.as_bytes()) {
            let msg = format!(
                "Origin {:?} is not allowed to call this gateway; add it to origins.allow",
                origin.to_str().unwrap_or("")
            );
            return Err(Rejection::new(
                403,
                codes::INVALID_REQUEST,
                "origin-refused",
                msg,
            ));
        }
    }
    for (name, typed) in [
        ("authorization", http::header::AUTHORIZATION),
        (SESSION_ID, SESSION_ID_NAME),
    ] {
        if req.headers.get_all(typed).iter().count() > 1 {
            let msg = format!("The request carries {name} twice; send it once");
            return Err(Rejection::new(
                400,
                codes::INVALID_REQUEST,
                "header-repeated",
                msg,
            ));
        }
    }
    Ok(())
}
