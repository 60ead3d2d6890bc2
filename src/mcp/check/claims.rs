//! What the MCP headers of a request claim ([`Claims`], read once, before the body) and which
//! protocol versions a server or gateway serves ([`VersionPolicy`]); [`super::check_request`]
//! compares them with the body.

use http::HeaderMap;

use super::super::header::{self, Claim};

/// What the MCP headers of one request claim. Values are trimmed and, for `Mcp-Name`, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims<'a> {
    pub protocol_version: Claim<'a>,
    pub method: Claim<'a>,
    pub name: Claim<'a>,
    /// The first `Mcp-Param-*` header sent more than once (its lower-case name), if any.
    pub repeated_param: Option<&'a str>,
}

impl<'a> Claims<'a> {
    pub fn read(headers: &'a HeaderMap) -> Self {
        Claims {
            protocol_version: header::claim(headers, header::PROTOCOL_VERSION, false),
            method: header::claim(headers, header::METHOD, false),
            name: header::claim(headers, header::NAME, true),
            repeated_param: headers
                .keys()
                .map(|n| n.as_str())
                .filter(|n| n.starts_with(header::PARAM_PREFIX))
                .find(|n| headers.get_all(*n).iter().nth(1).is_some()),
        }
    }

    /// A problem visible from the headers alone (before the body) that dooms the request:
    /// a missing or malformed `MCP-Protocol-Version` or `Mcp-Method`, a malformed `Mcp-Name`, a
    /// repeated `Mcp-Param-*`, or a protocol version the policy refuses. The answer still needs the body's id, so the
    /// caller reads the body and runs [`check_request`], which reports the same problem.
    pub(crate) fn doomed(&self, policy: VersionPolicy) -> bool {
        let bad = |c: &Claim| matches!(c, Claim::Invalid(_));
        bad(&self.protocol_version)
            || bad(&self.method)
            || bad(&self.name)
            || self.repeated_param.is_some()
            || matches!(self.protocol_version, Claim::Absent)
            || matches!(self.method, Claim::Absent)
            || self
                .protocol_version
                .value()
                .is_some_and(|v| !policy.accepts(v))
    }
}

/// Which protocol versions are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionPolicy {
    /// Exactly these versions (a server).
    Exactly(&'static [&'static str]),
    /// This dated version or a later one; versions that are not dates are passed on for the
    /// upstream to negotiate (a gateway: the spec's rules for intermediaries ask it to refuse
    /// versions older than the first one that requires header validation).
    AtLeast(&'static str),
}

impl VersionPolicy {
    pub(crate) fn accepts(self, v: &str) -> bool {
        match self {
            VersionPolicy::Exactly(list) => list.contains(&v),
            VersionPolicy::AtLeast(min) => !is_date(v) || v >= min,
        }
    }

    pub(super) fn supported(self) -> &'static [&'static str] {
        match self {
            VersionPolicy::Exactly(list) => list,
            VersionPolicy::AtLeast(_) => &[super::super::PROTOCOL_VERSION],
        }
    }
}

fn is_date(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}
