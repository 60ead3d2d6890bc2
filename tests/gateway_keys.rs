//! What the gateway uses as a key means one thing to every reader behind it, over real loopback
//! sockets: a query key (`access_token` in any spelling a framework decodes). Upstreams are
//! recording ones, so "never reached the upstream" is counted, not assumed.

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
