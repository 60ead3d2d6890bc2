//! What the resource server answers: the `WWW-Authenticate: Bearer …` challenge (RFC 6750 §3,
//! MCP §Authorization), the JSON-RPC error that goes with it, and the Protected Resource
//! Metadata document (RFC 9728). Plain strings in, plain strings out.

use serde_json::json;

use crate::mcp::{codes, Rejection};

/// A refusal: the JSON-RPC rejection and its `WWW-Authenticate` value (if any).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub rejection: Rejection,
    pub challenge: Option<String>,
}

/// The `resource_metadata` URL for a resource URI: the well-known path inserted between the
/// origin and the path (RFC 9728 §3.1), e.g. `https://h/mcp` → `https://h/.well-known/oauth-protected-resource/mcp`.
pub(crate) fn metadata_url_for(resource: &str) -> String {
    let (scheme, rest) = resource.split_once("://").unwrap_or(("https", resource));
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let path = path.split('?').next().unwrap_or("").trim_end_matches('/');
    format!("{scheme}://{authority}/.well-known/oauth-protected-resource{path}")
}

/// Whether `path` is where this gateway serves the metadata: the root well-known URI, or the
/// well-known URI followed by the endpoint path.
pub(crate) fn is_metadata_path(path: &str, endpoint: &str) -> bool {
    const WK: &str = "/.well-known/oauth-protected-resource";
    path == WK || path.strip_prefix(WK) == Some(endpoint)
}

/// The metadata document.
pub(crate) fn metadata_document(resource: &str, servers: &[String], scopes: &[String]) -> Vec<u8> {
    let doc = json!({
        "resource": resource,
        "authorization_servers": servers,
        "scopes_supported": scopes,
        "bearer_methods_supported": ["header"],
    });
    serde_json::to_vec(&doc).expect("a JSON value serializes")
}

/// A quoted-string parameter value: no quotes, backslashes or control characters inside.
fn quoted(v: &str) -> String {
    v.chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect()
}

/// `Bearer error="…", error_description="…", scope="…", resource_metadata="…"`.
pub(crate) fn challenge(error: Option<(&str, &str)>, scope: &[&str], metadata_url: &str) -> String {
    let mut parts = Vec::new();
    if let Some((code, description)) = error {
        parts.push(format!("error=\"{code}\""));
        parts.push(format!("error_description=\"{}\"", quoted(description)));
    }
    if !scope.is_empty() {
        parts.push(format!("scope=\"{}\"", quoted(&scope.join(" "))));
    }
    parts.push(format!("resource_metadata=\"{}\"", quoted(metadata_url)));
    format!("Bearer {}", parts.join(", "))
}

/// 401 without a token: the client should obtain one.
pub(crate) fn missing_token(scope: &[&str], metadata_url: &str) -> Refusal {
    Refusal {
        rejection: Rejection::new(
            401,
            codes::GATEWAY_UNAUTHORIZED,
            "auth-missing-token",
            "This MCP server requires an access token: send Authorization: Bearer <token> (see resource_metadata in WWW-Authenticate)",
        ),
        challenge: Some(challenge(None, scope, metadata_url)),
    }
}

/// 401 with `error="invalid_token"`: a token was sent and did not verify.
pub(crate) fn invalid_token(
    reason: &'static str,
    description: &str,
    scope: &[&str],
    metadata_url: &str,
) -> Refusal {
    Refusal {
        rejection: Rejection::new(
            401,
            codes::GATEWAY_UNAUTHORIZED,
            reason,
            format!("Invalid access token: {description}"),
        ),
        challenge: Some(challenge(
            Some(("invalid_token", description)),
            scope,
            metadata_url,
        )),
    }
}

/// 400 with `error="invalid_request"`: the token came in the query string (MCP forbids it).
pub(crate) fn token_in_query(metadata_url: &str) -> Refusal {
    let d = "Access tokens must be sent in the Authorization header, never in the query string";
    Refusal {
        rejection: Rejection::new(400, codes::GATEWAY_UNAUTHORIZED, "auth-token-in-query", d),
        challenge: Some(challenge(Some(("invalid_request", d)), &[], metadata_url)),
    }
}

