//! The spec's conformance cases for a gateway that parses the body (headers against body,
//! base64 names, versions, batches and responses, invalid JSON, session headers, notifications,
//! `Origin`, unknown `Mcp-Param-*` headers, `Mcp-Name` where a method has none), against a
//! running gateway in front of recording upstreams on loopback: one test per case, named after
//! what it checks (`cargo test base64` runs the base64 ones).

use crate::support::*;

const PV: (&str, &str) = ("MCP-Protocol-Version", "2026-07-28");
const CALL: (&str, &str) = ("Mcp-Method", "tools/call");
const WEATHER: (&str, &str) = ("Mcp-Name", "get_weather");

fn meta(version: &str) -> String {
    format!(
        r#""_meta":{{"io.modelcontextprotocol/protocolVersion":"{version}","io.modelcontextprotocol/clientCapabilities":{{}}}}"#
    )
}

fn weather(version: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":"w-1","method":"tools/call","params":{{"name":"get_weather","arguments":{{"city":"Paris"}},{}}}}}"#,
        meta(version)
    )
}

/// One case: send it through a fresh gateway and check the answer (and, for refusals, that no
/// upstream received it: a following good request is the only one that arrives).
fn check(id: &str, headers: &[(&str, &str)], body: String, status: u16, code: Option<i64>) {
    let up = Upstreams::start(2);
    let gw = simple_gateway(&up, "");
    let r = post(gw.mcp_addr, headers, &body);
    assert_eq!(
        r.status,
        status,
        "{id}: {:?}",
        String::from_utf8_lossy(&r.body)
    );
    match code {
        Some(code) => {
            assert_eq!(r.error_code(), code, "{id}: {}", r.json());
            assert_eq!(r.header("content-type"), Some("application/json"), "{id}");
            assert!(
                r.header("x-mcp-edge-upstream").is_none(),
                "{id}: gateway answers name no instance"
            );
            let sent: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            if let Some(want) = sent.get("id").filter(|_| code != -32700) {
                if !body.contains("\"name\":\"evil\"") && !body.starts_with('[') {
                    assert_eq!(&r.json()["id"], want, "{id}: the id is echoed");
                }
            }
            let message = r.json()["error"]["message"].as_str().map(str::len);
            assert!(message.is_some_and(|n| n > 10), "{id}");
            let next = post(
                gw.mcp_addr,
                &[PV, CALL, WEATHER],
                &weather("2026-07-28").replace("w-1", "w-next"),
            );
            assert_eq!(next.status, 200, "{id}: the following good request");
            let got = up.received();
            assert_eq!(
                got.len(),
                1,
                "{id}: a refused request must not reach an upstream"
            );
            assert!(
                String::from_utf8_lossy(&got[0].body).contains("w-next"),
                "{id}"
            );
        }
        None => {
            let got = up.received();
            assert_eq!(got.len(), 1, "{id}: forwarded once");
            let got = &got[0];
            assert_eq!(&got.body[..], body.as_bytes(), "{id}: body byte-identical");
            assert_eq!(
                r.header("x-upstream-says"),
                Some("hello"),
                "{id}: upstream headers pass"
            );
            assert_eq!(
                r.header("x-mcp-edge-upstream"),
                Some(up.addrs[got.instance].to_string().as_str()),
                "{id}"
            );
            assert!(r.header("mcp-session-id").is_none(), "{id}: never minted");
            if id == "unknown_mcp_param_header_passes" {
                assert_eq!(got.headers.get("mcp-param-whatever").unwrap(), "x");
            }
        }
    }
}

const MISMATCH: Option<i64> = Some(-32020);

fn w() -> String {
    weather("2026-07-28")
}
fn read(uri: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{{"uri":"{uri}",{}}}}}"#,
        meta("2026-07-28")
    )
}
fn prompt() -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":10,"method":"prompts/get","params":{{"name":"greet",{}}}}}"#,
        meta("2026-07-28")
    )
}
fn meteo() -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{{"name":"météo",{}}}}}"#,
        meta("2026-07-28")
    )
}
fn list() -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":12,"method":"tools/list","params":{{{}}}}}"#,
        meta("2026-07-28")
    )
}
fn legacy() -> String {
    r#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"get_weather"}}"#.into()
}
fn deep() -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{{"name":"get_weather","arguments":{{"x":{}1{}}},{}}}}}"#,
        "[".repeat(100),
        "]".repeat(100),
        meta("2026-07-28")
    )
}

