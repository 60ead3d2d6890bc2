//! Resources (static, templated, and each cart's charge count), resource templates, and the
//! completion suggestions.

use serde_json::{json, Value};

use super::fixtures::PNG_1X1;
use super::LIST_TTL_MS;

/// A readable resource: its contents and cache hints.
pub(crate) struct ReadResult {
    pub contents: Value,
    pub ttl_ms: u64,
    pub scope: &'static str,
}

/// The `resources` array of resources/list.
pub(crate) fn resources_json() -> Value {
    json!([
        {"uri": "test://static-text", "name": "static-text", "description": "A static text resource", "mimeType": "text/plain"},
        {"uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource (PNG)", "mimeType": "image/png"},
    ])
}

/// The `resourceTemplates` array of resources/templates/list.
pub(crate) fn templates_json() -> Value {
    json!([
        {"uriTemplate": "test://template/{id}/data", "name": "template-data", "description": "Data for an id", "mimeType": "application/json"},
        {"uriTemplate": "charges://{cart_id}", "name": "charges", "description": "How many times a cart was charged", "mimeType": "application/json"},
    ])
}

/// What resources/read finds for a URI.
pub(crate) enum Read {
    Ready(ReadResult),
    /// `charges://<cart>`: the ledger's count, then [`charges_result`].
    Charges(String),
}

pub(crate) fn read_resource(uri: &str) -> Option<Read> {
    let public = |contents| {
        Some(Read::Ready(ReadResult {
            contents,
            ttl_ms: LIST_TTL_MS,
            scope: "public",
        }))
    };
    match uri {
        "test://static-text" => public(
            json!([{"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}]),
        ),
        "test://static-binary" => {
            public(json!([{"uri": uri, "mimeType": "image/png", "blob": PNG_1X1}]))
        }
        _ => {
            if let Some(id) = uri
                .strip_prefix("test://template/")
                .and_then(|r| r.strip_suffix("/data"))
                .filter(|id| !id.is_empty() && !id.contains('/'))
            {
                let body =
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                        .to_string();
                return public(json!([{"uri": uri, "mimeType": "application/json", "text": body}]));
            }
            let cart = uri.strip_prefix("charges://").filter(|c| !c.is_empty())?;
            Some(Read::Charges(cart.to_owned()))
        }
    }
}

/// The `charges://<cart>` resource with the count `charges`.
pub(crate) fn charges_result(uri: &str, cart: &str, charges: u64) -> ReadResult {
    let body = json!({"cart_id": cart, "charges": charges}).to_string();
    ReadResult {
        contents: json!([{"uri": uri, "mimeType": "application/json", "text": body}]),
        ttl_ms: 0,
        scope: "private",
    }
}

/// completion/complete: suggestions for prompt arguments and template variables.
pub(crate) fn complete_argument(value: &str) -> Value {
    let candidates = ["paris", "park", "party", "test", "testValue1", "testValue2"];
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|c| c.starts_with(value))
        .collect();
    json!({"values": values, "total": values.len(), "hasMore": false})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources() {
        assert!(read_resource("test://nonexistent-resource-for-conformance-testing").is_none());
        let Some(Read::Ready(t)) = read_resource("test://template/123/data") else {
            panic!("template not read")
        };
        assert!(t.contents[0]["text"].as_str().unwrap().contains("123"));
        assert!(read_resource("test://template//data").is_none());
        assert!(matches!(read_resource("charges://c9"), Some(Read::Charges(c)) if c == "c9"));
        assert_eq!(charges_result("charges://c9", "c9", 2).scope, "private");
    }
}