/// 400 with `error="invalid_request"`: more than one `Authorization` header.
pub(crate) fn several_tokens(metadata_url: &str) -> Refusal {
    let d = "Send exactly one Authorization header";
    Refusal {
        rejection: Rejection::new(400, codes::GATEWAY_UNAUTHORIZED, "auth-several-tokens", d),
        challenge: Some(challenge(Some(("invalid_request", d)), &[], metadata_url)),
    }
}

/// 403 with `error="insufficient_scope"`.
pub(crate) fn insufficient_scope(
    reason: &'static str,
    message: String,
    rule: Option<&str>,
    scope: &[&str],
    metadata_url: &str,
) -> Refusal {
    let mut rej = Rejection::new(403, codes::GATEWAY_FORBIDDEN, reason, message.clone());
    rej = rej.with_data(json!({ "rule": rule, "requiredScopes": scope }));
    Refusal {
        rejection: rej,
        challenge: Some(challenge(
            Some(("insufficient_scope", &message)),
            scope,
            metadata_url,
        )),
    }
}

/// 503: the keys to verify the token could not be obtained (the issuer's fault, not the
/// client's; the client may retry).
pub(crate) fn keys_unavailable() -> Refusal {
    unavailable(
        "auth-keys-unavailable",
        "The gateway could not obtain the issuer's signing keys to verify the token; retry later",
    )
}

/// 503 for a token that could not be checked (keys or introspection out of reach).
pub(crate) fn unavailable(reason: &'static str, message: &'static str) -> Refusal {
    Refusal {
        rejection: Rejection::new(503, codes::GATEWAY_AUTH_UNAVAILABLE, reason, message),
        challenge: None,
    }
}

/// Whether the query string carries an access token (`access_token=`, RFC 6750 §2.3) in any
/// spelling a framework behind reads as that key (`access%5Ftoken`, `access_token[]`, …; see
/// [`crate::mcp::query`]).
pub(crate) fn query_has_token(query: Option<&str>) -> bool {
    crate::mcp::query::has_key(query, "access_token")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls() {
        assert_eq!(
            metadata_url_for("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url_for("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
        assert!(is_metadata_path(
            "/.well-known/oauth-protected-resource",
            "/mcp"
        ));
        assert!(is_metadata_path(
            "/.well-known/oauth-protected-resource/mcp",
            "/mcp"
        ));
        assert!(!is_metadata_path(
            "/.well-known/oauth-protected-resource/x",
            "/mcp"
        ));
    }

    #[test]
    fn challenges() {
        assert_eq!(
            challenge(None, &["mcp:read"], "https://h/.wk"),
            r#"Bearer scope="mcp:read", resource_metadata="https://h/.wk""#
        );
        assert_eq!(
            challenge(Some(("invalid_token", "a \"b\"")), &[], "u"),
            r#"Bearer error="invalid_token", error_description="a b", resource_metadata="u""#
        );
        let r = insufficient_scope(
            "auth-rule-denied",
            "no".into(),
            Some("r1"),
            &["deploy:write"],
            "u",
        );
        assert_eq!(r.rejection.status, 403);
        assert!(r
            .challenge
            .unwrap()
            .contains(r#"error="insufficient_scope""#));
    }

    #[test]
    fn query_tokens() {
        assert!(query_has_token(Some("a=1&access_token=x")));
        assert!(query_has_token(Some("ACCESS_TOKEN=x")));
        assert!(query_has_token(Some("a=1&access%5Ftoken=x")));
        assert!(query_has_token(Some("access%5ftoken=x")));
        assert!(query_has_token(Some("a=1;Access+Token[]=x")));
        assert!(!query_has_token(Some("token=x")));
        assert!(!query_has_token(None));
    }
}
