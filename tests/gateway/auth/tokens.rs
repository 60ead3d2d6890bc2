//! The gateway as an OAuth 2.1 resource server, over real loopback sockets: keys and
//! tokens made at run time, the JWKS served by a loopback HTTP server (and from a file). Every
//! refusal is checked for its status, `WWW-Authenticate` and JSON-RPC body; the upstream is a
//! recording one, so "never reached the upstream" is observed, not assumed.

use crate::support::auth::testkeys::{self, *};
use crate::support::auth::*;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

const RESOURCE: &str = "https://mcp.test/mcp";
const MD: &str = "https://mcp.test/.well-known/oauth-protected-resource/mcp";

fn gateway(up: &Upstreams, jwks: &str, extra: &str) -> mcp_edge::gateway::RunningGateway {
    simple_gateway(up, &auth_yaml(RESOURCE, jwks, extra))
}

fn invalid(description: &str) -> String {
    format!(
        r#"Bearer error="invalid_token", error_description="{description}", scope="mcp", resource_metadata="{MD}""#
    )
}

#[test]
fn every_bad_token_gets_its_exact_answer_and_never_reaches_the_upstream() {
    let (rsa_key, ec_key) = (rsa("rsa-1"), ec("ec-1"));
    let jwks = JwksServer::start(testkeys::jwks(&[&rsa_key, &ec_key]));
    let up = Upstreams::start(1);
    let gw = gateway(&up, &url_jwks(&jwks), "  scopes: [mcp]\n");
    let good = claims(ISS, RESOURCE, "alice", "mcp");
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = good.clone();
        f(&mut c);
        c
    };

    // No token: 401 without error=, with scope and resource_metadata.
    let r = call_as(&gw, "/mcp", None, "echo", "echo", 1);
    expect_refusal(
        &r,
        401,
        -31008,
        1,
        &format!(r#"Bearer scope="mcp", resource_metadata="{MD}""#),
    );

    let cases: Vec<(String, &str)> = vec![
        (
            sign(
                &rsa_key,
                &with(&|c| c["exp"] = json!(testkeys::now() - 600)),
            ),
            "The token has expired",
        ),
        (
            sign(&ec_key, &with(&|c| c["nbf"] = json!(testkeys::now() + 600))),
            "The token is not valid yet (nbf)",
        ),
        (
            sign(&rsa_key, &with(&|c| c["iss"] = json!("https://evil.test"))),
            "The token was issued by another issuer",
        ),
        (
            sign(
                &ec_key,
                &with(&|c| c["aud"] = json!("https://other.test/mcp")),
            ),
            "The token was not issued for this resource (aud)",
        ),
        (
            unsigned("rsa-1", &good),
            "The token's algorithm none is not accepted",
        ),
        (
            forge_hs256(&rsa_key, &good),
            "The token's algorithm HS256 is not accepted",
        ),
        (
            tamper(&sign(&rsa_key, &good), &with(&|c| c["sub"] = json!("root"))),
            "The token's signature is invalid",
        ),
        (
            "garbage".to_string(),
            "The access token is not a well-formed JWT",
        ),
    ];
    for (i, (token, description)) in cases.iter().enumerate() {
        let id = 10 + i as u64;
        let r = call_as(&gw, "/mcp", Some(token), "echo", "echo", id);
        expect_refusal(&r, 401, -31008, id, &invalid(description));
    }

    // A token in the query string is refused even when it is valid.
    let ok = sign(&rsa_key, &good);
    let r = call_as(
        &gw,
        &format!("/mcp?access_token={ok}"),
        Some(&ok),
        "echo",
        "echo",
        30,
    );
    let d = "Access tokens must be sent in the Authorization header, never in the query string";
    expect_refusal(
        &r,
        400,
        -31008,
        30,
        &format!(
            r#"Bearer error="invalid_request", error_description="{d}", resource_metadata="{MD}""#
        ),
    );

    // Two Authorization headers: 400 invalid_request (upstreams could read either).
    let mut h = call_headers("echo");
    h.push(("Authorization", format!("Bearer {ok}")));
    h.push(("Authorization", "Bearer other".into()));
    let r = crate::support::http::request(
        gw.mcp_addr,
        "POST",
        "/mcp",
        &refs(&h),
        call(32, "echo").as_bytes(),
    );
    let d = "Send exactly one Authorization header";
    expect_refusal(
        &r,
        400,
        -31008,
        32,
        &format!(
            r#"Bearer error="invalid_request", error_description="{d}", resource_metadata="{MD}""#
        ),
    );

    // A valid token without the required scope: 403 insufficient_scope.
    let r = call_as(
        &gw,
        "/mcp",
        Some(&sign(&ec_key, &with(&|c| c["scope"] = json!("other")))),
        "echo",
        "echo",
        31,
    );
    let msg = "The token lacks a required scope; needed: mcp";
    expect_refusal(
        &r,
        403,
        -31009,
        31,
        &format!(
            r#"Bearer error="insufficient_scope", error_description="{msg}", scope="mcp", resource_metadata="{MD}""#
        ),
    );
    assert_eq!(up.count(), 0, "no refused request reached the upstream");

    // Valid: forwarded, without the Authorization header (no token passthrough).
    let r = call_as(&gw, "/mcp", Some(&ok), "echo", "echo", 40);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["id"], 40);
    let got = up.received();
    assert_eq!(got.len(), 1);
    assert!(
        got[0].headers.get("authorization").is_none(),
        "the token was forwarded"
    );
}

