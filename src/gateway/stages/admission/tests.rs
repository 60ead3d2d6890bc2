//! Unit tests of admission: each refusal on the head alone, and what stays allowed.

use super::*;

/// [`admit`] with the config's own key headers, as the gateway calls it.
fn admit_cfg(p: &Parts, c: &Config) -> Result<Admitted, Rejection> {
    admit(p, c, &c.key_headers())
}

fn config() -> Config {
    Config::parse(
        "pools: { p: { instances: [127.0.0.1:1] } }\ndefault_route: { pool: p }\nlimits: { max_body_bytes: 100, max_header_bytes: 400 }\n",
        "test.yaml",
    )
    .unwrap()
}

/// An HTTP/1.1 request head with `Host: gw` and these headers.
fn head(method: &str, path: &str, headers: &[(&str, &str)]) -> Parts {
    head_without_host(method, path, &[&[("host", "gw")], headers].concat())
}

fn head_without_host(method: &str, path: &str, headers: &[(&str, &str)]) -> Parts {
    let mut b = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

const GOOD: &[(&str, &str)] = &[
    ("mcp-protocol-version", "2026-07-28"),
    ("mcp-method", "tools/call"),
    ("mcp-name", " get_weather "),
];

fn refused(p: Parts) -> (u16, &'static str) {
    let r = admit_cfg(&p, &config()).unwrap_err();
    (r.status, r.reason)
}

#[test]
fn a_good_head_is_admitted_with_its_claims() {
    let a = admit_cfg(&head("POST", "/mcp", GOOD), &config()).unwrap();
    assert_eq!(a.method.as_deref(), Some("tools/call"));
    assert_eq!(a.name.as_deref(), Some("get_weather"));
    assert!(!a.doomed);
}

#[test]
fn path_method_origin_and_sizes_are_refused_before_the_body() {
    assert_eq!(refused(head("POST", "/other", GOOD)), (404, "not-found"));
    assert_eq!(
        refused(head("GET", "/mcp", GOOD)),
        (405, "method-not-allowed")
    );
    let evil = [GOOD, &[("origin", "https://evil.example")]].concat();
    assert_eq!(
        refused(head("POST", "/mcp", &evil)),
        (403, "origin-refused")
    );
    let big = "x".repeat(400);
    let fat = [GOOD, &[("x-pad", big.as_str())]].concat();
    assert_eq!(
        refused(head("POST", "/mcp", &fat)),
        (431, "headers-too-large")
    );
    let long = [GOOD, &[("content-length", "101")]].concat();
    assert_eq!(
        refused(head("POST", "/mcp", &long)),
        (413, "body-too-large")
    );
}

#[test]
fn headers_that_doom_the_request_are_flagged_not_refused() {
    // The answer needs the body's id, so admission only flags it.
    let a = admit_cfg(
        &head("POST", "/mcp", &[("mcp-method", "tools/call")]),
        &config(),
    )
    .unwrap();
    assert!(a.doomed);
    let old = [
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-method", "tools/list"),
    ];
    assert!(
        admit_cfg(&head("POST", "/mcp", &old), &config())
            .unwrap()
            .doomed
    );
}

#[test]
fn a_name_on_a_method_without_one_is_ignored() {
    let h = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
        ("mcp-name", "x"),
    ];
    assert_eq!(
        admit_cfg(&head("POST", "/mcp", &h), &config())
            .unwrap()
            .name,
        None
    );
}

#[test]
fn header_shapes_other_readers_merge_are_refused() {
    let with = |extra: &[(&str, &str)]| refused(head("POST", "/mcp", &[GOOD, extra].concat()));
    let dup = "duplicate-header";
    assert_eq!(
        with(&[
            ("origin", "http://localhost"),
            ("origin", "https://evil.example")
        ])
        .1,
        dup
    );
    assert_eq!(
        with(&[("content-length", "2"), ("content-length", "2")]).1,
        dup
    );
    assert_eq!(
        with(&[("authorization", "Bearer a"), ("authorization", "Bearer b")]).1,
        dup
    );
    assert_eq!(with(&[("host", "other")]).1, dup);
    assert_eq!(
        with(&[("connection", "keep-alive, Mcp-Name")]).1,
        "connection-lists-checked-header"
    );
    assert_eq!(
        with(&[("connection", "content-length")]).1,
        "connection-lists-checked-header"
    );
    assert_eq!(
        with(&[("mcp_name", "deploy_prod")]),
        (400, "ambiguous-header-name")
    );
    assert_eq!(
        with(&[("Mcp_Param_Region", "eu")]).1,
        "ambiguous-header-name"
    );
    // HTTP/1.1 without Host.
    assert_eq!(
        refused(head_without_host("POST", "/mcp", GOOD)).1,
        "host-missing"
    );
    // What stays allowed: hop-by-hop tokens, other underscores, one of each singleton.
    let fine = [
        ("connection", "keep-alive, x-trace"),
        ("x_api_key", "k"),
        ("origin", "http://localhost"),
    ];
    assert!(admit_cfg(&head("POST", "/mcp", &[GOOD, &fine].concat()), &config()).is_ok());
}

