//! A 2025-era session with `auth` on, over loopback with a real JWKS server: the session is
//! bound to who the token stands for (its issuer and subject), not to the token's bytes, so a
//! client that refreshes its token keeps its session; another subject's token never opens it,
//! and a token auth refuses is answered by auth, before any session is looked at.

use serde_json::json;

use super::raw::{on_session, open};
use super::{backend, gateway};
use crate::support::auth::testkeys::{self, *};
use crate::support::auth::*;

const RESOURCE: &str = "http://127.0.0.1/mcp";

#[test]
fn a_refreshed_token_keeps_the_session_and_another_subjects_does_not() {
    let k = ec("legacy");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let pool = backend();
    let gw = gateway(&pool, &auth_yaml(RESOURCE, &url_jwks(&jwks), ""));
    let first = sign(&k, &claims(ISS, RESOURCE, "alice", "tools"));
    let mut later = claims(ISS, RESOURCE, "alice", "tools");
    later["iat"] = json!(now() + 60);
    later["exp"] = json!(now() + 7200);
    let refreshed = sign(&k, &later);
    assert_ne!(first, refreshed);
    let bearer = |t: &str| format!("Bearer {t}");

    let sid = open(gw.mcp_addr, Some(&bearer(&first)));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}});
    let r = on_session(gw.mcp_addr, &sid, Some(&bearer(&refreshed)), &call);
    assert_eq!(
        r.status,
        200,
        "the refreshed token lost the session: {}",
        r.text()
    );
    assert_eq!(
        r.json()["result"]["content"][0]["text"],
        "hi",
        "{}",
        r.text()
    );

    let mallory = sign(&k, &claims(ISS, RESOURCE, "mallory", "tools"));
    let r = on_session(gw.mcp_addr, &sid, Some(&bearer(&mallory)), &call);
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -31014);

    let forged = tamper(&refreshed, &claims(ISS, RESOURCE, "alice", "tools admin"));
    let r = on_session(gw.mcp_addr, &sid, Some(&bearer(&forged)), &call);
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r
        .header("www-authenticate")
        .is_some_and(|c| c.starts_with("Bearer")));
}

/// With auth on, a 2026 client's listen stream on a federated endpoint rides the session with
/// the 2025-era server that its own calls go over (one rule names the caller for both): a tool
/// its call adds on that session reaches its listen stream. Keyed apart (the token's digest for
/// the stream, the subject for the calls), the change went to a session nobody listened to.
#[test]
fn a_federated_listen_with_a_token_rides_the_session_its_calls_change() {
    use super::{servers::legacy_gateway, LegacyServer, ServerKind};
    use crate::support::http::{good_headers, meta, request};
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let k = ec("legacy-fed");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let ts = LegacyServer::start(ServerKind::TypeScriptV1, 0);
    let extra = format!(
        "{}federation:\n  endpoints:\n    - {{ path: /fed, pools: [ts], collisions: prefix }}\n",
        auth_yaml(RESOURCE, &url_jwks(&jwks), "")
    );
    let gw = legacy_gateway(std::slice::from_ref(&ts), &extra);
    super::super::federation::wait_state(&gw, &["ts"], "fresh");
    let bearer = format!(
        "Bearer {}",
        sign(&k, &claims(ISS, RESOURCE, "alice", "tools"))
    );
    let with_token = |method: &str, name: Option<&str>| {
        let mut h = good_headers(method, name);
        h.push(("Authorization".into(), bearer.clone()));
        h
    };
    let listen = super::catalog::listen_for_tools;
    let (mut stream, _) = listen(gw.mcp_addr, "/fed", Some(&bearer), 44);
    let call_headers = with_token("tools/call", Some("ts__grow"));
    let call_headers: Vec<(&str, &str)> = call_headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "ts__grow", "arguments": {}, "_meta": meta(json!({}))}});
    let r = request(
        gw.mcp_addr,
        "POST",
        "/fed",
        &call_headers,
        call.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let n = stream
        .next_message()
        .expect("the list change of alice's session");
    assert_eq!(n["method"], "notifications/tools/list_changed", "{n}");
}
