//! Credentials stage glue: where the request path calls into [`crate::credentials`]. The
//! pool's credential is obtained in `request_filter` once the pool is final (after routing,
//! auth, limits and the body, which may move a federated call to another pool) and before an
//! instance is chosen; [`apply`] then sets it on every attempt's upstream head, after removing
//! the caller's `Authorization` and any client copy of the credential's header.
//!
//! A credential that cannot be obtained is the gateway's dependency failing, not the instance:
//! the client gets 503 + `Retry-After` (token endpoint down or slow) or 502 (it refused or
//! answered nonsense) with -31012, no instance is contacted, and no instance is ejected.

use pingora::http::RequestHeader;
use pingora::prelude::*;
use pingora::proxy::Session;

use crate::gateway::journey::state::Gateway;

use crate::credentials::Failure;
use crate::gateway::journey::request::RequestCtx;
use crate::mcp::codes;
use crate::mcp::header::{bearer_token, shadows_of};
use crate::mcp::Rejection;

/// Obtain the credential of the request's pool into `ctx`, or the refusal when it cannot be.
pub(crate) async fn obtain(
    session: &Session,
    ctx: &mut RequestCtx,
    gw: &Gateway,
) -> Result<(), Rejection> {
    if gw.credentials.pool(ctx.pool).is_none() {
        return Ok(());
    }
    // Only a verified caller's token is exchanged (auth is required for token exchange).
    let caller = match ctx.identity {
        Some(_) => bearer_token(&session.req_header().headers).map(str::to_owned),
        None => None,
    };
    match gw
        .credentials
        .for_request(ctx.pool, caller.as_deref())
        .await
    {
        Ok(c) => {
            ctx.upstream_credential = c;
            Ok(())
        }
        Err(f) => {
            let pool = gw.table.pools[ctx.pool].clone();
            if f.status() == 503 {
                ctx.extra_headers.push((
                    "retry-after",
                    crate::credentials::cell::FAIL_FAST
                        .as_secs()
                        .max(1)
                        .to_string(),
                ));
            }
            Err(rejection(&pool, &f))
        }
    }
}

/// The answer for a credential that could not be obtained for `pool`.
pub(crate) fn rejection(pool: &str, f: &Failure) -> Rejection {
    let (reason, message) = match f {
        Failure::Unreachable(_) | Failure::Timeout(_) => (
            "credential-unavailable",
            format!("The gateway could not obtain a credential for pool {pool}: its token endpoint did not answer; retry later"),
        ),
        Failure::Refused { .. } => (
            "credential-refused",
            format!("The gateway could not obtain a credential for pool {pool}: its token endpoint refused the request"),
        ),
        Failure::Invalid(_) | Failure::Local(_) => (
            "credential-invalid",
            format!("The gateway could not obtain a credential for pool {pool}: its token endpoint's answer was unusable"),
        ),
    };
    let mut data =
        serde_json::json!({ "pool": pool, "dependency": "token_endpoint", "reason": f.reason() });
    if let Failure::Refused { error, .. } = f {
        data["error"] = serde_json::Value::String(error.clone());
    }
    let mut rej = Rejection::new(
        f.status(),
        codes::GATEWAY_CREDENTIAL_UNAVAILABLE,
        reason,
        message,
    );
    rej.data = Some(data);
    rej
}

/// On a pool with credentials: the caller's `Authorization` and every client field a reader
/// could take for the credential's header removed, then the credential set. Without one
/// (token exchange with no caller) the pool still never sees the caller's token.
pub(crate) fn apply(ctx: &RequestCtx, upstream: &mut RequestHeader) -> Result<()> {
    let Some(pc) = ctx.gw.credentials.pool(ctx.pool) else {
        return Ok(());
    };
    let names = [http::header::AUTHORIZATION, pc.header.clone()];
    for name in shadows_of(&upstream.headers, &names) {
        upstream.remove_header(&name);
    }
    if let Some((h, v)) = &ctx.upstream_credential {
        upstream.insert_header(h.clone(), v.clone())?;
    }
    Ok(())
}
