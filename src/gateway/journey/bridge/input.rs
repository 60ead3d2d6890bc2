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
const HOPPED_NAME: http::HeaderName = http::HeaderName::from_static(HOPPED);

impl Input {
    /// Read a legacy request's `headers` on `path` (`once`: its one `Authorization` and
    /// session id, as [`head_ok`] found them). With `auth`, the caller is who the token
    /// stands for (its issuer and subject), not the token's bytes, so a refreshed token keeps
    /// its session; `Err`: auth refuses the token (the pipeline would too).
    pub(crate) async fn read(
        headers: &http::HeaderMap,
        once: Once<'_>,
        path: &str,
        client_ip: Option<std::net::IpAddr>,
        auth: Option<&Auth>,
    ) -> Result<Input, Refusal> {
        let text =
            |v: Option<&http::HeaderValue>| v.and_then(|v| v.to_str().ok()).map(str::to_owned);
        let authorization = text(once.authorization);
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
            session_id: text(once.session_id),
            caller,
            authorization,
            client_ip,
            hopped: headers.contains_key(HOPPED_NAME),
        })
    }
}

/// A request's one `Authorization` and one session id, each if it has one.
#[derive(Clone, Copy)]
pub(crate) struct Once<'a> {
    authorization: Option<&'a http::HeaderValue>,
    session_id: Option<&'a http::HeaderValue>,
}

/// The head checks a legacy request needs before its body: an allowed `Origin`, and one
/// `Authorization` and one session id (two copies could be read differently behind us), which
/// it returns.
pub(super) fn head_ok<'a>(
    req: &'a pingora::http::RequestHeader,
    config: &crate::config::Config,
) -> Result<Once<'a>, Rejection> {
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
    once(&req.headers)
}

/// The one `Authorization` and one session id of `headers`; refused when either comes twice.
pub(crate) fn once(headers: &http::HeaderMap) -> Result<Once<'_>, Rejection> {
    let single = |name: &str, typed: http::HeaderName| {
        let mut all = headers.get_all(typed).iter();
        let first = all.next();
        if all.next().is_none() {
            return Ok(first);
        }
        let msg = format!("The request carries {name} twice; send it once");
        Err(Rejection::new(
            400,
            codes::INVALID_REQUEST,
            "header-repeated",
            msg,
        ))
    };
    Ok(Once {
        authorization: single("authorization", http::header::AUTHORIZATION)?,
        session_id: single(SESSION_ID, SESSION_ID_NAME)?,
    })
}
