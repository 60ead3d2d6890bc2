//! What a tool's or a prompt's *definition* is, and its digest: the members of a `tools/list`
//! or `prompts/list` entry a client (and the model behind it) reads to decide whether and how
//! to call it. A server that changes one of them after an operator reviewed it changed what the
//! model is told (the "rug pull" that pinned definitions guard against, docs/pins.md).
//!
//! - a tool: `title`, `description`, `inputSchema`, `outputSchema`, `annotations`;
//! - a prompt: `title`, `description`, `arguments`.
//!
//! The name is the entry's key, not part of its definition; `_meta`, `icons` and members this
//! revision does not define are left out (a server may vary them freely). A member that is
//! absent is left out of the definition; one present as `null` is kept as `null`.
//!
//! The digest is `sha256:` and the lower-case hex SHA-256 of the definition's RFC 8785 canonical
//! JSON ([`super::jcs`]): key order, whitespace and number spelling do not change it, and any
//! other implementation gets the same string.

use serde_json::{Map, Value};

use super::lists::Kind;

/// The definition members of a tool.
pub(crate) const TOOL_MEMBERS: &[&str] = &[
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// The definition members of a prompt.
pub(crate) const PROMPT_MEMBERS: &[&str] = &["title", "description", "arguments"];

/// The members that make up the definition of an entry of `kind` (`None`: resources and
/// templates are not pinned).
pub(crate) fn members(kind: Kind) -> Option<&'static [&'static str]> {
    match kind {
        Kind::Tools => Some(TOOL_MEMBERS),
        Kind::Prompts => Some(PROMPT_MEMBERS),
        Kind::Resources | Kind::Templates => None,
    }
}

/// The definition of one list entry: its name and the definition members it has. `None` when
/// the entry has no string `name` or `kind` has no definitions.
pub(crate) fn of_entry(kind: Kind, entry: &Value) -> Option<(String, Value)> {
    let members = members(kind)?;
    let obj = entry.as_object()?;
    let name = obj.get("name")?.as_str()?.to_string();
    let mut def = Map::new();
    for m in members {
        if let Some(v) = obj.get(*m) {
            def.insert((*m).to_string(), v.clone());
        }
    }
    Some((name, Value::Object(def)))
}

/// The digest of a definition: `sha256:<hex>` of its canonical JSON.
pub(crate) fn digest(definition: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut buf = Vec::with_capacity(256);
    super::jcs::write(definition, &mut buf);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    super::hex::push(&mut out, &Sha256::digest(&buf));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool_digest(entry: Value) -> String {
        digest(&of_entry(Kind::Tools, &entry).unwrap().1)
    }

    #[test]
    fn key_order_whitespace_and_number_spelling_do_not_change_the_digest() {
        let a: Value = serde_json::from_str(
            r#"{"name":"add","description":"Add","inputSchema":{"type":"object","properties":{"a":{"type":"integer","maximum":100}}}}"#,
        )
        .unwrap();
        let b: Value = serde_json::from_str(
            r#"{ "inputSchema" : { "properties" : { "a" : { "maximum" : 1.0e2, "type" : "integer" } }, "type" : "object" }, "description" : "Add", "name" : "add" }"#,
        )
        .unwrap();
        assert_eq!(tool_digest(a.clone()), tool_digest(b));
        // The canonical bytes are RFC 8785's: sorted keys, no whitespace, 100 for 1.0e2.
        let (_, def) = of_entry(Kind::Tools, &a).unwrap();
        assert_eq!(
            crate::mcp::jcs::to_string(&def),
            r#"{"description":"Add","inputSchema":{"properties":{"a":{"maximum":100,"type":"integer"}},"type":"object"}}"#
        );
        assert!(tool_digest(a).starts_with("sha256:"));
    }

    #[test]
    fn every_definition_member_counts_and_nothing_else_does() {
        let base = json!({"name":"t","description":"d","inputSchema":{"type":"object"}});
        let d0 = tool_digest(base.clone());
        for (k, v) in [
            ("description", json!("d2")),
            ("title", json!("T")),
            ("inputSchema", json!({"type":"object","required":["x"]})),
            ("outputSchema", json!({"type":"object"})),
            ("annotations", json!({"destructiveHint":true})),
        ] {
            let mut changed = base.clone();
            changed[k] = v;
            assert_ne!(tool_digest(changed), d0, "{k}");
        }
        for (k, v) in [
            ("_meta", json!({"x":1})),
            ("icons", json!([])),
            ("other", json!(1)),
        ] {
            let mut same = base.clone();
            same[k] = v;
            assert_eq!(tool_digest(same), d0, "{k}");
        }
        // Absent and null differ: a server that starts sending null changed what it says.
        let mut null = base.clone();
        null["title"] = Value::Null;
        assert_ne!(tool_digest(null), d0);
    }

    #[test]
    fn prompts_have_arguments_and_unnamed_entries_have_no_definition() {
        let p = json!({"name":"p","description":"d","arguments":[{"name":"x","required":true}]});
        let (name, def) = of_entry(Kind::Prompts, &p).unwrap();
        assert_eq!(name, "p");
        assert_eq!(
            def,
            json!({"description":"d","arguments":[{"name":"x","required":true}]})
        );
        assert!(of_entry(Kind::Tools, &json!({"description":"no name"})).is_none());
        assert!(of_entry(Kind::Tools, &json!({"name":7})).is_none());
        assert!(of_entry(Kind::Resources, &json!({"name":"r","uri":"file:///r"})).is_none());
    }
}
