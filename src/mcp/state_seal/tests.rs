//! The envelope: each binding refused with its own reason, rotation, the bound on size.

use super::*;
use crate::mcp::seal::{StateKey, StateKeys};
use serde_json::json;

fn binding<'a>(caller: &'a str, name: &'a str, args: &'a str) -> Binding<'a> {
    Binding {
        caller,
        method: "tools/call",
        name,
        arguments: args,
    }
}

#[test]
fn a_state_opens_only_for_its_caller_tool_arguments_and_time() {
    let s = Sealer::new(StateKeys::random());
    let alice = caller("sub", b"alice");
    let bob = caller("sub", b"bob");
    let a1 = arguments_digest("tools/call", "deploy", &json!({"env": "staging", "n": 1}));
    let a1_again = arguments_digest("tools/call", "deploy", &json!({"n": 1.0, "env": "staging"}));
    assert_eq!(a1, a1_again, "key order and number spelling do not matter");
    let a2 = arguments_digest(
        "tools/call",
        "deploy",
        &json!({"env": "production", "n": 1}),
    );
    let to = binding(&alice, "deploy", &a1);
    let t = seal(&s, &to, "{\"cart\":\"c18\"}", 1_000, 60_000);
    assert!(t.starts_with("ers1."));
    let opened = open(&s, &t, &to, 2_000, 4096).unwrap();
    assert_eq!(opened.state, "{\"cart\":\"c18\"}");
    assert_eq!(opened.expires_ms, 61_000);
    let other = |b: &Binding| open(&s, &t, b, 2_000, 4096);
    assert_eq!(
        other(&binding(&bob, "deploy", &a1)),
        Err(Refused::OtherCaller)
    );
    assert_eq!(
        other(&binding(&alice, "undeploy", &a1)),
        Err(Refused::OtherTool)
    );
    assert_eq!(
        other(&binding(&alice, "deploy", &a2)),
        Err(Refused::OtherArguments)
    );
    assert_eq!(open(&s, &t, &to, 61_000, 4096), Err(Refused::Expired));
    assert_eq!(open(&s, &t, &to, 2_000, 16), Err(Refused::TooLarge(16)));
    assert_eq!(
        open(&s, "eyJjYXJ0IjoiYzE4In0", &to, 2_000, 4096),
        Err(Refused::NotSealed)
    );
    let mut b = t.clone().into_bytes();
    let i = b.len() - 5;
    b[i] = if b[i] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(b).unwrap();
    assert_eq!(
        open(&s, &tampered, &to, 2_000, 4096),
        Err(Refused::Tampered)
    );
    for r in [Refused::OtherCaller, Refused::Expired, Refused::Tampered] {
        assert!(
            r.message().starts_with("Invalid requestState: it "),
            "{r:?}"
        );
    }
}

#[test]
fn rotation_old_key_opens_new_key_seals_a_dropped_key_is_named() {
    let (old, new) = (StateKey::random(), StateKey::random());
    let before = Sealer::new(StateKeys::new(old.clone()));
    let c = caller("ip", b"127.0.0.1");
    let to = binding(&c, "t", "00");
    let t = seal(&before, &to, "s", 0, 10_000);
    let after = Sealer::new(StateKeys::new(new.clone()).with_previous(old.clone()));
    assert_eq!(open(&after, &t, &to, 1, 4096).unwrap().state, "s");
    let only_new = Sealer::new(StateKeys::new(new));
    assert_eq!(
        open(&only_new, &t, &to, 1, 4096),
        Err(Refused::UnknownKey(old.id().to_string()))
    );
}
