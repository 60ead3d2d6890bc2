//! The upstream's response head: parsed with httparse, its framing headers read as RFC 9112
//! says (one `Content-Length`, chunked last or read until close, `Connection`), and the body's
//! framing decided from them.

use bytes::{Buf, BytesMut};
use pingora::http::ResponseHeader;
use pingora::{Error, ErrorType, Result};

use super::{ends_with_chunked, Chunk, Framing, OrInvalid, MAX_HEAD, MAX_HEADERS};

/// A parsed response head.
pub struct Head {
    pub header: ResponseHeader,
    pub framing: Framing,
    /// Whether the connection may carry another request after this response.
    pub keep_alive: bool,
}

/// Parse a response head from the front of `buf`; `Ok(None)` until it is complete. The head's
/// bytes are consumed from `buf`.
pub fn parse_head(buf: &mut BytesMut, head_request: bool) -> Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return Error::e_explain(
                ErrorType::InvalidHTTPHeader,
                "upstream response head larger than 64 KiB",
            )
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => {
            return Error::e_explain(
                ErrorType::InvalidHTTPHeader,
                format!("upstream response head: {e}"),
            )
        }
    };
    let code = resp.code.unwrap_or(0);
    let http11 = resp.version == Some(1);
    let mut header = status_line(code, http11, resp.reason, resp.headers.len())?;
    let mut seen = Seen {
        length: None,
        chunked: false,
        close: !http11,
    };
    for h in resp.headers.iter() {
        seen.header(h, http11)?;
        let value = http::HeaderValue::from_bytes(h.value).or_err_invalid()?;
        header.append_header(h.name.to_string(), value)?;
    }
    buf.advance(len);
    if seen.chunked && seen.length.is_some() {
        // Both framings (RFC 9112 §6.3: chunked wins): read it, but never reuse the connection.
        seen.close = true;
    }
    let no_body = head_request || (100..200).contains(&code) || code == 204 || code == 304;
    let framing = framing_of(&header, &seen, no_body);
    if framing == Framing::UntilClose
        && !header.headers.contains_key(http::header::TRANSFER_ENCODING)
    {
        // As pingora's HTTP/1.1 proxy does: the client gets it chunked, so that its connection
        // outlives this response (only the upstream's ends with it).
        header.set_version(http::Version::HTTP_11);
        header.insert_header(http::header::TRANSFER_ENCODING, "chunked")?;
    }
    let keep_alive = !seen.close && framing != Framing::UntilClose;
    Ok(Some(Head {
        header,
        framing,
        keep_alive,
    }))
}

/// The response head's status line: its code, HTTP/1.0 when it said so, and its reason phrase
/// when it is not the canonical one.
fn status_line(
    code: u16,
    http11: bool,
    reason: Option<&str>,
    headers: usize,
) -> Result<ResponseHeader> {
    let mut header = ResponseHeader::build(code, Some(headers))?;
    if !http11 {
        header.set_version(http::Version::HTTP_10);
    }
    if let Some(reason) = reason {
        let canonical = http::StatusCode::from_u16(code)
            .ok()
            .and_then(|s| s.canonical_reason());
        if canonical != Some(reason) {
            header.set_reason_phrase(Some(reason))?;
        }
    }
    Ok(header)
}

/// What the framing headers of a response head said.
struct Seen {
    length: Option<u64>,
    chunked: bool,
    close: bool,
}

impl Seen {
    /// Note one header line: `Content-Length` (one value, or the same one repeated),
    /// `Transfer-Encoding` (chunked last, or read until close) and `Connection`.
    fn header(&mut self, h: &httparse::Header, http11: bool) -> Result<()> {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            match (content_length(h.value), self.length) {
                (Some(v), None) => self.length = Some(v),
                (Some(v), Some(old)) if v == old => {}
                _ => {
                    return Error::e_explain(
                        ErrorType::InvalidHTTPHeader,
                        "upstream response with an invalid or conflicting Content-Length",
                    )
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            self.chunked = ends_with_chunked(h.value);
            if !self.chunked {
                // Only chunked is understood: read until close, as RFC 9112 §6.3 says.
                self.close = true;
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|b| *b == b',') {
                let t = token.trim_ascii();
                if t.eq_ignore_ascii_case(b"close") {
                    self.close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") && !http11 {
                    self.close = false;
                }
            }
        }
        Ok(())
    }
}

/// How the body after this head is framed.
fn framing_of(header: &ResponseHeader, seen: &Seen, no_body: bool) -> Framing {
    if no_body {
        Framing::Empty
    } else if seen.chunked {
        Framing::Chunked(Chunk::Size)
    } else if header.headers.contains_key(http::header::TRANSFER_ENCODING) {
        // A coding without chunked last: the length means nothing, the body ends at the close.
        Framing::UntilClose
    } else {
        match seen.length {
            Some(0) => Framing::Empty,
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        }
    }
}

/// A `Content-Length` value: `1*DIGIT` (RFC 9110 §8.6) and nothing else. Rust's own integer
/// parser also takes a leading `+`, which other readers refuse: a length only this reader
/// accepts would frame the body differently from the next one.
fn content_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}
