//! The `Mcp-Param-*` headers of a 2025-era client's `tools/call`, as the 2026 client the bridge
//! plays must send them ([`crate::gateway::stages::bridge::params`] keeps the marks): from the
//! marks learned, and, when the fleet refuses a call for a tool whose marks were never seen,
//! from the endpoint's `tools/list` read once more.

use serde_json::{json, Value};

use super::call::{split, Call};
use super::legs::{send, Via};
use super::session::LegacySession;
use super::{Bridge, Input};
use crate::mcp::{codes, legacy, methods};
use pingora::proxy::Session;

/// The `Mcp-Param-*` headers of a `tools/call` ([`super::params`]).
pub(super) fn param_headers(
    bridge: &Bridge,
    input: &Input,
    call: &Call,
    name: Option<&str>,
) -> Vec<(String, String)> {
    match (call.method.as_str(), name) {
        (methods::TOOLS_CALL, Some(n)) => {
            let args = || call.params().and_then(|p| p.get("arguments"));
            bridge.params.headers(&input.path, n, args)
        }
        _ => Vec::new(),
    }
}

/// A `tools/call` refused with -32020 for a tool whose marks the bridge has not seen.
pub(super) fn needs_marks(
    bridge: &Bridge,
    input: &Input,
    call: &Call,
    response: Option<&Value>,
) -> bool {
    let code = response
        .and_then(|r| r.pointer("/error/code"))
        .and_then(Value::as_i64);
    let name = call
        .params()
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str);
    call.method == methods::TOOLS_CALL
        && code == Some(i64::from(codes::HEADER_MISMATCH))
        && name.is_some_and(|n| !bridge.params.knows(&input.path, n))
}

/// Read the endpoint's whole `tools/list` (at most 20 pages) as this client, learning marks.
pub(super) async fn learn_tools(
    via: Via<'_>,
    session: &mut Session,
    s: &LegacySession,
) -> pingora::Result<()> {
    let (bridge, input) = (via.1, via.3);
    let mut cursor: Option<Value> = None;
    for page in 0..20u64 {
        let params = cursor.take().map(|c| json!({"cursor": c}));
        let body = legacy::to_modern(
            methods::TOOLS_LIST,
            params.as_ref(),
            page + 1,
            &s.capabilities,
            &s.client_info,
            None,
        );
        let to = (methods::TOOLS_LIST, None);
        let Ok(ans) = send(via, session, to, body).await? else {
            return Ok(());
        };
        let (response, _) = split(ans.messages());
        let Some(result) = response.and_then(|mut r| r.get_mut("result").map(Value::take)) else {
            return Ok(());
        };
        bridge.params.learn(&input.path, &result);
        match result.get("nextCursor") {
            Some(c) if !c.is_null() => cursor = Some(c.clone()),
            _ => return Ok(()),
        }
    }
    Ok(())
}
