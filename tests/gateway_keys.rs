//! What the gateway uses as a key means one thing to every reader behind it, over real loopback
//! sockets: a query key (`access_token` in any spelling a framework decodes) and the arguments of
//! a cached request (numbers as written). Upstreams are recording ones, so "never reached the
//! upstream" and "both reached it" are counted, not assumed.

mod support;

use serde_json::json;
use support::auth::testkeys::{self, *};
use support::auth::*;
use support::*;

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
