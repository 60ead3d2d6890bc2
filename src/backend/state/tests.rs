//! Unit tests of sealing and opening `requestState`: round trips, tampering, expiry, key
//! rotation, the legacy format and the parsers of keys.

use super::*;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

fn codec() -> StateCodec {
    StateCodec::new(StateKeys::random(), Duration::from_secs(600))
}

fn digest() -> String {
    request_digest("tools/call", "create_repo", &json!({"repo":"demo"}))
}

#[test]
fn round_trip() {
    let c = codec();
    let alice = principal_of(Some("alice"));
    let s = c.mint(
        &alice,
        "tools/call",
        &digest(),
        1,
        json!({"env":"staging"}),
        "i-1",
    );
    assert!(s.starts_with(&format!("v2.{}.", c.key_id())), "{s}");
    assert!(s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_'));
    let p = c.verify(&s, &alice, "tools/call", &digest()).unwrap();
    assert_eq!(
        (p.round, p.data, p.issuer.as_str()),
        (1, json!({"env":"staging"}), "i-1")
    );
    assert_eq!(p.nonce.len(), 32);
    assert!(
        !s.contains("alice") && !s.contains("staging"),
        "the payload is encrypted"
    );
}

#[test]
fn tampering_is_detected() {
    let c = codec();
    let s = c.mint("anonymous", "tools/call", &digest(), 1, Value::Null, "i");
    let check = |t: &str| {
        c.verify(t, "anonymous", "tools/call", &digest())
            .unwrap_err()
    };
    assert_eq!(check(&format!("{s}-TAMPERED")), StateError::Tampered);
    assert_eq!(check(&format!("x{s}")), StateError::Malformed);
    assert_eq!(check("garbage"), StateError::Malformed);
    assert_eq!(check(""), StateError::Malformed);
    // Flip one character of the ciphertext.
    let mut b = s.clone().into_bytes();
    let last = b.len() - 3;
    b[last] = if b[last] == b'A' { b'B' } else { b'A' };
    assert_eq!(check(&String::from_utf8(b).unwrap()), StateError::Tampered);
    // Re-label the key id: the AAD no longer matches.
    let other = format!("v2.00000000.{}", s.splitn(3, '.').nth(2).unwrap());
    assert_eq!(check(&other), StateError::UnknownKey("00000000".into()));
}

#[test]
fn legacy_v1_states_still_open_and_labels_cannot_be_swapped() {
    let keys = StateKeys::random();
    let c = StateCodec::new(keys.clone(), Duration::from_secs(600));
    let payload = c
        .open(&c.mint("anonymous", "tools/call", &digest(), 1, Value::Null, "i"))
        .unwrap();
    let key = &keys.current;
    let plain = serde_json::to_vec(&payload).unwrap();
    let nonce = [7u8; LEGACY_NONCE_LEN];
    let aad = format!("{LEGACY_VERSION}.{}", key.id);
    let ct = key
        .legacy
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: &plain,
                aad: aad.as_bytes(),
            },
        )
        .unwrap();
    let v1 = format!(
        "{aad}.{}",
        URL_SAFE_NO_PAD.encode([&nonce[..], &ct].concat())
    );
    assert_eq!(c.open(&v1).unwrap(), payload);
    let v2 = c.seal(&payload);
    assert_eq!(
        c.open(&v2.replacen("v2.", "v1.", 1)),
        Err(StateError::Tampered)
    );
    assert_eq!(
        c.open(&v1.replacen("v1.", "v2.", 1)),
        Err(StateError::Tampered)
    );
}

#[test]
fn principal_request_and_expiry_are_bound() {
    let c = codec();
    let alice = principal_of(Some("alice"));
    let s = c.mint(&alice, "tools/call", &digest(), 1, Value::Null, "i");
    assert_eq!(
        c.verify(&s, &principal_of(Some("bob")), "tools/call", &digest()),
        Err(StateError::OtherPrincipal)
    );
    assert_eq!(
        c.verify(&s, "anonymous", "tools/call", &digest()),
        Err(StateError::OtherPrincipal)
    );
    let other = request_digest("tools/call", "create_repo", &json!({"repo":"prod"}));
    assert_eq!(
        c.verify(&s, &alice, "tools/call", &other),
        Err(StateError::OtherRequest)
    );
    assert_eq!(
        c.verify(&s, &alice, "prompts/get", &digest()),
        Err(StateError::OtherRequest)
    );
    let exp = c.open(&s).unwrap().expires_at_ms;
    assert!(c
        .verify_at(&s, &alice, "tools/call", &digest(), exp - 1)
        .is_ok());
    assert_eq!(
        c.verify_at(&s, &alice, "tools/call", &digest(), exp + 1500),
        Err(StateError::Expired { ago_ms: 1500 })
    );
    assert!(StateError::Expired { ago_ms: 1500 }
        .message()
        .contains("2s ago"));
}

#[test]
fn rotation_accepts_previous_and_seals_with_current() {
    let old = StateKey::random();
    let new = StateKey::random();
    let before = StateCodec::new(StateKeys::new(old.clone()), Duration::from_secs(60));
    let after = StateCodec::new(
        StateKeys::new(new.clone()).with_previous(old.clone()),
        Duration::from_secs(60),
    );
    let s_old = before.mint("anonymous", "tools/call", &digest(), 1, Value::Null, "i");
    assert!(after
        .verify(&s_old, "anonymous", "tools/call", &digest())
        .is_ok());
    let s_new = after.mint("anonymous", "tools/call", &digest(), 1, Value::Null, "i");
    assert!(s_new.contains(new.id()));
    assert_eq!(
        before.verify(&s_new, "anonymous", "tools/call", &digest()),
        Err(StateError::UnknownKey(new.id().to_owned()))
    );
    let unrelated = codec();
    assert!(matches!(
        unrelated.open(&s_old),
        Err(StateError::UnknownKey(_))
    ));
}

#[test]
fn key_parsing() {
    let hexkey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    let a = StateKey::parse(hexkey).unwrap();
    let bytes: Vec<u8> = (0u8..32).collect();
    let b = StateKey::parse(&format!("  {}\n", STANDARD.encode(&bytes))).unwrap();
    let c = StateKey::parse(&URL_SAFE_NO_PAD.encode(&bytes)).unwrap();
    assert_eq!(a.id(), b.id());
    assert_eq!(a.id(), c.id());
    assert!(StateKey::parse("abcd")
        .unwrap_err()
        .to_string()
        .contains("32"));
    assert!(StateKey::parse("not a key!").is_err());
}

#[test]
fn digest_ignores_key_order() {
    let a = request_digest(
        "tools/call",
        "t",
        &json!({"a":1,"b":{"y":2,"x":[1,{"q":1,"p":2}]}}),
    );
    let b = request_digest(
        "tools/call",
        "t",
        &json!({"b":{"x":[1,{"p":2,"q":1}],"y":2},"a":1}),
    );
    assert_eq!(a, b);
    assert_ne!(a, request_digest("tools/call", "t", &json!({"a":2})));
    assert_ne!(
        a,
        request_digest(
            "tools/call",
            "u",
            &json!({"a":1,"b":{"y":2,"x":[1,{"q":1,"p":2}]}})
        )
    );
}
