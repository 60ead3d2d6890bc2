//! Tests of the header-against-body check: each rule, and the order of precedence.

use super::*;
use crate::mcp::codes;
use crate::mcp::envelope::parse;
use http::HeaderMap;

const GW: VersionPolicy = VersionPolicy::AtLeast("2026-07-28");

fn body(method: &str, params: &str) -> Envelope {
    parse(format!(r#"{{"jsonrpc":"2.0","id":7,"method":"{method}","params":{params}}}"#).as_bytes())
        .unwrap()
}

fn call(name: &str, version: &str) -> Envelope {
    body(
        "tools/call",
        &format!(
            r#"{{"name":"{name}","_meta":{{"io.modelcontextprotocol/protocolVersion":"{version}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}"#
        ),
    )
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

fn run(
    pairs: &[(&str, &str)],
    env: &Envelope,
    policy: VersionPolicy,
) -> Result<(), (u16, i32, &'static str)> {
    let h = headers(pairs);
    check_request(&Claims::read(&h), env, policy).map_err(|r| (r.status, r.code, r.reason))
}

const PV: (&str, &str) = ("mcp-protocol-version", "2026-07-28");
const CALL: (&str, &str) = ("mcp-method", "tools/call");

#[test]
fn good_request_passes() {
    assert_eq!(
        run(
            &[PV, CALL, ("mcp-name", "get_weather")],
            &call("get_weather", "2026-07-28"),
            GW
        ),
        Ok(())
    );
    assert_eq!(
        run(
            &[PV, CALL, ("MCP-NAME", "  get_weather ")],
            &call("get_weather", "2026-07-28"),
            GW
        ),
        Ok(())
    );
    assert_eq!(
        run(
            &[PV, CALL, ("mcp-name", "=?base64?bcOpdMOpbw==?=")],
            &call("météo", "2026-07-28"),
            GW
        ),
        Ok(())
    );
}

#[test]
fn header_failures_in_order() {
    let e = call("get_weather", "2026-07-28");
    let m = |r| Err((400, codes::HEADER_MISMATCH, r));
    assert_eq!(
        run(&[CALL, ("mcp-name", "get_weather")], &e, GW),
        m("protocol-version-missing")
    );
    assert_eq!(
        run(&[PV, ("mcp-name", "get_weather")], &e, GW),
        m("mcp-method-missing")
    );
    assert_eq!(
        run(
            &[
                PV,
                ("mcp-method", "TOOLS/CALL"),
                ("mcp-name", "get_weather")
            ],
            &e,
            GW
        ),
        m("mcp-method-mismatch")
    );
    assert_eq!(run(&[PV, CALL], &e, GW), m("mcp-name-missing"));
    assert_eq!(
        run(&[PV, CALL, ("mcp-name", "get_forecast")], &e, GW),
        m("mcp-name-mismatch")
    );
    assert_eq!(
        run(&[PV, CALL, ("mcp-name", "=?base64?bc!!?=")], &e, GW),
        m("mcp-name-invalid")
    );
    assert_eq!(
        run(
            &[PV, CALL, ("mcp-name", "=?BASE64?Z2V0X3dlYXRoZXI=?=")],
            &e,
            GW
        ),
        m("mcp-name-mismatch")
    );
    assert_eq!(
        run(
            &[
                PV,
                CALL,
                ("mcp-name", "get_weather"),
                ("mcp-name", "get_weather")
            ],
            &e,
            GW
        ),
        m("mcp-name-invalid")
    );
    let old = call("get_weather", "2025-11-25");
    assert_eq!(
        run(&[PV, CALL, ("mcp-name", "get_weather")], &old, GW),
        m("protocol-version-mismatch")
    );
}

#[test]
fn version_policy() {
    let v999 = call("a", "v999.0.0");
    let h = [
        ("mcp-protocol-version", "v999.0.0"),
        CALL,
        ("mcp-name", "a"),
    ];
    let server = VersionPolicy::Exactly(&["2026-07-28"]);
    assert_eq!(
        run(&h, &v999, server),
        Err((
            400,
            codes::UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported-version"
        ))
    );
    assert_eq!(
        run(&h, &v999, GW),
        Ok(()),
        "a gateway passes undated versions on"
    );
    let old = call("a", "2025-06-18");
    let h = [
        ("mcp-protocol-version", "2025-06-18"),
        CALL,
        ("mcp-name", "a"),
    ];
    assert_eq!(
        run(&h, &old, GW),
        Err((
            400,
            codes::UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported-version"
        ))
    );
    let r = check_request(&Claims::read(&headers(&h)), &old, GW).unwrap_err();
    assert_eq!(r.data.unwrap()["requested"], "2025-06-18");
}

#[test]
fn meta_failures_are_invalid_params() {
    let h = [PV, ("mcp-method", "server/discover")];
    let no_meta = body("server/discover", "{}");
    assert_eq!(
        run(&h, &no_meta, GW),
        Err((400, codes::INVALID_PARAMS, "meta-invalid"))
    );
    let no_caps = body(
        "server/discover",
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
    );
    assert_eq!(
        run(&h, &no_caps, GW),
        Err((400, codes::INVALID_PARAMS, "meta-invalid"))
    );
}

#[test]
fn notifications_need_no_headers_but_present_ones_must_agree() {
    let n = parse(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#).unwrap();
    assert_eq!(run(&[], &n, GW), Ok(()));
    assert_eq!(
        run(&[("mcp-method", "notifications/other")], &n, GW),
        Err((400, codes::HEADER_MISMATCH, "mcp-method-mismatch"))
    );
}

#[test]
fn a_2025_initialize_learns_the_supported_versions() {
    let e = body(
        "initialize",
        r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old","version":"1"}}"#,
    );
    let h = headers(&[]);
    let r = check_request(&Claims::read(&h), &e, GW).unwrap_err();
    assert_eq!(
        (r.status, r.code),
        (400, codes::UNSUPPORTED_PROTOCOL_VERSION)
    );
    let data = r.data.unwrap();
    assert_eq!(data["supported"], serde_json::json!(["2026-07-28"]));
    assert_eq!(data["requested"], "2025-11-25");
}

#[test]
fn name_on_other_methods_is_ignored() {
    let e = body(
        "tools/list",
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
    );
    assert_eq!(
        run(
            &[PV, ("mcp-method", "tools/list"), ("mcp-name", "whatever")],
            &e,
            GW
        ),
        Ok(())
    );
}

#[test]
fn doomed_from_headers_alone() {
    let h = headers(&[PV, CALL, ("mcp-name", "a")]);
    assert!(!Claims::read(&h).doomed(GW));
    let h = headers(&[CALL]);
    assert!(Claims::read(&h).doomed(GW));
    let h = headers(&[("mcp-protocol-version", "2025-03-26"), CALL]);
    assert!(Claims::read(&h).doomed(GW));
}

#[test]
fn a_repeated_mcp_param_header_dooms_the_request_and_is_refused() {
    let name = ("mcp-name", "get_weather");
    let twice = [
        PV,
        CALL,
        name,
        ("mcp-param-region", "eu"),
        ("Mcp-Param-Region", "us"),
    ];
    assert!(Claims::read(&headers(&twice)).doomed(GW));
    let env = call("get_weather", "2026-07-28");
    assert_eq!(
        run(&twice, &env, GW),
        Err((400, codes::HEADER_MISMATCH, "mcp-param-invalid"))
    );
    let h = headers(&twice);
    let rej = check_request(&Claims::read(&h), &env, GW).unwrap_err();
    assert_eq!(
        rej.message,
        "The mcp-param-region header appears more than once; send it once"
    );
    // One copy of each of two params is fine.
    let once = [
        PV,
        CALL,
        name,
        ("mcp-param-region", "eu"),
        ("mcp-param-tier", "3"),
    ];
    assert!(!Claims::read(&headers(&once)).doomed(GW));
    assert_eq!(run(&once, &env, GW), Ok(()));
}
