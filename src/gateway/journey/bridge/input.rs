//! What the bridge reads of a 2025-era request's head: the path, the session id, the
//! `Authorization` and who it names, the client's address, and whether another replica sent
//! the request on.

use super::session::caller_of;
use crate::mcp::legacy::SESSION_ID;

/// What the bridge reads of a legacy request's head.
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
    pub(super) fn of(
        req: &pingora::http::RequestHeader,
        path: &str,
        client_ip: Option<std::net::IpAddr>,
    ) -> Input {
        let get = |n: &str| {
            req.headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let authorization = get("authorization");
        Input {
            path: path.to_owned(),
            session_id: get(SESSION_ID),
            caller: caller_of(authorization.as_deref().map(str::as_bytes)),
            authorization,
            client_ip,
            hopped: req.headers.contains_key(HOPPED),
        }
    }
}
