//! A verified caller: the principal, the scopes and the claims of a token (never the token).

use serde_json::{Map, Value};

/// A verified caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// The principal claim (`sub` unless `auth.principal_claim` says otherwise).
    pub subject: String,
    /// From `scope` (space-separated) or `scp` (string or array).
    pub scopes: Vec<String>,
    claims: Map<String, Value>,
}

impl Identity {
    pub(crate) fn new(subject: String, claims: Map<String, Value>) -> Identity {
        let split = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let scopes = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => split(s),
            (_, Some(Value::String(s))) => split(s),
            (_, Some(Value::Array(a))) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        Identity {
            subject,
            scopes,
            claims,
        }
    }

    /// A caller without a token on a route that does not require one.
    pub(crate) fn anonymous() -> Identity {
        Identity::new(String::new(), Map::new())
    }

    /// `exp` (Unix seconds), when the token has one.
    pub(crate) fn exp(&self) -> Option<u64> {
        self.claims
            .get("exp")
            .and_then(Value::as_f64)
            .map(|e| e as u64)
    }

    pub(crate) fn has_scope(&self, s: &str) -> bool {
        self.scopes.iter().any(|x| x == s)
    }

    /// A claim as text: a string as is, an array of strings space-separated, others as JSON.
    pub(crate) fn claim_text(&self, name: &str) -> Option<String> {
        match self.claims.get(name)? {
            Value::String(s) => Some(s.clone()),
            Value::Array(a) if a.iter().all(Value::is_string) => Some(
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            Value::Null => None,
            v => Some(v.to_string()),
        }
    }

    /// Whether claim `name` equals one of `values` (or, as an array, contains one).
    pub(crate) fn claim_matches(&self, name: &str, values: &[String]) -> bool {
        let one = |v: &Value| match v {
            Value::String(s) => values.iter().any(|x| x == s),
            Value::Number(_) | Value::Bool(_) => {
                let text = v.to_string();
                values.contains(&text)
            }
            _ => false,
        };
        match self.claims.get(name) {
            Some(Value::Array(a)) => a.iter().any(one),
            Some(v) => one(v),
            None => false,
        }
    }
}
