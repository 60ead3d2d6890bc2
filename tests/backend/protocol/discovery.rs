//! The server's conformance cases for discovery, `_meta`, versions, removed methods, lists and
//! cache hints, missing capabilities.

use super::*;

#[test]
fn discover_answers_versions_capabilities_and_cache_hints() {
    let p = pool();
    let r = rpc(p.addrs()[0], json!(1), "server/discover", json!({}), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let res = r.result();
    assert_eq!(res["resultType"], "complete");
    assert!(res["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2026-07-28")));
    assert!(res["capabilities"]["tools"].is_object());
    assert!(res["ttlMs"].as_u64().is_some());
    assert!(matches!(
        res["cacheScope"].as_str(),
        Some("public" | "private")
    ));
    assert_eq!(
        res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-edge-backend"
    );
    assert_eq!(instance_of(&res), p.instance_ids()[0]);
    assert!(r.header("mcp-session-id").is_none());
}

#[test]
fn meta_fields_protocol_version_and_capabilities_required_client_info_optional() {
    let p = pool();
    let a = p.addrs()[0];
    let cases: &[(&str, Value, u16, Option<i64>)] = &[
        ("no _meta", json!({}), 400, Some(-32602)),
        (
            "no protocolVersion",
            json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
            400,
            Some(-32602),
        ),
        (
            "no clientCapabilities",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
            400,
            Some(-32602),
        ),
        (
            "no clientInfo",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}),
            200,
            None,
        ),
    ];
    for (i, (what, params, status, code)) in cases.iter().enumerate() {
        let h = good_headers("server/discover", None);
        let body =
            json!({"jsonrpc": "2.0", "id": 100 + i, "method": "server/discover", "params": params});
        let r = post(a, &hdrs(&h), &body.to_string());
        assert_eq!(r.status, *status, "{what}: {}", r.text());
        assert_eq!(r.code(), *code, "{what}");
        assert_eq!(r.json()["id"], json!(100 + i), "{what}: the id is echoed");
    }
}

#[test]
fn versions_mismatched_and_unsupported() {
    let p = pool();
    let a = p.addrs()[0];
    let mut m = meta(json!({}));
    m["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    // Header 2026-07-28, body v999 → -32020.
    let r = rpc(a, json!(6), "server/discover", json!({"_meta": m}), &[]);
    assert_eq!((r.status, r.code()), (400, Some(-32020)), "{}", r.text());
    // Both v999 → -32022 with supported/requested.
    let r = rpc(
        a,
        json!(7),
        "server/discover",
        json!({"_meta": m}),
        &[("MCP-Protocol-Version", "v999.0.0")],
    );
    assert_eq!((r.status, r.code()), (400, Some(-32022)), "{}", r.text());
    let data = &r.json()["error"]["data"];
    assert_eq!(data["supported"], json!(["2026-07-28"]));
    assert_eq!(data["requested"], "v999.0.0");
    assert_eq!(r.json()["id"], 7);
}

#[test]
fn removed_and_unknown_methods_are_404() {
    let p = pool();
    for (i, m) in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "unknown/method",
        // Tasks v1 methods removed by SEP-2663 (tasks/get etc. exist: tests/backend/tasks.rs).
        "tasks/list",
        "tasks/result",
    ]
    .iter()
    .enumerate()
    {
        let r = rpc(p.addrs()[0], json!(i), m, json!({}), &[]);
        assert_eq!(
            (r.status, r.code()),
            (404, Some(-32601)),
            "{m}: {}",
            r.text()
        );
        assert_eq!(r.json()["id"], json!(i), "{m}");
    }
}

#[test]
fn lists_and_reads_carry_cache_hints_and_lists_never_answer_input_required() {
    let p = pool();
    let a = p.addrs()[0];
    let elicit_caps = json!({"elicitation": {}, "sampling": {}, "roots": {}});
    for (method, key) in [
        ("tools/list", "tools"),
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ] {
        let r = rpc(
            a,
            json!(1),
            method,
            json!({"_meta": meta(elicit_caps.clone())}),
            &[],
        );
        let res = r.result();
        assert_eq!(res["resultType"], "complete", "{method}");
        assert!(
            res[key].as_array().is_some_and(|v| !v.is_empty()),
            "{method}: {res}"
        );
        assert!(res["ttlMs"].as_u64().is_some(), "{method}");
        assert!(
            matches!(res["cacheScope"].as_str(), Some("public" | "private")),
            "{method}"
        );
    }
    let r = rpc(
        a,
        json!(2),
        "resources/read",
        json!({"uri": "test://static-text"}),
        &[],
    );
    let res = r.result();
    assert_eq!(res["contents"][0]["uri"], "test://static-text");
    assert!(res["ttlMs"].as_u64().is_some() && res["cacheScope"].is_string());
    let r = rpc(
        a,
        json!(3),
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "par"}}),
        &[],
    );
    assert_eq!(
        r.result()["completion"]["values"],
        json!(["paris", "park", "party"])
    );
    // The deploy tool declares an x-mcp-header.
    let tools = rpc(a, json!(4), "tools/list", json!({}), &[]).result();
    let deploy = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "deploy")
        .unwrap()
        .clone();
    assert_eq!(
        deploy["inputSchema"]["properties"]["environment"]["x-mcp-header"],
        "Environment"
    );
}

#[test]
fn missing_capability_and_only_the_declared_kinds_of_input_request() {
    let p = pool();
    let a = p.addrs()[0];
    let r = call(
        a,
        10,
        "test_missing_capability",
        json!({}),
        json!({}),
        None,
        json!({}),
    );
    assert_eq!((r.status, r.code()), (400, Some(-32021)), "{}", r.text());
    assert_eq!(
        r.json()["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    assert_eq!(r.json()["id"], 10);
    // Only sampling declared → no elicitation request.
    let r = call(
        a,
        11,
        "test_input_required_result_capabilities",
        json!({}),
        json!({"sampling": {}}),
        None,
        json!({}),
    );
    let res = r.result();
    assert_eq!(res["resultType"], "input_required");
    let methods: Vec<&str> = res["inputRequests"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["sampling/createMessage"]);
    // Elicitation declared: form mode only.
    let r = call(
        a,
        12,
        "create_repo",
        json!({"repo": "x"}),
        json!({"elicitation": {}}),
        None,
        json!({}),
    );
    assert_eq!(
        r.result()["inputRequests"]["github_login"]["params"]["mode"],
        "form"
    );
}
