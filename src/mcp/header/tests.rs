//! Tests of the header rules: value decoding, claims, names as folding readers see them.
use super::*;

#[test]
fn decodes_the_digest_examples() {
    assert_eq!(
        decode_value(b"=?base64?bcOpdMOpbw==?=", true).unwrap(),
        "météo"
    );
    assert_eq!(
        decode_value(b"=?base64?ZmlsZTovLy9kb25uw6llcy9hLnR4dA==?=", true).unwrap(),
        "file:///données/a.txt"
    );
    assert_eq!(
        decode_value(b"=?base64?IGV1LXdlc3Qg?=", true).unwrap(),
        " eu-west "
    );
    assert_eq!(
        decode_value(b"=?base64?PT9iYXNlNjQ/eD89?=", true).unwrap(),
        "=?base64?x?="
    );
}

#[test]
fn trims_and_keeps_case() {
    assert_eq!(
        decode_value(b"   get_weather \t", true).unwrap(),
        "get_weather"
    );
    assert_eq!(decode_value(b"TOOLS/CALL", false).unwrap(), "TOOLS/CALL");
}

#[test]
fn rejects_bad_base64_and_treats_near_misses_as_literals() {
    assert_eq!(
        decode_value(b"=?base64?bcOpdMOpbw?=", true),
        Err(ValueProblem::BadBase64)
    );
    assert_eq!(
        decode_value(b"=?base64?bc!!?=", true),
        Err(ValueProblem::BadBase64)
    );
    assert_eq!(
        decode_value(b"=?base64?/w==?=", true),
        Err(ValueProblem::NotUtf8)
    );
    assert_eq!(
        decode_value(b"=?BASE64?Z2V0X3dlYXRoZXI=?=", true).unwrap(),
        "=?BASE64?Z2V0X3dlYXRoZXI=?="
    );
    assert_eq!(
        decode_value(b"=?base64?Z2V0", true).unwrap(),
        "=?base64?Z2V0"
    );
    assert_eq!(
        decode_value("caf\u{e9}".as_bytes(), true),
        Err(ValueProblem::BadCharacters)
    );
    assert_eq!(
        decode_value(b"a\x00b", true),
        Err(ValueProblem::BadCharacters)
    );
}

#[test]
fn encode_round_trips() {
    for v in [
        "get_weather",
        "météo",
        " eu-west ",
        "=?base64?x?=",
        "a\nb",
        "file:///a%20b.txt",
    ] {
        let enc = encode_value(v);
        assert_eq!(decode_value(enc.as_bytes(), true).unwrap(), v, "{enc}");
    }
    assert_eq!(encode_value("get_weather"), "get_weather");
    assert_eq!(encode_value("météo"), "=?base64?bcOpdMOpbw==?=");
}

#[test]
fn claims_detect_duplicates() {
    let mut h = HeaderMap::new();
    h.append("mcp-name", "a".parse().unwrap());
    assert_eq!(claim(&h, NAME, true), Claim::Present(Cow::Borrowed("a")));
    h.append("Mcp-Name", "a".parse().unwrap());
    assert_eq!(
        claim(&h, NAME, true),
        Claim::Invalid(ValueProblem::Duplicate)
    );
    assert_eq!(claim(&h, METHOD, false), Claim::Absent);
}

#[test]
fn key_headers_have_one_reading_or_none() {
    let h = |pairs: &[(&str, &str)]| -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    };
    let t = "x-tenant";
    assert_eq!(key_header(&h(&[]), t), KeyHeader::Absent);
    assert_eq!(
        key_header(&h(&[("X-Tenant", "acme")]), t),
        KeyHeader::One(b"acme")
    );
    let two = h(&[("x-tenant", "fresh-1"), ("X-TENANT", "acme")]);
    assert_eq!(key_header(&two, t), KeyHeader::Repeated);
    let folded = h(&[("x-tenant", "fresh-1"), ("X_Tenant", "acme")]);
    assert_eq!(key_header(&folded, t), KeyHeader::Shadowed("x_tenant"));
    assert_eq!(
        key_header(&h(&[("x_tenant", "acme")]), t),
        KeyHeader::Shadowed("x_tenant")
    );
    // Other names, underscores included, do not matter.
    let other = h(&[
        ("x-tenant", "acme"),
        ("x_tenant_id", "1"),
        ("x-tenants", "2"),
    ]);
    assert_eq!(key_header(&other, t), KeyHeader::One(b"acme"));
    // A key configured with an underscore is shadowed by its dashed spelling.
    let dashed = h(&[("x_tenant", "acme"), ("x-tenant", "fresh")]);
    assert_eq!(
        key_header(&dashed, "x_tenant"),
        KeyHeader::Shadowed("x-tenant")
    );
    assert_eq!(folded_name("Mcp_Name").as_deref(), Some("mcp-name"));
    assert_eq!(folded_name("mcp-name"), None);
    assert!(folds_into_checked("MCP_PARAM_REGION") && !folds_into_checked("x_api_key"));
}

