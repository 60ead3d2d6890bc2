//! What the gateway uses as a key means one thing to every reader behind it, over real loopback
//! sockets: a query key (`access_token` in any spelling a framework decodes), the arguments of a
//! cached request (numbers as written), and a header used as a rate-limit or hash key (sent once,
//! under one spelling). Upstreams are recording ones, so "never reached the upstream" and "both
//! reached it" are counted, not assumed.

use crate::support;
use crate::support::auth::testkeys::{self, *};
use crate::support::auth::*;
use crate::support::*;
use serde_json::json;

const RESOURCE: &str = "https://mcp.test/mcp";
const MD: &str = "https://mcp.test/.well-known/oauth-protected-resource/mcp";

#[test]
fn a_token_under_an_encoded_access_token_key_is_refused_and_never_forwarded() {
    let key = ec("ec-1");
    let jwks = JwksServer::start(testkeys::jwks(&[&key]));
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, &auth_yaml(RESOURCE, &url_jwks(&jwks), ""));
    let ok = sign(&key, &claims(ISS, RESOURCE, "alice", "mcp"));
    let d = "Access tokens must be sent in the Authorization header, never in the query string";
    let challenge = format!(
        r#"Bearer error="invalid_request", error_description="{d}", resource_metadata="{MD}""#
    );
    for (i, query) in [
        "access%5Ftoken=x",
        "access%5ftoken=x",
        "a=1;ACCESS+TOKEN=x",
        "access_token%5B%5D=x",
        "access%255Ftoken=x",
        // Rack and qs read a bracketed name, qs with allowDots a dotted one, URLSearchParams
        // drops a leading `?`, PHP turns a 0x80 byte into `_`.
        "[access_token]=x",
        "access_token.x=y",
        "?access_token=x",
        "a=1&access%80token=x",
    ]
    .iter()
    .enumerate()
    {
        let id = 1 + i as u64;
        let r = call_as(&gw, &format!("/mcp?{query}"), Some(&ok), "echo", "echo", id);
        expect_refusal(&r, 400, -31008, id, &challenge);
    }
    assert_eq!(up.count(), 0, "a refused request reached the upstream");
    // Other query keys pass, and the same token in its header is forwarded.
    let r = call_as(&gw, "/mcp?access_mode=x", Some(&ok), "echo", "echo", 9);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["id"], json!(9));
    assert_eq!(up.count(), 1);
}

/// A `resources/read` of `file:///a` whose params carry `"page": <page>` as written.
fn read_page(gw: &mcp_edge::gateway::RunningGateway, id: u64, page: &str) -> Reply {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"resources/read","params":{{"uri":"file:///a","page":{page},{META}}}}}"#
    );
    let h = support::http::good_headers("resources/read", Some("file:///a"));
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    post(gw.mcp_addr, &h, &body)
}

#[test]
fn numbers_one_double_holds_alike_are_cached_apart_and_identical_requests_hit() {
    let up = support::cache::resource_upstream();
    let gw = support::cache::gateway(&[up.addr], "");
    let reads = || up.count(|v| v["method"] == "resources/read");
    let mut id = 0;
    let mut read = |page: &str| {
        id += 1;
        let r = read_page(&gw, id, page);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["id"], json!(id));
        support::cache::cache_header(&r).to_string()
    };
    // One double (2^64), two integers for Python, Go's json.Number or BigDecimal.
    assert_eq!(read("18446744073709551616"), "miss");
    assert_eq!(read("18446744073709551617"), "miss");
    assert_eq!(reads(), 2, "both big numbers reached the upstream");
    assert!(read("18446744073709551616").starts_with("hit"));
    assert!(read("18446744073709551617").starts_with("hit"));
    // An int and a float for Python; two integers past 2^53 that are one double.
    assert_eq!(read("1"), "miss");
    assert_eq!(read("1.0"), "miss");
    assert_eq!(read("9007199254740992"), "miss");
    assert_eq!(read("9007199254740993"), "miss");
    assert_eq!(reads(), 6);
    for page in ["1", "1.0", "9007199254740992", "9007199254740993"] {
        assert!(read(page).starts_with("hit"), "{page}");
    }
    assert_eq!(
        reads(),
        6,
        "identical requests were answered from the cache"
    );
}

