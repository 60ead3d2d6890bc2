//! The strict envelope parser (`mcp::envelope`): what it reads, and every document shape it
//! refuses because two JSON readers could read it differently.

use mcp_edge::mcp::envelope::{parse, EnvelopeError};

const GOOD: &str = r#"{"jsonrpc":"2.0","id":"c-17","method":"tools/call","params":{"name":"lookup_invoice","arguments":{"tenant":"acme","number":4411},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}"#;

#[test]
fn reads_the_members_it_needs() {
    let e = parse(GOOD.as_bytes()).unwrap();
    assert_eq!(e.id.as_ref().unwrap().get(), "\"c-17\"");
    assert_eq!(e.method.as_deref(), Some("tools/call"));
    assert_eq!(e.name.as_deref(), Some("lookup_invoice"));
    assert_eq!(e.mcp_name(), Some("lookup_invoice"));
    assert_eq!(e.protocol_version.as_deref(), Some("2026-07-28"));
    assert!(e.has_meta && e.has_client_capabilities);
    assert!(!e.is_retry_leg() && !e.is_notification());
}

#[test]
fn client_capabilities_must_be_an_object_and_are_walked_strictly() {
    let with = |caps: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"io.modelcontextprotocol/clientCapabilities":{caps}}}}}}}"#
        )
    };
    assert!(
        parse(with("{}").as_bytes())
            .unwrap()
            .has_client_capabilities
    );
    assert!(!parse(with("5").as_bytes()).unwrap().has_client_capabilities);
    assert!(
        !parse(with("[{}]").as_bytes())
            .unwrap()
            .has_client_capabilities
    );
    assert!(matches!(
        parse(with(r#"{"sampling":{},"sampling":{}}"#).as_bytes()),
        Err(EnvelopeError::Invalid {
            reason: "duplicate-key",
            ..
        })
    ));
}

#[test]
fn escaped_keys_and_values_are_decoded() {
    let body = r#"{"jsonrpc":"2.0","id":1,"\u006dethod":"tools\/call","params":{"name":"m\u00e9t\u00e9o","_meta":{}}}"#;
    let e = parse(body.as_bytes()).unwrap();
    assert_eq!(e.method.as_deref(), Some("tools/call"));
    assert_eq!(e.name.as_deref(), Some("météo"));
}

fn invalid_reason(body: &str) -> &'static str {
    match parse(body.as_bytes()) {
        Err(EnvelopeError::Invalid { reason, .. }) => reason,
        other => panic!("expected Invalid for {body}, got {other:?}"),
    }
}

#[test]
fn duplicate_keys_are_refused_at_any_depth() {
    assert_eq!(
        invalid_reason(r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#),
        "duplicate-key"
    );
    assert_eq!(
        invalid_reason(r#"{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b"}"#),
        "duplicate-key"
    );
    assert_eq!(
        invalid_reason(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#
        ),
        "duplicate-key"
    );
    assert_eq!(
        invalid_reason(
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"arguments":{"a":{"b":1,"b":2}}}}"#
        ),
        "duplicate-key"
    );
    // The id read before the duplicate is still echoed.
    let err = parse(br#"{"jsonrpc":"2.0","id":9,"method":"a","method":"b"}"#).unwrap_err();
    assert_eq!(err.id().unwrap().get(), "9");
}

#[test]
fn duplicate_keys_are_refused_past_the_inline_keys() {
    // Objects wider than the keys remembered on the stack: duplicates of an early (inline)
    // key and of a late key, and a wide object without duplicates.
    let wide = |extra: &str| {
        let keys: Vec<String> = (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect();
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"arguments":{{{}{extra}}}}}}}"#,
            keys.join(",")
        )
    };
    assert_eq!(invalid_reason(&wide(r#","k3":0"#)), "duplicate-key");
    assert_eq!(invalid_reason(&wide(r#","k30":0"#)), "duplicate-key");
    assert_eq!(invalid_reason(&wide(r#","\u006b39":0"#)), "duplicate-key");
    assert!(parse(wide(r#","k40":0"#).as_bytes()).is_ok());
}

#[test]
fn shapes_that_are_not_one_request() {
    assert_eq!(
        invalid_reason(r#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#),
        "batch"
    );
    assert_eq!(
        invalid_reason(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
        "response-object"
    );
    assert_eq!(invalid_reason(r#"{"jsonrpc":"2.0","id":1}"#), "no-method");
    assert_eq!(invalid_reason(r#"{"id":1,"method":"a"}"#), "not-jsonrpc");
    assert_eq!(
        invalid_reason(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"a"}"#),
        "bad-id"
    );
    assert_eq!(
        invalid_reason(r#"{"jsonrpc":"2.0","id":1,"method":"a","params":[1]}"#),
        "bad-params"
    );
    assert_eq!(invalid_reason("42"), "not-object");
}

#[test]
fn deep_nesting_is_refused_without_recursing_forever() {
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"a","params":{{"x":{}1{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    assert_eq!(invalid_reason(&deep), "too-deep");
    let ok = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"a","params":{{"x":{}1{}}}}}"#,
        "[".repeat(50),
        "]".repeat(50)
    );
    assert!(parse(ok.as_bytes()).is_ok());
}

#[test]
fn syntax_and_encoding_errors_are_parse_errors() {
    for body in [
        &b"{"[..],
        b"not json",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"} trailing",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
        br#"{"jsonrpc":"2.0","id":1,"method":"\ud800"}"#,
        b"",
    ] {
        assert!(
            matches!(parse(body), Err(EnvelopeError::Parse(_))),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn notifications_and_retry_legs() {
    let n = parse(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#).unwrap();
    assert!(n.is_notification());
    let r = parse(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","requestState":"s","inputResponses":{"k":{"action":"accept"}}}}"#).unwrap();
    assert!(r.has_request_state && r.has_input_responses && r.is_retry_leg());
}

#[test]
fn keys_that_fold_to_one_member_are_refused_at_any_depth() {
    // CVE-2026-27896: a reader that folds case takes "Name" (or "nam\u{17f}"...) for "name".
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Name":"b"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","NAME":"b"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"a","METHOD":"b"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"arguments":{"region":"us","Region":"eu"}}}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{},\"param\u{17f}\":{}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"arguments\":{\"kind\":1,\"\u{212a}ind\":2}}}",
    ] {
        assert_eq!(invalid_reason(body), "case-variant-key", "{body}");
    }
}

#[test]
fn a_member_spelled_in_another_case_is_refused_even_alone() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"deploy_prod"}}"#,
        r#"{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"Method":"tools/call"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_META":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolversion":"x"}}}"#,
    ] {
        assert_eq!(invalid_reason(body), "case-variant-key", "{body}");
    }
    // Keys that only look alike are fine.
    assert!(
        parse(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"names":1,"_meta":{}}}"#).is_ok()
    );
}

#[test]
fn a_request_method_without_an_id_is_refused() {
    assert_eq!(
        invalid_reason(
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"deploy_prod"}}"#
        ),
        "missing-id"
    );
    assert!(parse(br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#).is_ok());
}