#[test]
fn unknown_kid_then_rotation_is_picked_up_and_unknown_kids_cannot_flood_the_issuer() {
    let old = ed("2026-01");
    let jwks = JwksServer::start(testkeys::jwks(&[&old]));
    let up = Upstreams::start(1);
    let gw = gateway(
        &up,
        &format!(
            "{{url: {}, min_refresh: 1s, unknown_kid_interval: 2s}}",
            jwks.url()
        ),
        "",
    );
    let r = call_as(
        &gw,
        "/mcp",
        Some(&sign(&old, &claims(ISS, RESOURCE, "a", ""))),
        "echo",
        "echo",
        1,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let fetched = jwks.hits();
    assert!(fetched >= 1);

    // A key the issuer has not published yet: 401, and a burst of invented kids costs the
    // issuer at most one extra fetch within the interval.
    let new = ed("2026-02");
    let token = sign(&new, &claims(ISS, RESOURCE, "a", ""));
    for i in 0..20 {
        let r = call_as(&gw, "/mcp", Some(&token), "echo", "echo", 100 + i);
        let d = "The token was signed with a key the issuer's key set does not contain";
        let challenge = format!(
            r#"Bearer error="invalid_token", error_description="{d}", resource_metadata="{MD}""#
        );
        expect_refusal(&r, 401, -31008, 100 + i, &challenge);
    }
    assert!(
        jwks.hits() <= fetched + 2,
        "{} fetches for 20 unknown kids",
        jwks.hits() - fetched
    );

    // Rotation: the new key is published; after the interval the next unknown kid re-fetches.
    jwks.set(testkeys::jwks(&[&old, &new]));
    assert!(
        eventually(Duration::from_secs(15), || {
            call_as(&gw, "/mcp", Some(&token), "echo", "echo", 200).status == 200
        }),
        "the rotated key was never picked up"
    );
    // The old key keeps working as long as it is published.
    let r = call_as(
        &gw,
        "/mcp",
        Some(&sign(&old, &claims(ISS, RESOURCE, "a", ""))),
        "echo",
        "echo",
        201,
    );
    assert_eq!(r.status, 200);
}

#[test]
fn jwks_from_a_file_and_the_protected_resource_metadata() {
    let k = rsa("file-key");
    let path = std::env::temp_dir().join(format!("mcp-edge-gw-auth-{}.json", free_port()));
    std::fs::write(&path, testkeys::jwks(&[&k])).unwrap();
    let up = Upstreams::start(1);
    let gw = gateway(
        &up,
        &format!("{{file: {}}}", path.display()),
        "  scopes: [mcp]\n  authorization_servers: [https://login.test]\n  scopes_supported: [mcp, deploy:write]\n",
    );
    let r = call_as(
        &gw,
        "/mcp",
        Some(&sign(&k, &claims(ISS, RESOURCE, "a", "mcp"))),
        "echo",
        "echo",
        1,
    );
    assert_eq!(r.status, 200, "{}", r.text());

    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let r = crate::support::http::request(gw.mcp_addr, "GET", path, &[], b"");
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(
            r.json(),
            json!({
                "resource": RESOURCE,
                "authorization_servers": ["https://login.test"],
                "scopes_supported": ["mcp", "deploy:write"],
                "bearer_methods_supported": ["header"],
            })
        );
    }
    let r = crate::support::http::request(
        gw.mcp_addr,
        "GET",
        "/.well-known/oauth-protected-resource/other",
        &[],
        b"",
    );
    assert_eq!(r.status, 404);
    let _ = std::fs::remove_file(path);
}