#[test]
fn bearer() {
    let mut h = HeaderMap::new();
    assert_eq!(bearer_token(&h), None);
    h.insert("authorization", "Bearer alice".parse().unwrap());
    assert_eq!(bearer_token(&h), Some("alice"));
    h.insert("authorization", "Basic xyz".parse().unwrap());
    assert_eq!(bearer_token(&h), None);
}

#[test]
fn folding_readers_see_underscores_and_case_as_one_name() {
    assert!(folds_to("x_mcp_edge_subject", "x-mcp-edge-subject"));
    assert!(folds_to("X-Mcp-Edge_Subject", "x-mcp-edge-subject"));
    assert!(!folds_to("x-mcp-edge-subjects", "x-mcp-edge-subject"));
    assert!(!folds_to("x.mcp.edge.subject", "x-mcp-edge-subject"));
    let mut h = HeaderMap::new();
    for (k, v) in [
        ("x-mcp-edge-subject", "a"),
        ("x_mcp_edge_subject", "admin"),
        ("x_mcp-edge_subject", "root"),
        ("x-tenant", "t"),
    ] {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h.append("x-mcp-edge-subject", "b".parse().unwrap());
    for name in shadows_of(&h, &[http::HeaderName::from_static("x-mcp-edge-subject")]) {
        h.remove(name);
    }
    let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
    assert_eq!(left, ["x-tenant"]);
}

/// How readers behind the gateway turn a field name into the name they look up: every HTTP
/// reader folds ASCII case; CGI/WSGI-style readers also read `_` as `-` (and upper-case
/// it, `HTTP_X_MCP_EDGE_SUBJECT`, which the case fold already covers).
fn readers(name: &str) -> [String; 2] {
    let lower = name.to_ascii_lowercase();
    [lower.clone(), lower.replace('_', "-")]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    /// Whatever names a client sends around an asserted one, after the removal no reader
    /// model finds the asserted name among what is left.
    #[test]
    fn no_reader_finds_an_asserted_name_after_the_shadows_are_removed(
        picks in proptest::collection::vec(
            (
                proptest::sample::select(&["x-mcp-edge-subject", "x-tenant", "traceparent", "x-other", "x-tenants"][..]),
                proptest::collection::vec(0u8..4, 20),
            ),
            1..8,
        )
    ) {
        // Each byte of a base name kept, upper-cased, a dash turned into '_', or both.
        let names: Vec<String> = picks
            .iter()
            .map(|(base, how)| {
                base.bytes()
                    .zip(how.iter().cycle())
                    .map(|(b, h)| match (b, h) {
                        (b'-', 1 | 3) => '_',
                        (b, 2 | 3) => b.to_ascii_uppercase() as char,
                        (b, _) => b as char,
                    })
                    .collect()
            })
            .collect();
        let asserted = [
            http::HeaderName::from_static("x-mcp-edge-subject"),
            http::HeaderName::from_static("x-tenant"),
            http::HeaderName::from_static("traceparent"),
        ];
        let mut h = HeaderMap::new();
        for n in &names {
            h.append(http::HeaderName::from_bytes(n.as_bytes()).unwrap(), "v".parse().unwrap());
        }
        for name in shadows_of(&h, &asserted) {
            h.remove(name);
        }
        for k in h.keys() {
            for seen in readers(k.as_str()) {
                proptest::prop_assert!(
                    !asserted.iter().any(|a| a.as_str() == seen),
                    "{k} is read as {seen}"
                );
            }
        }
    }
}
