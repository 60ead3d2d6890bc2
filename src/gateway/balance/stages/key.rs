//! Shard keys: what a `balance: hash` pool hashes for a request (the decoded `Mcp-Name`, the
//! verified caller or a hash of the bearer token, a header, a claim or an `Mcp-Param-*` value),
//! reduced to 64 bits here so that no token leaves this module.

use std::hash::{Hash, Hasher};

use crate::auth::Identity;
use crate::config::HashKey;
use crate::mcp::header::bearer_token;

#[cfg(test)]
/// The shard key of a request, hashed to 64 bits (so a bearer token never leaves this function).
pub(crate) fn shard_key(
    key: &HashKey,
    name: Option<&str>,
    headers: &http::HeaderMap,
) -> Option<u64> {
    shard_key_for(key, name, headers, None)
}

/// `shard_key` with the verified identity, when auth is on: `principal` is its subject.
pub(crate) fn shard_key_for(
    key: &HashKey,
    name: Option<&str>,
    headers: &http::HeaderMap,
    identity: Option<&Identity>,
) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match (key, identity) {
        (HashKey::McpName, _) => name?.hash(&mut h),
        (HashKey::Principal, Some(id)) => id.subject.hash(&mut h),
        (HashKey::Principal, None) => bearer_token(headers)?.hash(&mut h),
        (HashKey::Header(n), _) => match crate::mcp::header::key_header(headers, n.as_str()) {
            // Admission refuses a repeated or shadowed key header; none shards.
            crate::mcp::header::KeyHeader::One(v) => v.hash(&mut h),
            _ => return None,
        },
        (HashKey::Claim(c), id) => id?.claim_text(c)?.hash(&mut h),
        (HashKey::Param(n), _) => match crate::mcp::header::claim(headers, n.as_str(), true) {
            crate::mcp::header::Claim::Present(v) => v.hash(&mut h),
            _ => return None,
        },
    }
    Some(h.finish())
}
