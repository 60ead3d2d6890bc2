//! The one body edit a gateway makes: a federated endpoint that prefixes names sets a call's
//! `params.name` (or `params.ref.name`) back to the server's own name. Only the bytes of that
//! one string change; every other byte of the body stays as the client sent it.
//!
//! The body has already passed the strict envelope parser (one JSON object, no duplicate
//! keys), so the member found here is the one the header↔body check read.

use serde_json::value::RawValue;
use std::collections::HashMap;

/// The body with the string at `path` (object keys from the top) replaced by `value`;
/// `None` when there is no string there.
pub(crate) fn replace_string(body: &[u8], path: &[&str], value: &str) -> Option<Vec<u8>> {
    let (start, end) = span(body, path)?;
    let mut out = Vec::with_capacity(body.len() + value.len());
    out.extend_from_slice(&body[..start]);
    out.extend_from_slice(&serde_json::to_vec(value).ok()?);
    out.extend_from_slice(&body[end..]);
    Some(out)
}

/// Where the JSON string at `path` lies in `body` (its quotes included).
fn span(body: &[u8], path: &[&str]) -> Option<(usize, usize)> {
    let text = std::str::from_utf8(body).ok()?;
    let mut raw: &RawValue = serde_json::from_str(text).ok()?;
    for key in path {
        let members: HashMap<String, &RawValue> = serde_json::from_str(raw.get()).ok()?;
        raw = members.get(*key)?;
    }
    let s = raw.get();
    if !s.starts_with('"') {
        return None;
    }
    // `raw` borrows from `text`: its position is the distance between the two.
    let start = s.as_ptr() as usize - text.as_ptr() as usize;
    Some((start, start + s.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_name_changes() {
        let body = br#"{"jsonrpc":"2.0", "id":7,"method":"tools/call","params":{ "arguments":{"name":"keep"},"name" : "ts__book","_meta":{}}}"#;
        let out = replace_string(body, &["params", "name"], "book").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"jsonrpc":"2.0", "id":7,"method":"tools/call","params":{ "arguments":{"name":"keep"},"name" : "book","_meta":{}}}"#
        );
    }

    #[test]
    fn escaped_keys_and_values_are_found_and_written_safely() {
        let body = br#"{"params":{"n\u0061me":"a\"b"}}"#;
        let out = replace_string(body, &["params", "name"], "q\"uote\\").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"params":{"n\u0061me":"q\"uote\\"}}"#
        );
        assert!(replace_string(br#"{"params":{"name":3}}"#, &["params", "name"], "x").is_none());
        assert!(replace_string(br#"{"params":{}}"#, &["params", "name"], "x").is_none());
        let nested = br#"{"params":{"ref":{"type":"ref/prompt","name":"p__greet"}}}"#;
        let out = replace_string(nested, &["params", "ref", "name"], "greet").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"params":{"ref":{"type":"ref/prompt","name":"greet"}}}"#
        );
    }
}
