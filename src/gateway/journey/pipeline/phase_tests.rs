//! One request path, over real loopback sockets: the direct leg calls the proxy's own phases
//! for balance, the upstream head, a connect failure and the answer, so it runs the phases
//! pingora's pipe runs, in the same order (the helpers are [`super::tests`]').

use serde_json::json;

use super::tests::{call, gateway, headers, send, Upstream};
use super::trace;

/// The phases a `tools/call` ran through a gateway in front of `up` on `leg`, and its status.
fn phases(up: &Upstream, leg: &str, id: &str) -> (u16, Vec<&'static str>) {
    let gw = gateway(up, "/mcp", leg);
    let mut h = headers("tools/call", Some("echo"));
    h.push(("x-test-trace".to_string(), id.to_string()));
    let body = call("echo", json!({}));
    let (status, _) = send(gw.mcp_addr, "POST", "/mcp", &h, body.as_bytes());
    (status, trace::phases_of(id))
}

#[test]
fn the_direct_leg_runs_the_phases_pingoras_pipe_runs() {
    let (up, dead) = (Upstream::start(), Upstream::gone());
    let answered = [
        "request_filter",
        "upstream_peer",
        "upstream_request_filter",
        "response_filter",
        "response_body_filter",
    ];
    // One connect failure per instance tried: the pool has one.
    let refused = [
        "request_filter",
        "upstream_peer",
        "fail_to_connect",
        "fail_to_proxy",
    ];
    for leg in ["direct", "pingora"] {
        let (status, ran) = phases(&up, leg, &format!("phases-{leg}"));
        assert_eq!(status, 200, "{leg}");
        assert_eq!(ran, answered, "{leg}");
        let (status, ran) = phases(&dead, leg, &format!("phases-dead-{leg}"));
        assert_eq!(status, 502, "{leg}");
        assert_eq!(ran, refused, "{leg}");
    }
}