#[test]
fn jwks_refresh_failures_keep_the_old_keys_and_are_counted() {
    let k = ed("keep");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    jwks.set_cache_control("max-age=1");
    let up = Upstreams::start(1);
    let gw = gateway(&up, &url_jwks(&jwks), "");
    let t = sign(&k, &claims(ISS, RESOURCE, "a", ""));
    assert_eq!(
        call_as(&gw, "/mcp", Some(&t), "echo", "echo", 1).status,
        200
    );
    jwks.set("not json".into());
    let failures = || {
        let m = crate::support::http::raw(
            gw.admin_addr.unwrap(),
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .text();
        m.lines()
            .find(|l| l.starts_with("mcp_edge_auth_jwks_refresh_failures_total "))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(
        eventually(Duration::from_secs(15), || failures() >= 1),
        "no failure counted"
    );
    assert_eq!(
        call_as(&gw, "/mcp", Some(&t), "echo", "echo", 2).status,
        200,
        "the old keys stay in use"
    );
}

#[test]
fn jwks_over_https_with_a_private_ca_and_refused_without_it() {
    let k = ec("tls");
    let (ca_pem, tls) = test_tls();
    let jwks = JwksServer::start_with(testkeys::jwks(&[&k]), Some(tls));
    let ca = std::env::temp_dir().join(format!("mcp-edge-gw-auth-ca-{}.pem", free_port()));
    std::fs::write(&ca, ca_pem).unwrap();
    let up = Upstreams::start(1);
    let t = sign(&k, &claims(ISS, RESOURCE, "a", ""));
    let trusted = format!("{{url: {}, ca_file: {}}}", jwks.https_url(), ca.display());
    let gw = gateway(&up, &trusted, "");
    let r = call_as(&gw, "/mcp", Some(&t), "echo", "echo", 1);
    assert_eq!(r.status, 200, "{}", r.text());
    drop(gw);

    // Without the CA the certificate is not trusted: no keys, 503, and the failure is counted.
    let gw = gateway(&up, &format!("{{url: {}}}", jwks.https_url()), "");
    let r = call_as(&gw, "/mcp", Some(&t), "echo", "echo", 2);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -31010);
    assert_eq!(r.json()["id"], 2);
    assert!(r.header("www-authenticate").is_none());
    let m = crate::support::http::raw(
        gw.admin_addr.unwrap(),
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .text();
    let failures = m
        .lines()
        .find(|l| l.starts_with("mcp_edge_auth_jwks_refresh_failures_total "))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
    assert!(failures.is_some_and(|n| n >= 1), "{m}");
    let _ = std::fs::remove_file(ca);
}

#[test]
fn opaque_tokens_are_introspected_and_the_answers_cached() {
    let k = ed("jwt-too");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let intro = IntrospectServer::start();
    let exp = testkeys::now() + 3600;
    intro.answers.lock().unwrap().insert(
        "opaque-alice".into(),
        json!({"active": true, "iss": ISS, "aud": RESOURCE, "sub": "alice", "scope": "mcp", "exp": exp}),
    );
    intro.answers.lock().unwrap().insert(
        "opaque-other-aud".into(),
        json!({"active": true, "iss": ISS, "aud": "https://other.test", "sub": "eve", "scope": "mcp", "exp": exp}),
    );
    let up = Upstreams::start(1);
    let extra = format!(
        "  scopes: [mcp]\n  introspection: {{url: {}, client_id: mcp-edge, client_secret: s3cret, negative_ttl: 1h}}\n  forward:\n    headers: {{x-mcp-edge-subject: principal}}\n",
        intro.url()
    );
    let gw = gateway(&up, &url_jwks(&jwks), &extra);

    for id in 1..=3 {
        let r = call_as(&gw, "/mcp", Some("opaque-alice"), "echo", "echo", id);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(intro.hits(), 1, "active answers are cached");
    let basic = intro.last_authorization.lock().unwrap().clone().unwrap();
    assert_eq!(basic, "Basic bWNwLWVkZ2U6czNjcmV0", "client_secret_basic");
    assert_eq!(up.received()[0].headers["x-mcp-edge-subject"], "alice");

    for (token, description) in [
        (
            "opaque-unknown",
            "The token is not active (revoked, expired or unknown to the issuer)",
        ),
        (
            "opaque-other-aud",
            "The token was not issued for this resource (aud)",
        ),
    ] {
        for id in 10..12 {
            let r = call_as(&gw, "/mcp", Some(token), "echo", "echo", id);
            expect_refusal(&r, 401, -31008, id, &invalid(description));
        }
    }
    assert_eq!(intro.hits(), 3, "refusals are cached too");
    // JWTs are still verified locally.
    let r = call_as(
        &gw,
        "/mcp",
        Some(&sign(&k, &claims(ISS, RESOURCE, "bob", "mcp"))),
        "echo",
        "echo",
        20,
    );
    assert_eq!(r.status, 200);
    assert_eq!(intro.hits(), 3);
}
