//! The server runs the header checks itself, even behind a validating gateway (the spec requires
//! it): each header-against-body case, the `Mcp-Param-*` check, and what the HTTP layer refuses.

use super::*;

/// The header-against-body cases and the `Mcp-Param-*` check, table-driven.
#[test]
fn header_validation() {
    let p = pool();
    let a = p.addrs()[0];
    let body = |name: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{{"name":"{name}","arguments":{{}},"_meta":{META_OK}}}}}"#
        )
    };
    let base = [
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
    ];
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u16, Option<i64>);
    let cases: Vec<Case> = vec![
        (
            "good",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "test_simple_text"),
            ],
            body("test_simple_text"),
            200,
            None,
        ),
        (
            "no Mcp-Method",
            vec![("Mcp-Name", "test_simple_text")],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "other method",
            vec![
                ("Mcp-Method", "prompts/get"),
                ("Mcp-Name", "test_simple_text"),
            ],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "case",
            vec![
                ("Mcp-Method", "TOOLS/CALL"),
                ("Mcp-Name", "test_simple_text"),
            ],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "lowercase name",
            vec![
                ("mcp-method", "tools/call"),
                ("MCP-NAME", "test_simple_text"),
            ],
            body("test_simple_text"),
            200,
            None,
        ),
        (
            "no Mcp-Name",
            vec![("Mcp-Method", "tools/call")],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "other name",
            vec![("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "whitespace",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "   test_simple_text   "),
            ],
            body("test_simple_text"),
            200,
            None,
        ),
        (
            "base64",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "=?base64?dGVzdF9zaW1wbGVfdGV4dA==?="),
            ],
            body("test_simple_text"),
            200,
            None,
        ),
        (
            "bad base64",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "=?base64?dGVzdF9zaW1wbGVfdGV4dA?="),
            ],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "uppercase sentinel",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "=?BASE64?dGVzdF9zaW1wbGVfdGV4dA==?="),
            ],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "unknown non-ASCII tool",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "=?base64?bcOpdMOpbw==?="),
            ],
            body("météo"),
            200,
            Some(-32602),
        ),
    ];
    for (what, extra, b, status, code) in cases {
        let mut h: Vec<(&str, &str)> = base.to_vec();
        h.extend(extra);
        let r = post(a, &h, &b);
        assert_eq!((r.status, r.code()), (status, code), "{what}: {}", r.text());
        assert_eq!(r.json()["id"], "c-1", "{what}");
    }
    // No MCP-Protocol-Version; then header and body versions that differ.
    let r = post(
        a,
        &[
            ("Content-Type", "application/json"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "test_simple_text"),
        ],
        &body("test_simple_text"),
    );
    assert_eq!((r.status, r.code()), (400, Some(-32020)));
    let old = body("test_simple_text").replace("\"2026-07-28\"", "\"2025-11-25\"");
    let r = post(
        a,
        &[
            base[0],
            base[1],
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "test_simple_text"),
        ],
        &old,
    );
    assert_eq!((r.status, r.code()), (400, Some(-32020)));
    // resources/read: Mcp-Name is the uri.
    let r = rpc(
        a,
        json!(1),
        "resources/read",
        json!({"uri": "test://static-text"}),
        &[("Mcp-Name", "test://static-binary")],
    );
    assert_eq!((r.status, r.code()), (400, Some(-32020)));
    // prompts/get: Mcp-Name is the prompt's name.
    let r = rpc(
        a,
        json!(2),
        "prompts/get",
        json!({"name": "test_simple_prompt"}),
        &[("Mcp-Name", "other")],
    );
    assert_eq!((r.status, r.code()), (400, Some(-32020)));
    // The Mcp-Param-* header check: Mcp-Param-Environment for deploy.
    let caps = json!({"elicitation": {}});
    let args = json!({"service": "s", "environment": "prod"});
    let deploy = |id: i64, extra: &[(&str, &str)]| {
        rpc(
            a,
            json!(id),
            "tools/call",
            json!({"name": "deploy", "arguments": args, "_meta": meta(caps.clone())}),
            extra,
        )
    };
    assert_eq!(
        (deploy(3, &[]).status, deploy(3, &[]).code()),
        (400, Some(-32020)),
        "missing Mcp-Param-Environment"
    );
    let r = deploy(4, &[("Mcp-Param-Environment", "staging")]);
    assert_eq!((r.status, r.code()), (400, Some(-32020)), "mismatch");
    let r = deploy(5, &[("Mcp-Param-Environment", "=?base64?!!?=")]);
    assert_eq!((r.status, r.code()), (400, Some(-32020)), "bad base64");
    assert_eq!(
        deploy(6, &[("mcp-param-environment", " prod ")]).result()["resultType"],
        "input_required"
    );
    assert_eq!(
        deploy(7, &[("Mcp-Param-Environment", "=?base64?cHJvZA==?=")]).result()["resultType"],
        "input_required"
    );
}

#[test]
fn transport_rejections() {
    let p = pool();
    let a = p.addrs()[0];
    let good = good_headers("server/discover", None);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{"_meta":{META_OK}}}}}"#
    );
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut h: Vec<(String, String)> = good.clone();
        for (k, v) in extra {
            h.retain(|(hk, _)| !hk.eq_ignore_ascii_case(k));
            h.push((k.to_string(), v.to_string()));
        }
        post(a, &hdrs(&h), &body)
    };
    assert_eq!(with(&[("Origin", "https://evil.example")]).status, 403);
    assert_eq!(with(&[("Origin", "http://localhost:3000")]).status, 200);
    assert_eq!(
        with(&[
            ("Host", "evil.example.com"),
            ("Origin", "http://evil.example.com")
        ])
        .status,
        403
    );
    assert_eq!(
        with(&[("Host", "evil.example.com")]).status,
        403,
        "DNS rebinding: Host alone"
    );
    assert_eq!(with(&[("Host", "localhost:1234")]).status, 200);
    let r = with(&[("Content-Type", "text/plain")]);
    assert_eq!(r.status, 415);
    assert!(r.json()["error"]["code"].is_i64());
    assert_eq!(
        with(&[("Content-Type", "application/json; charset=utf-8")]).status,
        200
    );
    // Parse errors, batches, responses.
    let h = hdrs(&good);
    for (b, code) in [
        ("{not json", -32700),
        ("[1,2]", -32600),
        (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, -32600),
        ("", -32700),
    ] {
        let r = post(a, &h, b);
        assert_eq!((r.status, r.code()), (400, Some(code)), "{b}");
    }
    // Too large, by Content-Length and by a chunked body (a pool with a 1 KiB limit).
    let small = Pool::start(PoolOptions {
        body_limit: 1024,
        ..PoolOptions::local(1)
    })
    .unwrap();
    let sa = small.addrs()[0];
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "a".repeat(2000)
    );
    let r = post(sa, &h, &big);
    assert_eq!(r.status, 413);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("too large"));
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: {sa}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n",
        big.len()
    );
    assert_eq!(raw(sa, chunked.as_bytes()).status, 413);
    assert_eq!(post(sa, &h, &body).status, 200, "small bodies still pass");
    // Garbage on the socket does not take the server down.
    let r = raw(a, b"\x00\x01garbage\r\n\r\n");
    assert!(r.status >= 400);
    assert_eq!(with(&[]).status, 200, "still serving");
}
