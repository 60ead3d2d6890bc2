//! Unit tests of the auth stage, with keys and tokens made at run time (no sockets).

#[path = "testkeys.rs"]
mod testkeys;

use super::jwt::TokenError;
use super::*;
use crate::config::RouteRef;
use serde_json::json;
use testkeys::*;

const ISS: &str = "https://issuer.test";
const AUD: &str = "https://mcp.test/mcp";

fn policy() -> Policy {
    Policy {
        issuer: ISS.into(),
        audience: AUD.into(),
        algorithms: vec![
            jsonwebtoken::Algorithm::RS256,
            jsonwebtoken::Algorithm::ES256,
            jsonwebtoken::Algorithm::EdDSA,
        ],
        leeway_secs: 5,
        principal_claim: "sub".into(),
    }
}

fn now() -> u64 {
    testkeys::now() as u64
}

#[test]
fn each_algorithm_verifies_and_every_flaw_has_its_reason() {
    let keys = [rsa("r1"), ec("e1"), ed("d1")];
    let set = jwt::KeySet::parse(jwks(&keys.iter().collect::<Vec<_>>()).as_bytes()).unwrap();
    assert_eq!(set.keys.len(), 3);
    let p = policy();
    for k in &keys {
        let good = claims(ISS, AUD, "alice", "mcp:read deploy:write");
        let id = jwt::verify(&sign(k, &good), &set, &p, now()).unwrap();
        assert_eq!(id.subject, "alice");
        assert!(id.has_scope("deploy:write"));

        let bad = |c: serde_json::Value| jwt::verify(&sign(k, &c), &set, &p, now()).unwrap_err();
        let mut c = good.clone();
        c["exp"] = json!(testkeys::now() - 60);
        assert_eq!(bad(c), TokenError::Expired);
        let mut c = good.clone();
        c["exp"] = json!(testkeys::now() - 2);
        assert!(
            jwt::verify(&sign(k, &c), &set, &p, now()).is_ok(),
            "within the leeway"
        );
        let mut c = good.clone();
        c["nbf"] = json!(testkeys::now() + 600);
        assert_eq!(bad(c), TokenError::NotYetValid);
        let mut c = good.clone();
        c["iss"] = json!("https://issuer.test/");
        assert_eq!(bad(c), TokenError::Issuer, "iss matches exactly");
        let mut c = good.clone();
        c["aud"] = json!(["https://other.test/mcp"]);
        assert_eq!(bad(c), TokenError::Audience);
        let mut c = good.clone();
        c["aud"] = json!(["https://other.test/mcp", AUD]);
        assert!(
            jwt::verify(&sign(k, &c), &set, &p, now()).is_ok(),
            "aud contains the resource"
        );
        let mut c = good.clone();
        c.as_object_mut().unwrap().remove("exp");
        assert_eq!(bad(c), TokenError::MissingClaim("exp".into()));
        let mut c = good.clone();
        c.as_object_mut().unwrap().remove("sub");
        assert_eq!(bad(c), TokenError::MissingClaim("sub".into()));

        let mut c = good.clone();
        c["sub"] = json!("mallory");
        let tampered = tamper(&sign(k, &good), &c);
        assert_eq!(
            jwt::verify(&tampered, &set, &p, now()),
            Err(TokenError::Signature)
        );
        assert_eq!(
            jwt::verify(&forge_hs256(k, &good), &set, &p, now()),
            Err(TokenError::Algorithm("HS256".into()))
        );
        assert_eq!(
            jwt::verify(&unsigned(&k.kid, &good), &set, &p, now()),
            Err(TokenError::Algorithm("none".into()))
        );
    }
    let stranger = ed("unknown");
    let t = sign(&stranger, &claims(ISS, AUD, "a", ""));
    assert_eq!(
        jwt::verify(&t, &set, &p, now()),
        Err(TokenError::UnknownKey)
    );
    assert_eq!(
        jwt::verify("not.a.jwt", &set, &p, now()),
        Err(TokenError::Malformed)
    );
}

