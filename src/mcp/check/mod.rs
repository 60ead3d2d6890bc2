//! Headers against the body, in one order of precedence (the spec does not fix one; the first
//! failing check answers).
//!
//! [`Claims`] is what the headers say (read once, before the body); [`check_request`] compares it
//! with the parsed [`Envelope`]. The gateway and the backend call the same function, so they
//! reject the same requests with the same status, code and message.

use serde_json::json;

use super::envelope::Envelope;
use super::error::Rejection;
use super::header::{self, Claim};
use super::methods::name_field;

mod claims;
pub use claims::{Claims, VersionPolicy};

fn problem(header_name: &'static str, reason: &'static str, p: header::ValueProblem) -> Rejection {
    Rejection::header_mismatch(reason, format!("The {header_name} header {}", p.describe()))
        .with_data(json!({ "header": header_name }))
}

fn missing(header_name: &'static str, reason: &'static str, why: &str) -> Rejection {
    Rejection::header_mismatch(
        reason,
        format!("The {header_name} header is required {why}"),
    )
    .with_data(json!({ "header": header_name }))
}

fn mismatch(
    header_name: &'static str,
    reason: &'static str,
    got: &str,
    field: &str,
    want: &str,
) -> Rejection {
    Rejection::header_mismatch(
        reason,
        format!(
            "The {header_name} header {:?} does not match {field} {:?}",
            clip(got),
            clip(want)
        ),
    )
    .with_data(json!({ "header": header_name, "field": field }))
}

/// Bound what a message repeats of client input.
fn clip(s: &str) -> &str {
    match s.char_indices().nth(128) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

const PV: &str = "MCP-Protocol-Version";
const MM: &str = "Mcp-Method";
const MN: &str = "Mcp-Name";

/// Check a request's headers against its body. `Ok` means the headers can be trusted: the
/// method and name they claim are the ones the body carries.
///
/// Order (first failure wins): protocol version header vs body (-32020), `Mcp-Method` presence
/// and value (-32020), an `Mcp-Param-*` header sent twice (-32020), unsupported version
/// (-32022), `_meta` fields (-32602), `Mcp-Name` presence and value (-32020). Notifications need
/// no headers, but a header that is present must agree with the body.
pub fn check_request(
    claims: &Claims,
    env: &Envelope,
    policy: VersionPolicy,
) -> Result<(), Rejection> {
    let method = env.method.as_deref().unwrap_or_default();
    legacy_initialize(claims, env, method, policy)?;
    version_header(claims, env)?;
    method_header(claims, env, method)?;
    repeated_param(claims)?;
    if env.is_notification() {
        return Ok(());
    }
    version_served(claims, policy)?;
    required_meta(env)?;
    name_header(claims, env, method)
}

/// Step 0: a 2025-era client (`initialize`, no version header) learns which versions are served
/// (a modern-only server SHOULD list them in whatever error it answers initialize with).
#[inline]
fn legacy_initialize(
    claims: &Claims,
    env: &Envelope,
    method: &str,
    policy: VersionPolicy,
) -> Result<(), Rejection> {
    if method == "initialize" && matches!(claims.protocol_version, Claim::Absent) {
        let requested = env.legacy_version.as_deref().unwrap_or("");
        return Err(Rejection::unsupported_version(
            policy.supported(),
            requested,
        ));
    }
    Ok(())
}

/// Step 1: the protocol version header against the body's `_meta` protocolVersion.
#[inline]
fn version_header(claims: &Claims, env: &Envelope) -> Result<(), Rejection> {
    match &claims.protocol_version {
        Claim::Invalid(p) => return Err(problem(PV, "protocol-version-invalid", *p)),
        Claim::Absent if !env.is_notification() => {
            return Err(missing(
                PV,
                "protocol-version-missing",
                "on every request of revision 2026-07-28",
            ))
        }
        Claim::Present(h) => {
            if let Some(b) = env.protocol_version.as_deref() {
                if b != h.as_ref() {
                    return Err(mismatch(
                        PV,
                        "protocol-version-mismatch",
                        h,
                        "params._meta protocolVersion",
                        b,
                    ));
                }
            }
        }
        Claim::Absent => {}
    }
    Ok(())
}

/// Step 2: the `Mcp-Method` header's presence and value against the body's method.
#[inline]
fn method_header(claims: &Claims, env: &Envelope, method: &str) -> Result<(), Rejection> {
    match &claims.method {
        Claim::Invalid(p) => Err(problem(MM, "mcp-method-invalid", *p)),
        Claim::Absent if !env.is_notification() => {
            Err(missing(MM, "mcp-method-missing", "on every request"))
        }
        Claim::Present(h) if h.as_ref() != method => {
            Err(mismatch(MM, "mcp-method-mismatch", h, "method", method))
        }
        _ => Ok(()),
    }
}

/// Step 2b: an Mcp-Param-* header mirrors one argument: a second copy could be read instead.
#[inline]
fn repeated_param(claims: &Claims) -> Result<(), Rejection> {
    match claims.repeated_param {
        Some(name) => Err(Rejection::header_mismatch(
            "mcp-param-invalid",
            format!("The {name} header appears more than once; send it once"),
        )
        .with_data(json!({ "header": name }))),
        None => Ok(()),
    }
}

/// Step 3: header and body agree; is the version served?
#[inline]
fn version_served(claims: &Claims, policy: VersionPolicy) -> Result<(), Rejection> {
    match claims.protocol_version.value() {
        Some(v) if !policy.accepts(v) => Err(Rejection::unsupported_version(policy.supported(), v)),
        _ => Ok(()),
    }
}

/// Step 4: the `_meta` fields every request of this revision carries.
#[inline]
fn required_meta(env: &Envelope) -> Result<(), Rejection> {
    if !env.has_meta {
        return Err(Rejection::invalid_meta(
            "params._meta is required on every request of revision 2026-07-28",
        ));
    }
    if env.protocol_version.is_none() {
        return Err(Rejection::invalid_meta(
            "params._meta[\"io.modelcontextprotocol/protocolVersion\"] is required (a string)",
        ));
    }
    if !env.has_client_capabilities {
        return Err(Rejection::invalid_meta(
            "params._meta[\"io.modelcontextprotocol/clientCapabilities\"] is required (an object, {} for none)",
        ));
    }
    Ok(())
}

/// Step 5: `Mcp-Name` on the three methods that require it, against the body's name field.
#[inline]
fn name_header(claims: &Claims, env: &Envelope, method: &str) -> Result<(), Rejection> {
    let Some(field) = name_field(method) else {
        return Ok(());
    };
    let want = env.mcp_name();
    match &claims.name {
        Claim::Invalid(p) => Err(problem(MN, "mcp-name-invalid", *p)),
        Claim::Absent => Err(missing(MN, "mcp-name-missing", &format!("on {method}"))),
        Claim::Present(h) if Some(h.as_ref()) != want => Err(mismatch(
            MN,
            "mcp-name-mismatch",
            h,
            field.path(),
            want.unwrap_or("(missing)"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
