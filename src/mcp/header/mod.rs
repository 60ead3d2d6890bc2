//! MCP request header names and the value encoding of spec §"Value Encoding".
//!
//! Names are compared case-insensitively (the `http` crate lowercases them); values are
//! case-sensitive. Optional whitespace around a value is trimmed. `Mcp-Name` and `Mcp-Param-*`
//! values may be wrapped as `=?base64?<standard base64 with padding>?=`; anything that does not
//! have exactly that lowercase prefix and suffix is a literal.
//!
//! A header the gateway uses as a key (a rate limit's or hash pool's `header:<name>`) is read
//! once, here ([`key_header`]): absent, one value, or no reading at all when it is repeated or
//! another name folds onto it (`x_tenant` for `x-tenant`, [`folded_name`]).

use base64::Engine;
use http::HeaderMap;
use std::borrow::Cow;

/// `MCP-Protocol-Version`, on every POST.
pub(crate) const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Mcp-Method`, on every request: the JSON-RPC `method`.
pub(crate) const METHOD: &str = "mcp-method";
/// `Mcp-Name`, on tools/call, prompts/get (params.name) and resources/read (params.uri).
pub(crate) const NAME: &str = "mcp-name";
/// The MCP header names above as typed names: a lookup by one hashes it, with no parse of the
/// name on each request.
pub(crate) mod typed {
    use http::HeaderName;
    pub(crate) const PROTOCOL_VERSION: HeaderName =
        HeaderName::from_static(super::PROTOCOL_VERSION);
    pub(crate) const METHOD: HeaderName = HeaderName::from_static(super::METHOD);
    pub(crate) const NAME: HeaderName = HeaderName::from_static(super::NAME);
}
/// Prefix of the headers that mirror tool arguments marked `x-mcp-header`.
pub const PARAM_PREFIX: &str = "mcp-param-";
/// W3C trace context headers (OpenTelemetry propagation); the gateway continues and forwards them.
pub(crate) const TRACEPARENT: &str = "traceparent";
pub(crate) const TRACESTATE: &str = "tracestate";
/// The response header the gateway adds to name the instance that served a request.
pub const DEFAULT_UPSTREAM_HEADER: &str = "x-mcp-edge-upstream";
/// The response header the gateway adds to an MRTR retry leg of a pool with
/// `mrtr.retry_landing: elsewhere`: `elsewhere` (another instance than the previous leg's),
/// `same` (no other was eligible) or `untracked` (the gateway did not see the previous leg).
pub const RETRY_LANDING: &str = "x-mcp-edge-retry-landing";

/// Headers besides the MCP ones whose value decides what a request is or where it goes. A
/// gateway must see them exactly as the upstream will: never removed as hop-by-hop, never sent
/// twice, never spelled so that another reader could take a different header for them.
pub(crate) const FRAMING_AND_POLICY: [&str; 6] = [
    "content-length",
    "content-type",
    "transfer-encoding",
    "host",
    "origin",
    "authorization",
];

/// Headers that may appear at most once on a request: a second copy is read differently by
/// different components (the first, the last, or both joined).
pub(crate) const SINGLETONS: [&str; 4] = ["content-length", "host", "origin", "authorization"];

/// Whether `name` (lower case) is a header the gateway checks or routes on: any `mcp-*` header,
/// or one of [`FRAMING_AND_POLICY`].
pub(crate) fn is_checked(name: &str) -> bool {
    name.starts_with("mcp-") || FRAMING_AND_POLICY.contains(&name)
}

/// The name a header is read under by frameworks that fold `_` into `-` (CGI-style readers,
/// some Python and PHP servers: `Mcp_Name` and `Mcp-Name` both become `HTTP_MCP_NAME`), lower
/// case; `None` when the name has no underscore (it is read as itself).
pub(crate) fn folded_name(name: &str) -> Option<String> {
    name.contains('_')
        .then(|| name.to_ascii_lowercase().replace('_', "-"))
}

/// Whether a header name with underscores becomes a checked header when a framework folds `_`
/// into `-`: `Mcp_Name` → `mcp-name`.
pub(crate) fn folds_into_checked(name: &str) -> bool {
    folded_name(name).is_some_and(|n| is_checked(&n))
}

/// How a request carries a header the gateway uses as a key (a rate-limit or hash key): a key
/// must mean one thing to the gateway and to every reader behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyHeader<'a> {
    Absent,
    /// Sent once, under its own name: the raw value.
    One(&'a [u8]),
    /// Sent more than once: readers take the first copy, the last, or both joined.
    Repeated,
    /// Another header name (this one, e.g. `x_tenant`) is read as it by frameworks that fold
    /// `_` into `-`; the gateway would read one header and such a framework another.
    Shadowed(&'a str),
}

/// Read the header `name` (lower case) as a key.
pub(crate) fn key_header<'a>(headers: &'a HeaderMap, name: &str) -> KeyHeader<'a> {
    let read_as_target = |n: &str| n != name && folds_to(n, name);
    if let Some(other) = headers
        .keys()
        .map(|n| n.as_str())
        .find(|n| read_as_target(n))
    {
        return KeyHeader::Shadowed(other);
    }
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (None, _) => KeyHeader::Absent,
        (Some(v), None) => KeyHeader::One(v.as_bytes()),
        (Some(_), Some(_)) => KeyHeader::Repeated,
    }
}

/// Whether `name` and `target` are one header name to a reader that folds names: ASCII case
/// (every HTTP reader) and `_` read as `-` (CGI/WSGI environments, some Python and PHP
/// servers). `X_Mcp_Edge_Subject` is `x-mcp-edge-subject` to such a reader.
pub fn folds_to(name: &str, target: &str) -> bool {
    let fold = |b: u8| {
        if b == b'_' {
            b'-'
        } else {
            b.to_ascii_lowercase()
        }
    };
    name.len() == target.len()
        && name
            .bytes()
            .zip(target.bytes())
            .all(|(a, b)| fold(a) == fold(b))
}

/// The fields of `headers` that a folding reader ([`folds_to`]) would read as one of
/// `asserted`: the exact name and its `_` spellings (empty, without allocating, when none).
/// The gateway removes them (every copy) before it sets the headers it asserts, so that nothing
/// a client (or an upstream, for response headers) sent under such a name can stand beside or
/// in place of the gateway's value.
pub(crate) fn shadows_of(
    headers: &HeaderMap,
    asserted: &[http::HeaderName],
) -> Vec<http::HeaderName> {
    if asserted.is_empty() {
        return Vec::new();
    }
    headers
        .keys()
        .filter(|k| asserted.iter().any(|a| folds_to(k.as_str(), a.as_str())))
        .cloned()
        .collect()
}

const SENTINEL_PREFIX: &str = "=?base64?";
const SENTINEL_SUFFIX: &str = "?=";

/// Why a header value could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueProblem {
    /// The header appears more than once.
    Duplicate,
    /// The raw value has bytes outside visible ASCII, space and tab.
    BadCharacters,
    /// The `=?base64?…?=` sentinel holds invalid base64 (alphabet or padding).
    BadBase64,
    /// The base64 payload is not UTF-8.
    NotUtf8,
}

impl ValueProblem {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            ValueProblem::Duplicate => "appears more than once",
            ValueProblem::BadCharacters => "has characters outside visible ASCII, space and tab",
            ValueProblem::BadBase64 => {
                "has a malformed =?base64?...?= value (bad alphabet or padding)"
            }
            ValueProblem::NotUtf8 => "has a =?base64?...?= value that is not UTF-8",
        }
    }
}

/// What a request's headers claim about one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim<'a> {
    Absent,
    Present(Cow<'a, str>),
    Invalid(ValueProblem),
}

impl<'a> Claim<'a> {
    pub(crate) fn value(&self) -> Option<&str> {
        match self {
            Claim::Present(v) => Some(v),
            _ => None,
        }
    }
}

/// Trim optional whitespace (space and tab) around a header value.
fn trim_ows(raw: &[u8]) -> &[u8] {
    let start = raw
        .iter()
        .position(|b| *b != b' ' && *b != b'\t')
        .unwrap_or(raw.len());
    let end = raw
        .iter()
        .rposition(|b| *b != b' ' && *b != b'\t')
        .map_or(start, |e| e + 1);
    &raw[start..end]
}

/// Decode one raw header value: check characters, trim, unwrap base64 when `decode_base64`.
pub(crate) fn decode_value(raw: &[u8], decode_base64: bool) -> Result<Cow<'_, str>, ValueProblem> {
    if raw
        .iter()
        .any(|b| !(*b == b'\t' || (0x20..=0x7e).contains(b)))
    {
        return Err(ValueProblem::BadCharacters);
    }
    // Checked above: every byte is ASCII.
    let text = std::str::from_utf8(trim_ows(raw)).map_err(|_| ValueProblem::BadCharacters)?;
    if decode_base64 {
        if let Some(inner) = text
            .strip_prefix(SENTINEL_PREFIX)
            .and_then(|t| t.strip_suffix(SENTINEL_SUFFIX))
        {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(inner)
                .map_err(|_| ValueProblem::BadBase64)?;
            return String::from_utf8(bytes)
                .map(Cow::Owned)
                .map_err(|_| ValueProblem::NotUtf8);
        }
    }
    Ok(Cow::Borrowed(text))
}

/// Encode a value for a `Mcp-Name` / `Mcp-Param-*` header: as is when it is safe, otherwise
/// base64-wrapped (non-ASCII, control characters, surrounding whitespace, or a literal that
/// looks like the sentinel).
pub fn encode_value(value: &str) -> Cow<'_, str> {
    let needs_wrap = value
        .bytes()
        .any(|b| !(0x21..=0x7e).contains(&b) && b != b' ')
        || value.starts_with(' ')
        || value.ends_with(' ')
        || (value.starts_with(SENTINEL_PREFIX) && value.ends_with(SENTINEL_SUFFIX));
    if !needs_wrap {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(format!(
            "{SENTINEL_PREFIX}{}{SENTINEL_SUFFIX}",
            base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
        ))
    }
}

/// Read a single-valued header: absent, its decoded value, or why it cannot be used.
pub(crate) fn claim<'a>(headers: &'a HeaderMap, name: &str, decode_base64: bool) -> Claim<'a> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Claim::Absent;
    };
    if values.next().is_some() {
        return Claim::Invalid(ValueProblem::Duplicate);
    }
    match decode_value(first.as_bytes(), decode_base64) {
        Ok(v) => Claim::Present(v),
        Err(p) => Claim::Invalid(p),
    }
}

/// The bearer token of an `Authorization: Bearer …` header, if any.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests;
