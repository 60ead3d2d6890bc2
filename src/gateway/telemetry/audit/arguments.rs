//! A call's arguments as the audit trail records them: the SHA-256 of their RFC 8785 canonical
//! JSON ([`crate::mcp::jcs`]: members sorted, numbers and strings in one spelling, no
//! whitespace), and, where `audit.arguments: full`, the arguments with the operator's keys and
//! patterns redacted. Run by the audit's writer thread, never on a request's path: the request
//! hands over its body (a cheap `Bytes` clone) and this reads it.
//!
//! The arguments of a `tools/call` or `prompts/get` are `params.arguments` (absent: `{}`); those
//! of a `resources/read` are `{"uri": params.uri}`. A retry leg's `inputResponses` and
//! `requestState` are not arguments: every leg of a flow has the same digest.

use regex::Regex;
use serde_json::{Map, Value};

use crate::config::audit::AuditRedact;
use crate::mcp::methods;

/// What replaces a redacted value or match.
pub(crate) const REDACTED: &str = "[redacted]";

/// The compiled redaction of `audit.redact`.
#[derive(Debug, Default)]
pub(crate) struct Redact {
    /// Lowercased key names.
    keys: Vec<String>,
    patterns: Vec<Regex>,
}

impl Redact {
    /// Compiled from the config (its patterns were checked by validation).
    pub(crate) fn new(cfg: &AuditRedact) -> anyhow::Result<Redact> {
        Ok(Redact {
            keys: cfg.keys.iter().map(|k| k.to_lowercase()).collect(),
            patterns: cfg
                .patterns
                .iter()
                .map(|p| Regex::new(p))
                .collect::<Result<_, _>>()?,
        })
    }

    /// `v` with the named keys' values and the patterns' matches replaced, at any depth.
    pub(crate) fn apply(&self, v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if self.keys.iter().any(|r| k.eq_ignore_ascii_case(r)) {
                        *x = Value::String(REDACTED.into());
                    } else {
                        self.apply(x);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.apply(x)),
            Value::String(s) => {
                for p in &self.patterns {
                    if p.is_match(s) {
                        *s = p.replace_all(s, REDACTED).into_owned();
                    }
                }
            }
            _ => {}
        }
    }
}

/// The arguments of a request body for `method`; `Err` says why they cannot be read (not JSON,
/// a number past f64, nesting past serde_json's limit).
pub(crate) fn of_body(method: &str, body: &[u8]) -> Result<Value, String> {
    use serde_json::value::RawValue;
    // Only the two members are kept, borrowed from the body; the rest (`_meta`, a retry's
    // `inputResponses`) is skipped without being built.
    #[derive(serde::Deserialize)]
    struct Request<'a> {
        #[serde(borrow, default)]
        params: Option<Params<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow, default)]
        arguments: Option<&'a RawValue>,
        #[serde(borrow, default)]
        uri: Option<&'a RawValue>,
    }
    let req: Request = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let params = req.params.unwrap_or(Params {
        arguments: None,
        uri: None,
    });
    let value = |raw: Option<&RawValue>| -> Result<Option<Value>, String> {
        raw.map(|r| serde_json::from_str(r.get()).map_err(|e| e.to_string()))
            .transpose()
    };
    Ok(if method == methods::RESOURCES_READ {
        let uri = value(params.uri)?.unwrap_or(Value::Null);
        Value::Object(Map::from_iter([("uri".to_string(), uri)]))
    } else {
        value(params.arguments)?.unwrap_or_else(|| Value::Object(Map::new()))
    })
}

/// The hex SHA-256 of the canonical JSON of `v`.
pub(crate) fn digest(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut buf = Vec::with_capacity(128);
    crate::mcp::jcs::write(v, &mut buf);
    crate::mcp::hex::encode(&Sha256::digest(&buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_digest_is_over_canonical_json_whatever_the_spelling() {
        let a = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"b":[1,2.0,"x"],"a":{"z":1e2,"y":null}}}}"#;
        let b = br#"{"params":{"arguments":{ "a" : {"y":null,"z":100},"b":[1.0,2,"\u0078"]},"name":"t","requestState":"s","inputResponses":{}},"method":"tools/call","id":9,"jsonrpc":"2.0"}"#;
        let da = digest(&of_body("tools/call", a).unwrap());
        assert_eq!(da, digest(&of_body("tools/call", b).unwrap()));
        // The digest is SHA-256 over exactly these canonical bytes.
        use sha2::{Digest, Sha256};
        let want = crate::mcp::hex::encode(&Sha256::digest(
            br#"{"a":{"y":null,"z":100},"b":[1,2,"x"]}"#,
        ));
        assert_eq!(da, want);
        assert_eq!(
            da,
            "11269a58b318ade6cdcc2c14a0ff89084945aca9997ed1f363701f00db937ed4"
        );
        let other = br#"{"method":"tools/call","params":{"name":"t","arguments":{"a":{"y":null,"z":101},"b":[1,2,"x"]}}}"#;
        assert_ne!(da, digest(&of_body("tools/call", other).unwrap()));
        // No arguments: the empty object; a resource read: its uri.
        let none = of_body("tools/call", br#"{"params":{"name":"t"}}"#).unwrap();
        assert_eq!(none, json!({}));
        let read = of_body("resources/read", br#"{"params":{"uri":"file:///a"}}"#).unwrap();
        assert_eq!(read, json!({"uri": "file:///a"}));
        assert!(of_body("tools/call", br#"{"params":{"arguments":{"n":1e400}}}"#).is_err());
        assert!(of_body("tools/call", b"not json").is_err());
    }

    #[test]
    fn redaction_hides_named_keys_at_any_depth_and_pattern_matches() {
        let r = Redact::new(&AuditRedact {
            keys: vec!["Password".into(), "token".into()],
            patterns: vec![r"sk-[a-z0-9]+".into()],
        })
        .unwrap();
        let mut v = json!({
            "user": "ann",
            "PASSWORD": "hunter2",
            "nested": [{"token": {"deep": 1}}, "key sk-abc123 and sk-zz9"],
            "n": 5
        });
        r.apply(&mut v);
        assert_eq!(
            v,
            json!({
                "user": "ann",
                "PASSWORD": REDACTED,
                "nested": [{"token": REDACTED}, "key [redacted] and [redacted]"],
                "n": 5
            })
        );
    }
}
