//! The gateway conformance cases of the digest (§11.A), table-driven, against a running
//! gateway in front of recording upstreams on loopback.

mod common;
mod support;

use support::*;

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

struct Case {
    id: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
    status: u16,
    /// The JSON-RPC error code the gateway must answer with (None: forwarded).
    code: Option<i64>,
}

fn case(
    id: &'static str,
    headers: &[(&'static str, &'static str)],
    body: impl Into<String>,
    status: u16,
    code: Option<i64>,
) -> Case {
    Case {
        id,
        headers: headers.to_vec(),
        body: body.into(),
        status,
        code,
    }
}

#[test]
fn gateway_cases_g1_to_g38() {
    let up = Upstreams::start(2);
    let gw = simple_gateway(&up, "");
    let w = weather("2026-07-28");
    let read = |uri: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{{"uri":"{uri}",{}}}}}"#,
            meta("2026-07-28")
        )
    };
    let prompt = format!(
        r#"{{"jsonrpc":"2.0","id":10,"method":"prompts/get","params":{{"name":"greet",{}}}}}"#,
        meta("2026-07-28")
    );
    let meteo = format!(
        r#"{{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{{"name":"météo",{}}}}}"#,
        meta("2026-07-28")
    );
    let list = format!(
        r#"{{"jsonrpc":"2.0","id":12,"method":"tools/list","params":{{{}}}}}"#,
        meta("2026-07-28")
    );
    let legacy =
        r#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"get_weather"}}"#;
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{{"name":"get_weather","arguments":{{"x":{}1{}}},{}}}}}"#,
        "[".repeat(100),
        "]".repeat(100),
        meta("2026-07-28")
    );
    const M: Option<i64> = Some(-32020);
    let cases = vec![
        case(
            "G1 good tools/call is forwarded",
            &[PV, CALL, WEATHER],
            w.clone(),
            200,
            None,
        ),
        case("G2 no Mcp-Method", &[PV, WEATHER], w.clone(), 400, M),
        case(
            "G3 Mcp-Method disagrees",
            &[PV, ("Mcp-Method", "prompts/get"), WEATHER],
            w.clone(),
            400,
            M,
        ),
        case(
            "G4 values are case-sensitive",
            &[PV, ("Mcp-Method", "TOOLS/CALL"), WEATHER],
            w.clone(),
            400,
            M,
        ),
        case(
            "G5 lowercase header name",
            &[PV, ("mcp-method", "tools/call"), WEATHER],
            w.clone(),
            200,
            None,
        ),
        case(
            "G5 uppercase header name",
            &[PV, ("MCP-METHOD", "tools/call"), WEATHER],
            w.clone(),
            200,
            None,
        ),
        case("G6 no Mcp-Name", &[PV, CALL], w.clone(), 400, M),
        case(
            "G7 Mcp-Name disagrees",
            &[PV, CALL, ("Mcp-Name", "get_forecast")],
            w.clone(),
            400,
            M,
        ),
        case(
            "G8 whitespace is trimmed",
            &[PV, CALL, ("Mcp-Name", "   get_weather   ")],
            w.clone(),
            200,
            None,
        ),
        case(
            "G9 resources/read uri mismatch",
            &[
                PV,
                ("Mcp-Method", "resources/read"),
                ("Mcp-Name", "file:///a.txt"),
            ],
            read("file:///b.txt"),
            400,
            M,
        ),
        case(
            "G9 resources/read uri match",
            &[
                PV,
                ("Mcp-Method", "resources/read"),
                ("Mcp-Name", "file:///a.txt"),
            ],
            read("file:///a.txt"),
            200,
            None,
        ),
        case(
            "G10 prompts/get match",
            &[PV, ("Mcp-Method", "prompts/get"), ("Mcp-Name", "greet")],
            prompt.clone(),
            200,
            None,
        ),
        case(
            "G10 prompts/get mismatch",
            &[PV, ("Mcp-Method", "prompts/get"), ("Mcp-Name", "other")],
            prompt,
            400,
            M,
        ),
        case(
            "G11 base64 name",
            &[PV, CALL, ("Mcp-Name", "=?base64?bcOpdMOpbw==?=")],
            meteo.clone(),
            200,
            None,
        ),
        case(
            "G12 bad base64 padding",
            &[PV, CALL, ("Mcp-Name", "=?base64?bcOpdMOpbw?=")],
            meteo.clone(),
            400,
            M,
        ),
        case(
            "G12 bad base64 alphabet",
            &[PV, CALL, ("Mcp-Name", "=?base64?bc!!?=")],
            meteo,
            400,
            M,
        ),
        case(
            "G13 uppercase sentinel is a literal",
            &[PV, CALL, ("Mcp-Name", "=?BASE64?Z2V0X3dlYXRoZXI=?=")],
            w.clone(),
            400,
            M,
        ),
        case(
            "G14 no MCP-Protocol-Version",
            &[CALL, WEATHER],
            w.clone(),
            400,
            M,
        ),
        case(
            "G15 version header vs body",
            &[PV, CALL, WEATHER],
            weather("2025-11-25"),
            400,
            M,
        ),
        case(
            "G16 legacy version header",
            &[("MCP-Protocol-Version", "2025-06-18"), CALL, WEATHER],
            legacy,
            400,
            Some(-32022),
        ),
        case(
            "G16 no version header, no meta",
            &[CALL, WEATHER],
            legacy,
            400,
            M,
        ),
        case(
            "G17 batch",
            &[PV, CALL, WEATHER],
            format!("[{w}]"),
            400,
            Some(-32600),
        ),
        case(
            "G18 response object",
            &[PV, CALL, WEATHER],
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            400,
            Some(-32600),
        ),
        case(
            "G19 invalid JSON",
            &[PV, CALL, WEATHER],
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call""#,
            400,
            Some(-32700),
        ),
        case(
            "G21 session id and Last-Event-ID are ignored",
            &[
                PV,
                CALL,
                WEATHER,
                ("Mcp-Session-Id", "abc"),
                ("Last-Event-ID", "7"),
            ],
            w.clone(),
            200,
            None,
        ),
        case(
            "G33 unknown Mcp-Param header passes",
            &[PV, CALL, WEATHER, ("Mcp-Param-Whatever", "x")],
            w.clone(),
            200,
            None,
        ),
        case(
            "G38 Mcp-Name on tools/list is ignored",
            &[PV, ("Mcp-Method", "tools/list"), ("Mcp-Name", "nonsense")],
            list,
            200,
            None,
        ),
        case(
            "duplicate keys",
            &[PV, CALL, WEATHER],
            w.replacen(
                r#""name":"get_weather""#,
                r#""name":"get_weather","name":"evil""#,
                1,
            ),
            400,
            Some(-32600),
        ),
        case(
            "escaped key reads as the upstream reads it",
            &[PV, CALL, WEATHER],
            w.replacen(r#""method""#, r#""\u006dethod""#, 1),
            200,
            None,
        ),
        case(
            "escaped key cannot smuggle a second method",
            &[PV, CALL, WEATHER],
            w.replacen(
                r#""method":"tools/call""#,
                r#""method":"tools/call","\u006dethod":"prompts/get""#,
                1,
            ),
            400,
            Some(-32600),
        ),
        case(
            "duplicated Mcp-Method header",
            &[PV, CALL, CALL, WEATHER],
            w.clone(),
            400,
            M,
        ),
        case(
            "deep nesting",
            &[PV, CALL, WEATHER],
            deep,
            400,
            Some(-32600),
        ),
        case(
            "meta missing",
            &[PV, CALL, WEATHER],
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_weather"}}"#,
            400,
            Some(-32602),
        ),
    ];
    for c in cases {
        let before = up.count();
        let r = post(gw.mcp_addr, &c.headers, &c.body);
        assert_eq!(
            r.status,
            c.status,
            "{}: {:?}",
            c.id,
            String::from_utf8_lossy(&r.body)
        );
        match c.code {
            Some(code) => {
                assert_eq!(r.error_code(), code, "{}: {}", c.id, r.json());
                assert_eq!(
                    r.header("content-type"),
                    Some("application/json"),
                    "{}",
                    c.id
                );
                assert!(
                    r.header("x-mcp-edge-upstream").is_none(),
                    "{}: gateway answers name no instance",
                    c.id
                );
                let body: serde_json::Value = serde_json::from_str(&c.body).unwrap_or_default();
                if let Some(id) = body.get("id").filter(|_| code != -32700) {
                    if !c.body.contains("\"name\":\"evil\"") && !c.body.starts_with('[') {
                        assert_eq!(&r.json()["id"], id, "{}: the id is echoed", c.id);
                    }
                }
                assert!(
                    r.json()["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.len() > 10),
                    "{}",
                    c.id
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
                assert_eq!(
                    up.count(),
                    before,
                    "{}: a refused request must not reach an upstream",
                    c.id
                );
            }
            None => {
                assert_eq!(up.count(), before + 1, "{}: forwarded once", c.id);
                let got = up.received().pop().unwrap();
                assert_eq!(
                    &got.body[..],
                    c.body.as_bytes(),
                    "{}: body byte-identical",
                    c.id
                );
                assert_eq!(
                    r.header("x-upstream-says"),
                    Some("hello"),
                    "{}: upstream headers pass",
                    c.id
                );
                assert_eq!(
                    r.header("x-mcp-edge-upstream"),
                    Some(up.addrs[got.instance].to_string().as_str()),
                    "{}",
                    c.id
                );
                assert!(
                    r.header("mcp-session-id").is_none(),
                    "{}: never minted",
                    c.id
                );
                if c.id.starts_with("G33") {
                    assert_eq!(got.headers.get("mcp-param-whatever").unwrap(), "x");
                }
            }
        }
    }
    // G19: a parse error has no id.
    let r = post(gw.mcp_addr, &[PV, CALL, WEATHER], "{not json");
    assert!(r.json().get("id").is_none(), "{}", r.json());
    // Non-UTF-8 body.
    let mut bad = weather("2026-07-28").into_bytes();
    let at = bad.iter().position(|b| *b == b'P').unwrap();
    bad[at] = 0xff;
    let r = raw(gw.mcp_addr, &post_bytes(&[PV, CALL, WEATHER], &bad));
    assert_eq!((r.status, r.error_code()), (400, -32700));
}

#[test]
fn g20_get_and_delete_are_405_and_other_paths_404() {
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
fn g23_notifications_pass_through_with_202() {
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
fn g22_an_origin_not_on_the_allow_list_is_refused_with_403() {
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
