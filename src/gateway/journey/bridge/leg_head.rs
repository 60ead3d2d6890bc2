//! The 2026 head of a bridged leg: what [`crate::gateway::transport::upstream_h1::oneshot::mcp_post`]
//! writes for the loopback hop (the same [`MCP_POST_CONSTANT`]), as a parsed head: `Host` as the
//! client sent it (or its request's authority), the MCP headers of the leg's method and name,
//! the `carry` headers (the caller's `Authorization`, `Mcp-Param-*` marks) and the body's length.
//!
//! Most of a head is the same from one leg to the next: the target, `Host`, the constant
//! headers and which names it carries. Each worker thread keeps a head built once
//! ([`Template`]) and clones it: a clone copies the header table as it is, where building it
//! hashes and places each name again; the leg's own values (its method, name and length) then
//! replace the template's in their places. A leg whose `Host`, path or want of a name differs
//! from the template's builds a new one in its place.

use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, HOST};
use pingora::http::RequestHeader;
use std::cell::RefCell;

use crate::gateway::transport::upstream_h1::oneshot::MCP_POST_CONSTANT;
use crate::mcp::{header, methods};

/// A leg's head for a client's `Host` and path, with or without `Mcp-Name` (the method, name and
/// length in it are placeholders, replaced in each clone).
struct Template {
    path: Box<str>,
    host: HeaderValue,
    named: bool,
    uri: http::Uri,
    headers: http::HeaderMap,
}

thread_local! {
    /// This worker thread's template (for the last `Host`, path and want of a name a leg had).
    static TEMPLATE: RefCell<Option<Template>> = const { RefCell::new(None) };
}

/// The head of a leg of the client's request `req` on `path`: a POST of `method` (and `Mcp-Name`
/// `name`), the `carry` headers and a body of `body_len` bytes. Built as parts, with no case
/// map: the leg is never written as HTTP/1.1 text by this head's case.
pub(crate) fn head(
    req: &RequestHeader,
    path: &str,
    (method, name): (&str, Option<&str>),
    carry: &[(String, String)],
    body_len: usize,
) -> pingora::Result<RequestHeader> {
    let host = match req.headers.get(HOST) {
        Some(host) => host.clone(),
        None => HeaderValue::from_str(req.uri.authority().map_or("localhost", |a| a.as_str()))
            .map_err(|_| invalid("host"))?,
    };
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = http::Method::POST;
    let named = name.is_some();
    TEMPLATE.with_borrow_mut(|t| {
        let fits = t
            .as_ref()
            .is_some_and(|t| *t.path == *path && t.host == host && t.named == named);
        if !fits {
            *t = Some(template(path, host, named)?);
        }
        let t = t.as_ref().expect("set above");
        (parts.uri, parts.headers) = (t.uri.clone(), t.headers.clone());
        Ok::<_, Box<pingora::Error>>(())
    })?;
    let h = &mut parts.headers;
    set(h, header::typed::METHOD, method_value(method)?);
    if let Some(n) = name {
        let v = HeaderValue::from_str(&header::encode_value(n)).map_err(|_| invalid("name"))?;
        set(h, header::typed::NAME, v);
    }
    set(h, CONTENT_LENGTH, HeaderValue::from(body_len));
    for (k, v) in carry {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| invalid(k))?;
        h.append(name, HeaderValue::from_str(v).map_err(|_| invalid(k))?);
    }
    Ok(RequestHeader::from(parts))
}

/// `value` in the place of `name`'s (the template has one: a lookup, not an insertion).
fn set(h: &mut http::HeaderMap, name: HeaderName, value: HeaderValue) {
    match h.get_mut(&name) {
        Some(v) => *v = value,
        None => {
            h.insert(name, value);
        }
    }
}