/// One test per case, named after what it checks; a refusal is also checked never to arrive.
macro_rules! cases {
    ($($(#[$doc:meta])* $name:ident: $headers:expr, $body:expr => $status:expr, $code:expr;)*) => {
        $(
            $(#[$doc])*
            #[test]
            fn $name() {
                check(stringify!($name), $headers, String::from($body), $status, $code);
            }
        )*
    };
}

cases! {
    /// good tools/call is forwarded
    good_tools_call_is_forwarded: &[PV, CALL, WEATHER], w() => 200, None;
    /// no Mcp-Method
    no_mcp_method: &[PV, WEATHER], w() => 400, MISMATCH;
    /// Mcp-Method disagrees
    mcp_method_disagrees: &[PV, ("Mcp-Method", "prompts/get"), WEATHER], w() => 400, MISMATCH;
    /// values are case-sensitive
    values_are_case_sensitive: &[PV, ("Mcp-Method", "TOOLS/CALL"), WEATHER], w() => 400, MISMATCH;
    /// lowercase header name
    lowercase_header_name: &[PV, ("mcp-method", "tools/call"), WEATHER], w() => 200, None;
    /// uppercase header name
    uppercase_header_name: &[PV, ("MCP-METHOD", "tools/call"), WEATHER], w() => 200, None;
    /// no Mcp-Name
    no_mcp_name: &[PV, CALL], w() => 400, MISMATCH;
    /// Mcp-Name disagrees
    mcp_name_disagrees: &[PV, CALL, ("Mcp-Name", "get_forecast")], w() => 400, MISMATCH;
    /// whitespace is trimmed
    whitespace_is_trimmed: &[PV, CALL, ("Mcp-Name", "   get_weather   ")], w() => 200, None;
    /// resources/read uri mismatch
    resources_read_uri_mismatch: &[
                PV,
                ("Mcp-Method", "resources/read"),
                ("Mcp-Name", "file:///a.txt"),
            ], read("file:///b.txt") => 400, MISMATCH;
    /// resources/read uri match
    resources_read_uri_match: &[
                PV,
                ("Mcp-Method", "resources/read"),
                ("Mcp-Name", "file:///a.txt"),
            ], read("file:///a.txt") => 200, None;
    /// prompts/get match
    prompts_get_match: &[PV, ("Mcp-Method", "prompts/get"), ("Mcp-Name", "greet")], prompt() => 200, None;
    /// prompts/get mismatch
    prompts_get_mismatch: &[PV, ("Mcp-Method", "prompts/get"), ("Mcp-Name", "other")], prompt() => 400, MISMATCH;
    /// base64 name
    base64_name: &[PV, CALL, ("Mcp-Name", "=?base64?bcOpdMOpbw==?=")], meteo() => 200, None;
    /// bad base64 padding
    bad_base64_padding: &[PV, CALL, ("Mcp-Name", "=?base64?bcOpdMOpbw?=")], meteo() => 400, MISMATCH;
    /// bad base64 alphabet
    bad_base64_alphabet: &[PV, CALL, ("Mcp-Name", "=?base64?bc!!?=")], meteo() => 400, MISMATCH;
    /// uppercase sentinel is a literal
    uppercase_sentinel_is_a_literal: &[PV, CALL, ("Mcp-Name", "=?BASE64?Z2V0X3dlYXRoZXI=?=")], w() => 400, MISMATCH;
    /// no MCP-Protocol-Version
    no_mcp_protocol_version: &[CALL, WEATHER], w() => 400, MISMATCH;
    /// version header vs body
    version_header_vs_body: &[PV, CALL, WEATHER], weather("2025-11-25") => 400, MISMATCH;
    /// legacy version header: a 2025-era request, the bridge's; without a session it is told
    /// to initialize first (with `legacy.clients: refuse`, -32022: abuse::operations::i13_7)
    legacy_version_header: &[("MCP-Protocol-Version", "2025-06-18"), CALL, WEATHER], legacy() => 400, Some(-31015);
    /// no version header, no meta
    no_version_header_no_meta: &[CALL, WEATHER], legacy() => 400, MISMATCH;
    /// batch
    batch: &[PV, CALL, WEATHER], format!("[{}]", w()) => 400, Some(-32600);
    /// response object
    response_object: &[PV, CALL, WEATHER], r#"{"jsonrpc":"2.0","id":1,"result":{}}"# => 400, Some(-32600);
    /// invalid JSON
    invalid_json: &[PV, CALL, WEATHER], r#"{"jsonrpc":"2.0","id":1,"method":"tools/call""# => 400, Some(-32700);
    /// session id and Last-Event-ID are ignored
    session_id_and_last_event_id_are_ignored: &[
                PV,
                CALL,
                WEATHER,
                ("Mcp-Session-Id", "abc"),
                ("Last-Event-ID", "7"),
            ], w() => 200, None;
    /// unknown Mcp-Param header passes
    unknown_mcp_param_header_passes: &[PV, CALL, WEATHER, ("Mcp-Param-Whatever", "x")], w() => 200, None;
    /// Mcp-Name on tools/list is ignored
    mcp_name_on_tools_list_is_ignored: &[PV, ("Mcp-Method", "tools/list"), ("Mcp-Name", "nonsense")], list() => 200, None;
    /// duplicate keys
    strict_duplicate_keys: &[PV, CALL, WEATHER], w().replacen(
                r#""name":"get_weather""#,
                r#""name":"get_weather","name":"evil""#,
                1,
            ) => 400, Some(-32600);
    /// escaped key reads as the upstream reads it
    strict_escaped_key_reads_as_the_upstream_reads_it: &[PV, CALL, WEATHER], w().replacen(r#""method""#, r#""\u006dethod""#, 1) => 200, None;
    /// escaped key cannot smuggle a second method
    strict_escaped_key_cannot_smuggle_a_second_method: &[PV, CALL, WEATHER], w().replacen(
                r#""method":"tools/call""#,
                r#""method":"tools/call","\u006dethod":"prompts/get""#,
                1,
            ) => 400, Some(-32600);
    /// duplicated Mcp-Method header
    strict_duplicated_mcp_method_header: &[PV, CALL, CALL, WEATHER], w() => 400, MISMATCH;
    /// a case variant deep in arguments long enough for the two-pass reading
    strict_case_variant_in_long_arguments: &[PV, CALL, WEATHER], w().replacen(
                r#""city":"Paris""#,
                &format!(r#""city":"Paris","notes":"{}","rows":[{{"k":1}},{{"k":2,"K":3}}]"#, "x".repeat(80)),
                1,
            ) => 400, Some(-32600);
    /// the same long arguments without the variant pass
    strict_long_arguments_pass: &[PV, CALL, WEATHER], w().replacen(
                r#""city":"Paris""#,
                &format!(r#""city":"Paris","notes":"{}","rows":[{{"k":1}},{{"k":2,"j":3}}]"#, "x".repeat(80)),
                1,
            ) => 200, None;
    /// deep nesting
    strict_deep_nesting: &[PV, CALL, WEATHER], deep() => 400, Some(-32600);
    /// meta missing
    strict_meta_missing: &[PV, CALL, WEATHER], r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_weather"}}"# => 400, Some(-32602);
}

#[test]
fn a_parse_error_has_no_id_and_non_utf8_is_a_parse_error() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let r = post(gw.mcp_addr, &[PV, CALL, WEATHER], "{not json");
    assert!(r.json().get("id").is_none(), "{}", r.json());
    let mut bad = weather("2026-07-28").into_bytes();
    let at = bad.iter().position(|b| *b == b'P').unwrap();
    bad[at] = 0xff;
    let r = raw(gw.mcp_addr, &post_bytes(&[PV, CALL, WEATHER], &bad));
    assert_eq!((r.status, r.error_code()), (400, -32700));
}

#[test]
fn get_and_delete_are_405_and_other_paths_404() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    for m in ["GET", "DELETE"] {
        let r = raw(
            gw.mcp_addr,
            format!("{m} /mcp HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        );
        assert_eq!(r.status, 405, "{m}");
        assert_eq!(r.header("allow"), Some("POST"));
        assert!(r.json()["error"]["code"].is_i64());
    }
    let other = post_bytes(&[PV, CALL, WEATHER], weather("2026-07-28").as_bytes());
    let other = String::from_utf8(other)
        .unwrap()
        .replacen("POST /mcp ", "POST /other ", 1);
    let r = raw(gw.mcp_addr, other.as_bytes());
    assert_eq!(r.status, 404);
    assert_eq!(up.count(), 0);
}

#[test]
fn notifications_pass_through_with_202() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let n = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
    // With the method header, and without any MCP header (notifications need none).
    for headers in [
        vec![
            PV,
            ("Mcp-Method", "notifications/cancelled"),
            ("x-test-status", "202"),
        ],
        vec![("x-test-status", "202")],
    ] {
        let r = post(gw.mcp_addr, &headers, n);
        assert_eq!(r.status, 202);
        assert!(r.body.is_empty());
    }
    assert_eq!(up.count(), 2);
    // A present Mcp-Method must still agree.
    let r = post(gw.mcp_addr, &[("Mcp-Method", "notifications/other")], n);
    assert_eq!((r.status, r.error_code()), (400, -32020));
    assert_eq!(up.count(), 2);
}

#[test]
fn an_origin_not_on_the_allow_list_is_refused_with_403() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let w = weather("2026-07-28");
    let r = post(
        gw.mcp_addr,
        &[PV, CALL, WEATHER, ("Origin", "https://evil.example")],
        &w,
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.error_code(), -32600);
    assert!(
        r.json().get("id").is_none(),
        "an id-less JSON-RPC error body"
    );
    assert_eq!(up.count(), 0);
    // Local origins pass by default, and so do requests without Origin.
    for origin in ["http://localhost:6274", "http://127.0.0.1"] {
        assert_eq!(
            post(gw.mcp_addr, &[PV, CALL, WEATHER, ("Origin", origin)], &w).status,
            200,
            "{origin}"
        );
    }
    assert_eq!(post(gw.mcp_addr, &[PV, CALL, WEATHER], &w).status, 200);
    drop(gw);
    // A configured list replaces the default.
    let gw = simple_gateway(&up, "origins:\n  allow: [\"https://app.example.com\"]\n");
    let ok = post(
        gw.mcp_addr,
        &[PV, CALL, WEATHER, ("Origin", "https://app.example.com")],
        &w,
    );
    assert_eq!(ok.status, 200);
    let local = post(
        gw.mcp_addr,
        &[PV, CALL, WEATHER, ("Origin", "http://localhost:3000")],
        &w,
    );
    assert_eq!(local.status, 403);
}