#[test]
fn a_key_is_only_used_for_its_family() {
    // An EC token whose kid names the RSA key finds no key.
    let (r, e) = (rsa("shared"), ec("shared-ec"));
    let set = jwt::KeySet::parse(jwks(&[&r]).as_bytes()).unwrap();
    let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    h.kid = Some("shared".into());
    let t = jsonwebtoken::encode(&h, &claims(ISS, AUD, "a", ""), &e.enc).unwrap();
    assert_eq!(
        jwt::verify(&t, &set, &policy(), now()),
        Err(TokenError::UnknownKey)
    );
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("mcp-edge-auth-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

fn auth_for(extra: &str, keys: &[&TestKey]) -> Auth {
    let file = temp_file(&format!("{}.json", keys[0].kid), &jwks(keys));
    let yaml = format!(
        "pools:\n  p: {{instances: [127.0.0.1:1]}}\n  q: {{instances: [127.0.0.1:2]}}\ndefault_route: {{pool: p}}\n\
         auth:\n  resource: {AUD}\n  issuer: {ISS}\n  jwks: {{file: {}}}\n  scopes: [mcp]\n{extra}",
        file.display()
    );
    let cfg = crate::config::Config::parse(&yaml, "t.yaml").unwrap_or_else(|e| panic!("{e}"));
    Auth::new(&cfg, Arc::new(AuthMetrics::detached()), None)
        .unwrap()
        .unwrap()
}

fn bearer(t: &str) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    h.insert("authorization", format!("Bearer {t}").parse().unwrap());
    h
}

#[tokio::test]
async fn admission_answers_per_the_spec() {
    let k = ed("k1");
    let a = auth_for(
        "  rules:\n    - {name: deploy-needs-scope, match: {method: tools/call, name: deploy_*}, when: {scopes: [deploy:write]}}\n    - {name: no-deploys, match: {name: deploy_*}, effect: deny}\n",
        &[&k],
    );
    let admit = |h: http::HeaderMap, q: Option<&'static str>, name: &'static str| {
        let a = &a;
        async move {
            a.admit(&h, q, RouteRef::Default, Some("tools/call"), Some(name))
                .await
        }
    };
    let md = "https://mcp.test/.well-known/oauth-protected-resource/mcp";

    let r = admit(http::HeaderMap::new(), None, "echo")
        .await
        .unwrap_err();
    assert_eq!(r.rejection.status, 401);
    assert_eq!(
        r.challenge.as_deref(),
        Some(&*format!(r#"Bearer scope="mcp", resource_metadata="{md}""#))
    );

    let mut c = claims(ISS, AUD, "alice", "mcp");
    c["exp"] = json!(testkeys::now() - 3600);
    let r = admit(bearer(&sign(&k, &c)), None, "echo")
        .await
        .unwrap_err();
    assert_eq!(r.rejection.status, 401);
    assert_eq!(r.rejection.reason, "auth-token-expired");
    assert!(r
        .challenge
        .unwrap()
        .starts_with(r#"Bearer error="invalid_token", error_description="The token has expired""#));

    let ok = sign(&k, &claims(ISS, AUD, "alice", "mcp"));
    let r = admit(bearer(&ok), Some("x=1&access_token=abc"), "echo")
        .await
        .unwrap_err();
    assert_eq!(r.rejection.status, 400);

    let id = admit(bearer(&ok), None, "echo").await.unwrap().unwrap();
    assert_eq!(id.subject, "alice");

    let r = admit(bearer(&ok), None, "deploy_prod").await.unwrap_err();
    assert_eq!(r.rejection.status, 403);
    assert_eq!(r.rejection.data.as_ref().unwrap()["rule"], "no-deploys");
    assert!(r.rejection.message.contains("no-deploys"));
    let ch = r.challenge.unwrap();
    assert!(
        ch.contains(r#"error="insufficient_scope""#) && ch.contains(r#"scope="mcp deploy:write""#),
        "{ch}"
    );

    let deployer = sign(&k, &claims(ISS, AUD, "bob", "mcp deploy:write"));
    assert!(admit(bearer(&deployer), None, "deploy_prod").await.is_ok());

    let noscope = sign(&k, &claims(ISS, AUD, "carol", "other"));
    let r = admit(bearer(&noscope), None, "echo").await.unwrap_err();
    assert_eq!(
        (r.rejection.status, r.rejection.reason),
        (403, "auth-insufficient-scope")
    );
}

#[tokio::test]
async fn identity_headers_and_token_forwarding() {
    let k = ec("k2");
    let a = auth_for(
        "  principal_claim: client_id\n  forward:\n    token_to_pools: [q]\n    headers: {x-mcp-edge-subject: principal, x-tenant: tenant}\n",
        &[&k],
    );
    let mut c = claims(ISS, AUD, "ignored", "mcp");
    c["client_id"] = json!("app-7");
    c["tenant"] = json!("acme");
    let id = a
        .admit(
            &bearer(&sign(&k, &c)),
            None,
            RouteRef::Default,
            Some("tools/list"),
            None,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(id.subject, "app-7");
    let edits = a.upstream_edits(Some(&id), "p");
    assert!(edits.contains(&HeaderEdit::Remove(http::header::AUTHORIZATION)));
    let set: Vec<_> = edits
        .iter()
        .filter_map(|e| match e {
            HeaderEdit::Set(h, v) => Some((h.as_str(), v.to_str().unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(
        set,
        vec![("x-mcp-edge-subject", "app-7"), ("x-tenant", "acme")]
    );
    let to_q = a.upstream_edits(Some(&id), "q");
    assert!(!to_q.contains(&HeaderEdit::Remove(http::header::AUTHORIZATION)));
    // Without an identity the client's copies are still removed.
    let anon = a.upstream_edits(None, "p");
    assert_eq!(anon.len(), 3);
    assert!(anon.iter().all(|e| matches!(e, HeaderEdit::Remove(_))));
}

#[test]
fn config_refuses_what_must_never_be_accepted() {
    let base = "pools:\n  p: {instances: [127.0.0.1:1]}\nauth:\n  resource: https://m/mcp\n  issuer: i\n  jwks: {url: http://127.0.0.1:1/k}\n";
    let e =
        crate::config::Config::parse(&format!("{base}  algorithms: [RS256, HS256]\n"), "g.yaml")
            .unwrap_err();
    assert!(e.message.contains("HS256 is never accepted"), "{e}");
    assert_eq!(e.line, Some(7), "{e}");
    let e = crate::config::Config::parse(&format!("{base}  algorithms: [none]\n"), "g.yaml")
        .unwrap_err();
    assert!(e.message.contains("none is never accepted"), "{e}");
    let e =
        crate::config::Config::parse(&base.replace("https://m/mcp", "mcp"), "g.yaml").unwrap_err();
    assert!(
        e.message.contains("auth.resource") && e.line == Some(4),
        "{e}"
    );
    let e = crate::config::Config::parse(
        &format!("{base}  forward: {{token_to_pools: [nope]}}\n"),
        "g.yaml",
    )
    .unwrap_err();
    assert!(e.message.contains("no pool named \"nope\""), "{e}");
    let e = crate::config::Config::parse(
        "pools:\n  p: {instances: [127.0.0.1:1]}\nrate_limits:\n  - {name: t, key: [claim:tenant], rate: 1/s}\n",
        "g.yaml",
    )
    .unwrap_err();
    assert!(
        e.message.contains("need an auth: section") && e.line == Some(4),
        "{e}"
    );
}

#[test]
fn the_example_config_loads() {
    // Read at run time, not with include_str!: the image build (deploy/Dockerfile) copies src/
    // but not examples/, and tests/deploy/check.sh refuses sources that include a file it lacks.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/auth.yaml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let cfg =
        crate::config::Config::parse(&text, "examples/auth.yaml").unwrap_or_else(|e| panic!("{e}"));
    let a = Auth::new(&cfg, Arc::new(AuthMetrics::detached()), None)
        .unwrap()
        .unwrap();
    assert_eq!(
        a.metadata_url,
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    );
    assert!(cfg
        .describe()
        .contains("auth      resource https://mcp.example.com/mcp"));
}

#[tokio::test]
async fn a_withdrawn_key_stops_verifying_at_once_despite_the_verified_cache() {
    let (old, new) = (ed("old"), ed("new"));
    let a = auth_for("", &[&old, &new]);
    let t = sign(&old, &claims(ISS, AUD, "alice", "mcp"));
    let admit = |t: String| {
        let a = &a;
        async move {
            let h = bearer(&t);
            a.admit(&h, None, RouteRef::Default, Some("tools/list"), None)
                .await
        }
    };
    for _ in 0..3 {
        assert_eq!(admit(t.clone()).await.unwrap().unwrap().subject, "alice");
    }
    // The issuer withdraws the old key: the next refresh drops it and the cached verdict.
    let path = a.config.jwks.file.clone().unwrap();
    std::fs::write(&path, jwks(&[&new])).unwrap();
    a.keys.refresh().await;
    let r = admit(t).await.unwrap_err();
    assert_eq!(r.rejection.reason, "auth-token-unknown-key");
    let t2 = sign(&new, &claims(ISS, AUD, "bob", "mcp"));
    assert!(admit(t2).await.is_ok());
}

#[tokio::test]
async fn an_open_route_needs_no_token_and_no_scope_but_the_rules_still_apply() {
    let k = ec("open");
    let file = temp_file("open.json", &jwks(&[&k]));
    let yaml = format!(
        "pools:\n  p: {{instances: [127.0.0.1:1]}}\nroutes:\n  - {{match: {{method: server/discover}}, pool: p, auth: {{required: false}}}}\n  - {{match: {{method: prompts/*}}, pool: p, auth: {{required: false}}}}\ndefault_route: {{pool: p}}\n\
         auth:\n  resource: {AUD}\n  issuer: {ISS}\n  jwks: {{file: {}}}\n  scopes: [mcp]\n  rules:\n    - {{name: no-anon-prompts, match: {{method: prompts/get}}, effect: deny, when: {{claims: {{}}}}}}\n",
        file.display()
    );
    let cfg = crate::config::Config::parse(&yaml, "t.yaml").unwrap_or_else(|e| panic!("{e}"));
    let a = Auth::new(&cfg, Arc::new(AuthMetrics::detached()), None)
        .unwrap()
        .unwrap();
    let none = http::HeaderMap::new();
    let r = a
        .admit(
            &none,
            None,
            RouteRef::Index(0),
            Some("server/discover"),
            None,
        )
        .await;
    assert_eq!(r, Ok(None));
    let r = a
        .admit(
            &none,
            None,
            RouteRef::Index(1),
            Some("prompts/get"),
            Some("p"),
        )
        .await
        .unwrap_err();
    assert_eq!(
        r.rejection.data.as_ref().unwrap()["rule"],
        "no-anon-prompts"
    );
    let r = a
        .admit(&none, None, RouteRef::Default, Some("tools/list"), None)
        .await
        .unwrap_err();
    assert_eq!(r.rejection.status, 401);
    // A token sent on an open route is still verified.
    let r = a
        .admit(
            &bearer("junk"),
            None,
            RouteRef::Index(0),
            Some("server/discover"),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(r.rejection.status, 401);
}