/// A head on `path` with `host`: the target, `Host`, the constant headers, and a place for the
/// method, the length and (when `named`) the name.
fn template(path: &str, host: HeaderValue, named: bool) -> pingora::Result<Template> {
    let uri = http::Uri::try_from(path).map_err(|_| invalid("path"))?;
    // A copy of its own: a parsed client's value shares that client's whole read buffer, which
    // the thread would otherwise keep for as long as it keeps the template.
    let host = HeaderValue::from_bytes(host.as_bytes()).map_err(|_| invalid("host"))?;
    let mut headers = http::HeaderMap::with_capacity(CONSTANT_HEADERS.len() + 4);
    headers.insert(HOST, host.clone());
    for (k, v) in CONSTANT_HEADERS {
        headers.insert(k, v);
    }
    let none = HeaderValue::from_static("");
    headers.insert(header::typed::METHOD, none.clone());
    if named {
        headers.insert(header::typed::NAME, none.clone());
    }
    headers.insert(CONTENT_LENGTH, none);
    Ok(Template {
        path: path.into(),
        host,
        named,
        uri,
        headers,
    })
}

/// `Mcp-Method`'s value: a known method's typed once, at compile time; any other's copied.
fn method_value(method: &str) -> pingora::Result<HeaderValue> {
    match methods::KNOWN.iter().find(|k| **k == method) {
        Some(known) => Ok(HeaderValue::from_static(known)),
        None => HeaderValue::from_str(method).map_err(|_| invalid("method")),
    }
}

fn invalid(what: &str) -> Box<pingora::Error> {
    let msg = format!("a bridged leg's {what} is no valid header");
    pingora::Error::explain(pingora::ErrorType::InvalidHTTPHeader, msg)
}

/// [`MCP_POST_CONSTANT`] typed once, at compile time.
const CONSTANT_HEADERS: [(http::HeaderName, http::HeaderValue); 3] = {
    use http::{HeaderName as N, HeaderValue as V};
    let [(a, av), (b, bv), (c, cv)] = MCP_POST_CONSTANT;
    [
        (N::from_static(a), V::from_static(av)),
        (N::from_static(b), V::from_static(bv)),
        (N::from_static(c), V::from_static(cv)),
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    fn client(host: &str) -> RequestHeader {
        let mut req = RequestHeader::build("POST", b"/mcp?x=1", None).unwrap();
        req.insert_header("host", host).unwrap();
        req.insert_header("mcp-session-id", "s").unwrap();
        req
    }

    fn names(h: &RequestHeader) -> Vec<(String, String)> {
        let mut all: Vec<_> = (h.headers.iter())
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        all.sort();
        all
    }

    #[test]
    fn each_head_carries_its_own_values_whatever_the_template_held() {
        let carry = [("authorization".to_owned(), "Bearer t".to_owned())];
        let legs = [
            ("a", "/mcp", ("tools/call", Some("echo")), &carry[..], 12),
            ("a", "/mcp", ("tools/list", None), &[][..], 3),
            ("b", "/mcp", ("tools/call", Some("caf\u{e9}")), &[][..], 40),
            ("b", "/other", ("x/unknown", Some("n")), &carry[..], 0),
            ("b", "/other", ("x/unknown", Some("n")), &[][..], 7),
        ];
        for (host, path, to, carry, len) in legs {
            let head = head(&client(host), path, to, carry, len).unwrap();
            assert_eq!(
                (head.method.as_str(), head.uri.to_string()),
                ("POST", path.into())
            );
            let mut want = vec![
                (
                    "accept".to_owned(),
                    "application/json, text/event-stream".to_owned(),
                ),
                ("content-length".into(), len.to_string()),
                ("content-type".into(), "application/json".into()),
                ("host".into(), host.into()),
                ("mcp-method".into(), to.0.into()),
                (
                    "mcp-protocol-version".into(),
                    crate::mcp::PROTOCOL_VERSION.into(),
                ),
            ];
            if let Some(n) = to.1 {
                want.push(("mcp-name".into(), header::encode_value(n).into_owned()));
            }
            want.extend(carry.iter().cloned());
            want.sort();
            assert_eq!(names(&head), want, "{host} {path} {to:?}");
        }
    }

    #[test]
    fn a_head_refuses_what_is_no_header() {
        let bad = head(
            &client("a"),
            "/mcp",
            ("tools/call", None),
            &[("x".into(), "\n".into())],
            0,
        );
        assert!(bad.is_err());
        assert!(head(&client("a"), "no path", ("tools/call", None), &[], 0).is_err());
    }
}
