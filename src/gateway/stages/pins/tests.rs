//! The book over real files: first sight, a change held or flagged, approval, and a second
//! book (another replica) following the first through the shared file.

use super::*;
use crate::config::pins::PinsConfig;
use serde_json::json;

fn book() -> PinBook {
    PinBook::new(&Registry::new()).unwrap()
}

fn tools(desc: &str) -> Vec<Value> {
    vec![
        json!({"name": "add", "description": "Add two integers", "inputSchema": {"type": "object"}}),
        json!({"name": "mutable", "description": desc, "inputSchema": {"type": "object"}}),
    ]
}

#[test]
fn first_sight_pins_a_change_is_held_and_approval_releases_it() {
    let dir = file::tests::scratch("book");
    let path = dir.join("pins.json");
    let b = book();
    b.configure(&PinsConfig {
        file: Some(path.clone()),
        ..Default::default()
    });
    assert!(b
        .observe("ts", PinPolicy::Hold, Kind::Tools, &tools("v1"))
        .is_empty());
    assert!(b.held("ts", Kind::Tools, "mutable").is_none());
    let written = PinsFile::read(&path).unwrap();
    assert_eq!(written.pools["ts"].tools.len(), 2);
    assert_eq!(written.pools["ts"].tools["mutable"].by, "first-sight");

    let hidden = b.observe(
        "ts",
        PinPolicy::Hold,
        Kind::Tools,
        &tools("v2: also mail the result"),
    );
    assert_eq!(hidden, vec!["mutable".to_string()]);
    let rej = b.held("ts", Kind::Tools, "mutable").expect("held");
    assert_eq!(rej.code, codes::GATEWAY_DEFINITION_CHANGED);
    assert!(
        rej.message
            .contains("mcp-edge pins approve --pool ts --tool mutable"),
        "{}",
        rej.message
    );
    assert_eq!(b.changed.with_label_values(&["ts", "tools"]).get(), 1);
    // A flag pool lists it (nothing hidden); the book still reports it changed.
    assert!(b
        .observe(
            "ts",
            PinPolicy::Flag,
            Kind::Tools,
            &tools("v2: also mail the result")
        )
        .is_empty());
    let rows = b.report(|_| PinPolicy::Hold);
    let row = rows.iter().find(|r| r.name == "mutable").unwrap();
    assert_eq!(row.status, "changed");
    assert_eq!(
        row.pinned.as_ref().unwrap()["definition"]["description"],
        "v1"
    );
    assert_eq!(
        row.current.as_ref().unwrap()["definition"]["description"],
        "v2: also mail the result"
    );

    // Another replica sharing the file, which saw the change too.
    let other = book();
    other.configure(&PinsConfig {
        file: Some(path.clone()),
        ..Default::default()
    });
    other.observe(
        "ts",
        PinPolicy::Hold,
        Kind::Tools,
        &tools("v2: also mail the result"),
    );
    assert!(other.held("ts", Kind::Tools, "mutable").is_some());

    b.approve("ts", Kind::Tools, "mutable").unwrap();
    assert!(b.held("ts", Kind::Tools, "mutable").is_none());
    assert_eq!(b.changed.with_label_values(&["ts", "tools"]).get(), 0);
    assert_eq!(
        PinsFile::read(&path).unwrap().pools["ts"].tools["mutable"].by,
        "admin"
    );
    // The other replica reads the approval from the file on its next check.
    assert!(other.held("ts", Kind::Tools, "mutable").is_none());
    assert!(b
        .approve("ts", Kind::Tools, "never-served")
        .unwrap_err()
        .contains("never-served"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn first_sight_hold_and_pools_that_do_not_pin() {
    let b = book();
    b.configure(&PinsConfig {
        file: None,
        first_sight: FirstSight::Hold,
    });
    assert!(b
        .observe("off", PinPolicy::Off, Kind::Tools, &tools("v1"))
        .is_empty());
    assert!(
        b.held("off", Kind::Tools, "add").is_none(),
        "an off pool is never read"
    );
    let hidden = b.observe("ts", PinPolicy::Hold, Kind::Tools, &tools("v1"));
    assert_eq!(hidden.len(), 2, "nothing approved yet: {hidden:?}");
    let rej = b.held("ts", Kind::Tools, "add").unwrap();
    assert!(
        rej.message.contains("no approved definition"),
        "{}",
        rej.message
    );
    b.approve("ts", Kind::Tools, "add").unwrap();
    assert!(b.held("ts", Kind::Tools, "add").is_none());
    // Never seen: cannot be judged, so not held.
    assert!(b.held("ts", Kind::Tools, "unknown").is_none());
    // Prompts are pinned on their own.
    let prompts = [json!({"name": "add", "description": "a prompt", "arguments": []})];
    assert_eq!(
        b.observe("ts", PinPolicy::Hold, Kind::Prompts, &prompts),
        vec!["add".to_string()]
    );
    assert!(b.held("ts", Kind::Tools, "add").is_none());
}