/// POST a tools/call of `t` with these extra headers (sent as given, duplicates included).
fn call_with(
    gw: &mcp_edge::gateway::RunningGateway,
    id: u64,
    extra: &[(&'static str, &str)],
) -> Reply {
    let mut h = call_headers("t");
    for (k, v) in extra {
        h.push((k, v.to_string()));
    }
    post(gw.mcp_addr, &refs(&h), &call(id, "t"))
}

fn expect_key_refusal(r: &Reply, reason_words: &str) {
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.error_code(), -32600, "{}", r.text());
    assert!(r.text().contains(reason_words), "{}", r.text());
    assert!(r.header("x-mcp-edge-upstream").is_none());
}

#[test]
fn a_rate_limited_tenant_cannot_pass_as_a_fresh_one_by_sending_its_header_twice() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(
        &up,
        "rate_limits:\n  - {name: per-tenant, key: ['header:x-tenant'], rate: 1/m, burst: 1}\n",
    );
    let acme = [("X-Tenant", "acme")];
    assert_eq!(call_with(&gw, 1, &acme).status, 200);
    assert_eq!(
        call_with(&gw, 2, &acme).status,
        429,
        "acme is over its limit"
    );
    let twice = call_with(&gw, 3, &[("x-tenant", "fresh-1"), ("x-tenant", "acme")]);
    expect_key_refusal(&twice, "The x-tenant header is sent more than once");
    let folded = call_with(&gw, 4, &[("x-tenant", "fresh-2"), ("X_Tenant", "acme")]);
    expect_key_refusal(
        &folded,
        r#"The header \"x_tenant\" is read as \"x-tenant\""#,
    );
    assert_eq!(up.count(), 1, "a refused request reached the upstream");
    // One x-tenant still works, once per tenant.
    let fresh = call_with(&gw, 5, &[("x-tenant", "fresh-3")]);
    assert_eq!(fresh.status, 200, "{}", fresh.text());
    assert_eq!(call_with(&gw, 6, &[("x-tenant", "fresh-3")]).status, 429);
    assert_eq!(up.count(), 2);
    let got = up.received();
    let tenants: Vec<_> = got
        .iter()
        .map(|r| r.headers.get_all("x-tenant").iter().count())
        .collect();
    assert_eq!(
        tenants,
        [1, 1],
        "each forwarded request carried one x-tenant"
    );
}

#[test]
fn a_hash_key_header_is_read_once_and_mcp_param_headers_are_sent_once() {
    let up = Upstreams::start(3);
    let cfg = config(
        &[(
            "p",
            &up.addrs,
            "balance: hash\n    hash_key: header:x-tenant",
        )],
        "default_route: {pool: p}\n",
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let twice = call_with(&gw, 1, &[("x-tenant", "acme"), ("x-tenant", "other")]);
    expect_key_refusal(&twice, "The x-tenant header is sent more than once");
    let folded = call_with(&gw, 2, &[("x_tenant", "acme")]);
    expect_key_refusal(&folded, "frameworks that fold '_' into '-'");
    // A repeated Mcp-Param-* header is a header mismatch (-32020), on any tool.
    let param = call_with(
        &gw,
        4,
        &[("Mcp-Param-Region", "eu"), ("Mcp-Param-Region", "us")],
    );
    assert_eq!(param.status, 400, "{}", param.text());
    assert_eq!(param.error_code(), -32020, "{}", param.text());
    assert_eq!(param.json()["id"], json!(4));
    assert_eq!(up.count(), 0, "a refused request reached an upstream");
    // One x-tenant shards as before: every call of a tenant on one instance.
    let served: std::collections::HashSet<String> = (10..16)
        .map(|id| {
            let r = call_with(&gw, id, &[("x-tenant", "acme")]);
            assert_eq!(r.status, 200, "{}", r.text());
            r.header("x-mcp-edge-upstream").unwrap().to_string()
        })
        .collect();
    assert_eq!(served.len(), 1, "{served:?}");
    assert_eq!(up.count(), 6);
}
