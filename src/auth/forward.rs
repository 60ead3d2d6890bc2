//! What the resource server tells the upstreams (`auth.forward`): the caller's token only to
//! the pools that are its audience, and the identity headers it asserts, set from the verified
//! token (and never taken from the client). A forwarded call and a request the gateway makes on
//! a caller's behalf (federation's merged lists) both apply these edits.

use super::{Auth, Identity};

/// One change to the upstream request's headers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HeaderEdit {
    Remove(http::HeaderName),
    Set(http::HeaderName, http::HeaderValue),
}

impl Auth {
    /// The identity headers this resource server sets on upstream requests (`auth.forward.headers`).
    pub(crate) fn asserted_headers(&self) -> impl Iterator<Item = &http::HeaderName> {
        self.forward.iter().map(|(h, _)| h)
    }

    /// The header changes for the upstream request: `Authorization` removed unless `pool` is
    /// marked as the token's audience; the identity headers removed, then set from the token.
    pub(crate) fn upstream_edits(&self, id: Option<&Identity>, pool: &str) -> Vec<HeaderEdit> {
        let mut out = Vec::new();
        if !self.config.forward.token_to_pools.iter().any(|p| p == pool) {
            out.push(HeaderEdit::Remove(http::header::AUTHORIZATION));
        }
        for (h, claim) in &self.forward {
            out.push(HeaderEdit::Remove(h.clone()));
            let Some(id) = id else { continue };
            let text = match claim.as_str() {
                "principal" => Some(id.subject.clone()),
                "scope" => Some(id.scopes.join(" ")),
                c => id.claim_text(c),
            };
            if let Some(v) = text.and_then(|t| http::HeaderValue::from_str(&t).ok()) {
                out.push(HeaderEdit::Set(h.clone(), v));
            }
        }
        out
    }
}