/// A config keying a rate limit on `x-tenant` and a hash pool on `x-shard`.
fn keyed() -> Config {
    Config::parse(
        "pools:\n  p: { instances: [127.0.0.1:1] }\n  h: { instances: [127.0.0.1:2], balance: hash, hash_key: 'header:X-Shard' }\ndefault_route: { pool: p }\nroutes: [{ match: { method: ping }, pool: h }]\nrate_limits:\n  - { name: t, key: ['header:x-tenant', name], rate: 1/s }\n  - { name: t2, key: ['header:X-Tenant'], rate: 1/s }\n",
        "test.yaml",
    )
    .unwrap()
}

#[test]
fn key_headers_are_what_limits_and_hash_pools_key_on() {
    let names: Vec<String> = keyed()
        .key_headers()
        .iter()
        .map(|h| h.to_string())
        .collect();
    // Once each, lower case.
    assert_eq!(names, ["x-shard", "x-tenant"]);
    assert!(config().key_headers().is_empty());
}

#[test]
fn a_key_header_sent_twice_or_under_a_folding_name_is_refused() {
    let c = keyed();
    let with = |extra: &[(&str, &str)]| {
        admit_cfg(&head("POST", "/mcp", &[GOOD, extra].concat()), &c)
            .map(|_| ())
            .map_err(|r| (r.status, r.code, r.reason, r.message.to_string()))
    };
    let (status, code, reason, msg) =
        with(&[("x-tenant", "fresh-1"), ("X-Tenant", "acme")]).unwrap_err();
    assert_eq!(
        (status, code, reason),
        (400, -32600, "duplicate-key-header")
    );
    assert_eq!(
        msg,
        "The x-tenant header is sent more than once, and this gateway keys rate limits or load \
         balancing on it; send it once"
    );
    let (_, _, reason, msg) = with(&[("x-tenant", "fresh-1"), ("x_tenant", "acme")]).unwrap_err();
    assert_eq!(reason, "ambiguous-key-header");
    assert!(
        msg.starts_with("The header \"x_tenant\" is read as \"x-tenant\""),
        "{msg}"
    );
    assert_eq!(
        with(&[("X_TENANT", "acme")]).unwrap_err().2,
        "ambiguous-key-header"
    );
    assert_eq!(
        with(&[("x-shard", "a"), ("x-shard", "b")]).unwrap_err().2,
        "duplicate-key-header"
    );
    // Hop-by-hop: read once by the gateway, never by the upstream.
    assert!(with(&[("x-tenant", "acme"), ("connection", "x-tenant")]).is_ok());
    // One copy of each, other headers twice, and unkeyed names with underscores pass.
    assert!(with(&[("x-tenant", "acme"), ("x-shard", "s")]).is_ok());
    assert!(with(&[("x-other", "1"), ("x-other", "2"), ("x_tenant_id", "1")]).is_ok());
    // Without keys in the config, the same headers are nobody's business.
    let plain = config();
    let twice = [GOOD, &[("x-tenant", "a"), ("x-tenant", "b")]].concat();
    assert!(admit_cfg(&head("POST", "/mcp", &twice), &plain).is_ok());
}

/// Whether a good head with `name: value` for each of `values` is admitted, value by value.
fn admitted_with(name: &str, values: &[&str]) -> Vec<bool> {
    let admit_one = |v: &&str| {
        let h = [GOOD, &[(name, *v)]].concat();
        admit_cfg(&head("POST", "/mcp", &h), &config()).is_ok()
    };
    values.iter().map(admit_one).collect()
}

#[test]
fn origins_by_the_one_rule_in_any_case() {
    // `config::OriginsConfig::allows`, the backend's rule too: scheme and host in any case.
    let origins = [
        "http://localhost:6274",
        "HTTP://LocalHost:6274",
        "https://[::1]",
        "http://localhost.evil.example",
    ];
    assert_eq!(admitted_with("origin", &origins), [true, true, true, false]);
}

#[test]
fn no_spelling_of_json_is_refused() {
    // Admission does not read the request's `Content-Type` (the gateway forwards it; the
    // backend checks it, and the gateway reads the response's, through `mcp::media`).
    let json = [
        "application/json",
        "Application/JSON; charset=utf-8",
        " application/json ",
    ];
    assert_eq!(admitted_with("content-type", &json), [true; 3]);
}
