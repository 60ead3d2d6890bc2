//! Headers against the body, in the order of precedence of the digest's §3.2.
//!
//! [`Claims`] is what the headers say (read once, before the body); [`check_request`] compares it
//! with the parsed [`Envelope`]. The gateway and the backend call the same function, so they
//! reject the same requests with the same status, code and message.

use http::HeaderMap;
use serde_json::json;

use super::envelope::Envelope;
use super::error::Rejection;
use super::header::{self, Claim};
use super::methods::name_field;

/// What the MCP headers of one request claim. Values are trimmed and, for `Mcp-Name`, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims<'a> {
    pub protocol_version: Claim<'a>,
    pub method: Claim<'a>,
    pub name: Claim<'a>,
}

impl<'a> Claims<'a> {
    pub fn read(headers: &'a HeaderMap) -> Self {
        Claims {
            protocol_version: header::claim(headers, header::PROTOCOL_VERSION, false),
            method: header::claim(headers, header::METHOD, false),
            name: header::claim(headers, header::NAME, true),
        }
    }

    /// A problem visible from the headers alone (before the body) that dooms the request:
    /// a missing or malformed `MCP-Protocol-Version` or `Mcp-Method`, a malformed `Mcp-Name`,
    /// or a protocol version the policy refuses. The answer still needs the body's id, so the
    /// caller reads the body and runs [`check_request`], which reports the same problem.
    pub fn doomed(&self, policy: VersionPolicy) -> bool {
        let bad = |c: &Claim| matches!(c, Claim::Invalid(_));
        bad(&self.protocol_version)
            || bad(&self.method)
            || bad(&self.name)
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
    /// upstream to negotiate (a gateway: §3.3 asks it to refuse versions older than the first
    /// one that requires header validation).
    AtLeast(&'static str),
}

impl VersionPolicy {
    pub fn accepts(self, v: &str) -> bool {
        match self {
            VersionPolicy::Exactly(list) => list.contains(&v),
            VersionPolicy::AtLeast(min) => !is_date(v) || v >= min,
        }
    }

    fn supported(self) -> &'static [&'static str] {
        match self {
            VersionPolicy::Exactly(list) => list,
            VersionPolicy::AtLeast(_) => &[super::PROTOCOL_VERSION],
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

/// Check a request's headers against its body. `Ok` means the headers can be trusted: the
/// method and name they claim are the ones the body carries.
///
/// Order (first failure wins): protocol version header vs body (-32020), `Mcp-Method` presence
/// and value (-32020), unsupported version (-32022), `_meta` fields (-32602), `Mcp-Name`
/// presence and value (-32020). Notifications need no headers, but a header that is present
/// must agree with the body.
pub fn check_request(
    claims: &Claims,
    env: &Envelope,
    policy: VersionPolicy,
) -> Result<(), Rejection> {
    const PV: &str = "MCP-Protocol-Version";
    const MM: &str = "Mcp-Method";
    const MN: &str = "Mcp-Name";
    let method = env.method.as_deref().unwrap_or_default();
    let body_version = env.protocol_version.as_deref();

    // 0. A 2025-era client (`initialize`, no version header) learns which versions are served
    //    (a modern-only server SHOULD list them in whatever error it answers initialize with).
    if method == "initialize" && matches!(claims.protocol_version, Claim::Absent) {
        let requested = env.legacy_version.as_deref().unwrap_or("");
        return Err(Rejection::unsupported_version(
            policy.supported(),
            requested,
        ));
    }

    // 1. Protocol version header against the body.
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
            if let Some(b) = body_version {
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

    // 2. Mcp-Method.
    match &claims.method {
        Claim::Invalid(p) => return Err(problem(MM, "mcp-method-invalid", *p)),
        Claim::Absent if !env.is_notification() => {
            return Err(missing(MM, "mcp-method-missing", "on every request"))
        }
        Claim::Present(h) if h.as_ref() != method => {
            return Err(mismatch(MM, "mcp-method-mismatch", h, "method", method))
        }
        _ => {}
    }
    if env.is_notification() {
        return Ok(());
    }

    // 3. Header and body agree; is the version served?
    if let Some(v) = claims.protocol_version.value() {
        if !policy.accepts(v) {
            return Err(Rejection::unsupported_version(policy.supported(), v));
        }
    }

    // 4. Required _meta fields.
    if !env.has_meta {
        return Err(Rejection::invalid_meta(
            "params._meta is required on every request of revision 2026-07-28",
        ));
    }
    if body_version.is_none() {
        return Err(Rejection::invalid_meta(
            "params._meta[\"io.modelcontextprotocol/protocolVersion\"] is required (a string)",
        ));
    }
    if !env.has_client_capabilities {
        return Err(Rejection::invalid_meta(
            "params._meta[\"io.modelcontextprotocol/clientCapabilities\"] is required (an object, {} for none)",
        ));
    }

    // 5. Mcp-Name on the three methods that require it.
    if let Some(field) = name_field(method) {
        let want = env.mcp_name();
        match &claims.name {
            Claim::Invalid(p) => return Err(problem(MN, "mcp-name-invalid", *p)),
            Claim::Absent => return Err(missing(MN, "mcp-name-missing", &format!("on {method}"))),
            Claim::Present(h) if Some(h.as_ref()) != want => {
                return Err(mismatch(
                    MN,
                    "mcp-name-mismatch",
                    h,
                    field.path(),
                    want.unwrap_or("(missing)"),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::codes;
    use crate::mcp::envelope::parse;

    const GW: VersionPolicy = VersionPolicy::AtLeast("2026-07-28");

    fn body(method: &str, params: &str) -> Envelope {
        parse(
            format!(r#"{{"jsonrpc":"2.0","id":7,"method":"{method}","params":{params}}}"#)
                .as_bytes(),
        )
        .unwrap()
    }

    fn call(name: &str, version: &str) -> Envelope {
        body(
            "tools/call",
            &format!(
                r#"{{"name":"{name}","_meta":{{"io.modelcontextprotocol/protocolVersion":"{version}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}"#
            ),
        )
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn run(
        pairs: &[(&str, &str)],
        env: &Envelope,
        policy: VersionPolicy,
    ) -> Result<(), (u16, i32, &'static str)> {
        let h = headers(pairs);
        check_request(&Claims::read(&h), env, policy).map_err(|r| (r.status, r.code, r.reason))
    }

    const PV: (&str, &str) = ("mcp-protocol-version", "2026-07-28");
    const CALL: (&str, &str) = ("mcp-method", "tools/call");

    #[test]
    fn good_request_passes() {
        assert_eq!(
            run(
                &[PV, CALL, ("mcp-name", "get_weather")],
                &call("get_weather", "2026-07-28"),
                GW
            ),
            Ok(())
        );
        assert_eq!(
            run(
                &[PV, CALL, ("MCP-NAME", "  get_weather ")],
                &call("get_weather", "2026-07-28"),
                GW
            ),
            Ok(())
        );
        assert_eq!(
            run(
                &[PV, CALL, ("mcp-name", "=?base64?bcOpdMOpbw==?=")],
                &call("météo", "2026-07-28"),
                GW
            ),
            Ok(())
        );
    }

    #[test]
    fn header_failures_in_order() {
        let e = call("get_weather", "2026-07-28");
        let m = |r| Err((400, codes::HEADER_MISMATCH, r));
        assert_eq!(
            run(&[CALL, ("mcp-name", "get_weather")], &e, GW),
            m("protocol-version-missing")
        );
        assert_eq!(
            run(&[PV, ("mcp-name", "get_weather")], &e, GW),
            m("mcp-method-missing")
        );
        assert_eq!(
            run(
                &[
                    PV,
                    ("mcp-method", "TOOLS/CALL"),
                    ("mcp-name", "get_weather")
                ],
                &e,
                GW
            ),
            m("mcp-method-mismatch")
        );
        assert_eq!(run(&[PV, CALL], &e, GW), m("mcp-name-missing"));
        assert_eq!(
            run(&[PV, CALL, ("mcp-name", "get_forecast")], &e, GW),
            m("mcp-name-mismatch")
        );
        assert_eq!(
            run(&[PV, CALL, ("mcp-name", "=?base64?bc!!?=")], &e, GW),
            m("mcp-name-invalid")
        );
        assert_eq!(
            run(
                &[PV, CALL, ("mcp-name", "=?BASE64?Z2V0X3dlYXRoZXI=?=")],
                &e,
                GW
            ),
            m("mcp-name-mismatch")
        );
        assert_eq!(
            run(
                &[
                    PV,
                    CALL,
                    ("mcp-name", "get_weather"),
                    ("mcp-name", "get_weather")
                ],
                &e,
                GW
            ),
            m("mcp-name-invalid")
        );
        let old = call("get_weather", "2025-11-25");
        assert_eq!(
            run(&[PV, CALL, ("mcp-name", "get_weather")], &old, GW),
            m("protocol-version-mismatch")
        );
    }

    #[test]
    fn version_policy() {
        let v999 = call("a", "v999.0.0");
        let h = [
            ("mcp-protocol-version", "v999.0.0"),
            CALL,
            ("mcp-name", "a"),
        ];
        let server = VersionPolicy::Exactly(&["2026-07-28"]);
        assert_eq!(
            run(&h, &v999, server),
            Err((
                400,
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                "unsupported-version"
            ))
        );
        assert_eq!(
            run(&h, &v999, GW),
            Ok(()),
            "a gateway passes undated versions on"
        );
        let old = call("a", "2025-06-18");
        let h = [
            ("mcp-protocol-version", "2025-06-18"),
            CALL,
            ("mcp-name", "a"),
        ];
        assert_eq!(
            run(&h, &old, GW),
            Err((
                400,
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                "unsupported-version"
            ))
        );
        let r = check_request(&Claims::read(&headers(&h)), &old, GW).unwrap_err();
        assert_eq!(r.data.unwrap()["requested"], "2025-06-18");
    }

    #[test]
    fn meta_failures_are_invalid_params() {
        let h = [PV, ("mcp-method", "server/discover")];
        let no_meta = body("server/discover", "{}");
        assert_eq!(
            run(&h, &no_meta, GW),
            Err((400, codes::INVALID_PARAMS, "meta-invalid"))
        );
        let no_caps = body(
            "server/discover",
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        );
        assert_eq!(
            run(&h, &no_caps, GW),
            Err((400, codes::INVALID_PARAMS, "meta-invalid"))
        );
    }

    #[test]
    fn notifications_need_no_headers_but_present_ones_must_agree() {
        let n =
            parse(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#).unwrap();
        assert_eq!(run(&[], &n, GW), Ok(()));
        assert_eq!(
            run(&[("mcp-method", "notifications/other")], &n, GW),
            Err((400, codes::HEADER_MISMATCH, "mcp-method-mismatch"))
        );
    }

    #[test]
    fn a_2025_initialize_learns_the_supported_versions() {
        let e = body(
            "initialize",
            r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old","version":"1"}}"#,
        );
        let h = headers(&[]);
        let r = check_request(&Claims::read(&h), &e, GW).unwrap_err();
        assert_eq!(
            (r.status, r.code),
            (400, codes::UNSUPPORTED_PROTOCOL_VERSION)
        );
        let data = r.data.unwrap();
        assert_eq!(data["supported"], serde_json::json!(["2026-07-28"]));
        assert_eq!(data["requested"], "2025-11-25");
    }

    #[test]
    fn name_on_other_methods_is_ignored() {
        let e = body(
            "tools/list",
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        );
        assert_eq!(
            run(
                &[PV, ("mcp-method", "tools/list"), ("mcp-name", "whatever")],
                &e,
                GW
            ),
            Ok(())
        );
    }

    #[test]
    fn doomed_from_headers_alone() {
        let h = headers(&[PV, CALL, ("mcp-name", "a")]);
        assert!(!Claims::read(&h).doomed(GW));
        let h = headers(&[CALL]);
        assert!(Claims::read(&h).doomed(GW));
        let h = headers(&[("mcp-protocol-version", "2025-03-26"), CALL]);
        assert!(Claims::read(&h).doomed(GW));
    }
}
