//! HTTP/1.1 on the upstream wire, as plain functions over bytes: the request head the gateway
//! writes, the response head it parses (`httparse`, the parser pingora itself uses), and how the
//! response body is framed and decoded (RFC 9112 §6: no body, `Content-Length`, chunked, or
//! until the connection closes).

use bytes::{Buf, Bytes, BytesMut};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::{Error, ErrorType, Result};

/// Most header lines a response head may carry.
pub const MAX_HEADERS: usize = 128;
/// Largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;

/// How a request body is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestFraming {
    /// `Content-Length` (or no body): bytes as they are.
    Raw,
    /// `Transfer-Encoding: chunked`: each write becomes one chunk.
    Chunked,
}

/// Make a request (possibly from an HTTP/2 client) an HTTP/1.1 one, as pingora's own HTTP/1.1
/// client does before it writes: a `Host` (from the HTTP/2 `:authority`, which wins over a
/// `Host` field, RFC 9113 §8.3.1), a framing for a body that has none (chunked), and the
/// authority checks pingora makes.
pub fn to_http11(req: &mut RequestHeader, has_body: bool) -> Result<()> {
    let authority = req.uri.authority().map(|a| a.as_str().to_owned());
    let host_missing = !req.headers.contains_key(http::header::HOST);
    if let Some(a) = authority.filter(|_| host_missing || req.version == http::Version::HTTP_2) {
        if a.contains('@') {
            return Error::e_explain(ErrorType::InvalidHTTPHeader, "userinfo in the authority");
        }
        req.insert_header(http::header::HOST, a)?;
    } else if host_missing {
        // HTTP/1.1 requires the field, empty when there is no authority (RFC 9112 §3.2).
        req.insert_header(http::header::HOST, "")?;
    }
    if has_body
        && !req.headers.contains_key(http::header::CONTENT_LENGTH)
        && !req.headers.contains_key(http::header::TRANSFER_ENCODING)
    {
        req.insert_header(http::header::TRANSFER_ENCODING, "chunked")?;
    }
    // The checks pingora's HTTP/1.1 client makes of the final request (one Host, no userinfo,
    // a target that agrees with it).
    pingora::protocols::http::authority::validate_request_authority(req)
}

/// Frame a request whose whole body (`len` bytes) is in hand by its length: `Content-Length`,
/// never chunked, whatever framing the client used (HTTP/2 DATA frames, chunked): the body's
/// bytes are the client's, their framing is the connection's (RFC 9112 §6).
pub fn frame_whole(req: &mut RequestHeader, len: usize) -> Result<()> {
    let framed = req.headers.contains_key(http::header::TRANSFER_ENCODING)
        || req.headers.contains_key(http::header::CONTENT_LENGTH);
    req.remove_header(&http::header::TRANSFER_ENCODING);
    if len > 0 || framed {
        req.insert_header(http::header::CONTENT_LENGTH, len)?;
    }
    Ok(())
}

/// The request head as it goes on the wire (always HTTP/1.1), and how its body is framed.
pub fn request_head(req: &RequestHeader) -> Result<(Vec<u8>, RequestFraming)> {
    let path = req.raw_path();
    if path.iter().any(|b| matches!(b, b' ' | b'\r' | b'\n')) {
        return Error::e_explain(
            ErrorType::InvalidHTTPHeader,
            "request target with a space or line break",
        );
    }
    let mut buf = Vec::with_capacity(256 + path.len());
    buf.extend_from_slice(req.method.as_str().as_bytes());
    buf.push(b' ');
    buf.extend_from_slice(path);
    buf.extend_from_slice(b" HTTP/1.1\r\n");
    req.header_to_h1_wire(&mut buf);
    buf.extend_from_slice(b"\r\n");
    let chunked = req
        .headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .any(|v| ends_with_chunked(v.as_bytes()));
    let framing = if chunked {
        RequestFraming::Chunked
    } else {
        RequestFraming::Raw
    };
    Ok((buf, framing))
}

fn ends_with_chunked(v: &[u8]) -> bool {
    v.rsplit(|b| *b == b',')
        .next()
        .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// The line that opens a chunk of `len` bytes in a chunked body (RFC 9112 §7.1); the chunk's
/// data and a CRLF follow it.
pub fn chunk_size_line(len: usize) -> String {
    format!("{len:x}\r\n")
}

/// The last chunk of a chunked body, with an empty trailer section.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// How a response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (1xx, 204, 304, a response to HEAD, `Content-Length: 0`).
    Empty,
    /// This many bytes are left.
    Length(u64),
    /// Chunked; where the decoder is.
    Chunked(Chunk),
    /// Until the upstream closes the connection (cannot be reused).
    UntilClose,
}

/// The chunked decoder's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data: bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
}

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

trait OrInvalid<T> {
    fn or_err_invalid(self) -> Result<T>;
}

impl<T, E: std::fmt::Display> OrInvalid<T> for std::result::Result<T, E> {
    fn or_err_invalid(self) -> Result<T> {
        self.map_err(|e| {
            Error::explain(
                ErrorType::InvalidHTTPHeader,
                format!("upstream response header: {e}"),
            )
        })
    }
}

/// What the decoder made of the buffered bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Body bytes (never empty).
    Data(Bytes),
    /// More bytes are needed to go on.
    NeedMore,
    /// The body is complete.
    Done,
}

/// Take the next piece of body from `buf` under `framing` (advanced in place). `Length` and
/// `Chunked` never take bytes past the body's end.
pub fn decode(buf: &mut BytesMut, framing: &mut Framing) -> Result<Decoded> {
    loop {
        match framing {
            Framing::Empty => return Ok(Decoded::Done),
            Framing::Length(0) => {
                *framing = Framing::Empty;
                return Ok(Decoded::Done);
            }
            Framing::Length(left) => {
                if buf.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                let n = (*left).min(buf.len() as u64) as usize;
                *left -= n as u64;
                return Ok(Decoded::Data(buf.split_to(n).freeze()));
            }
            Framing::UntilClose => {
                if buf.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                return Ok(Decoded::Data(buf.split().freeze()));
            }
            Framing::Chunked(state) => match *state {
                Chunk::Size => match size_line(buf)? {
                    Some(0) => *state = Chunk::Trailers,
                    Some(size) => *state = Chunk::Data(size),
                    None => return Ok(Decoded::NeedMore),
                },
                Chunk::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Decoded::NeedMore);
                    }
                    let n = left.min(buf.len() as u64) as usize;
                    *state = if left == n as u64 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left - n as u64)
                    };
                    return Ok(Decoded::Data(buf.split_to(n).freeze()));
                }
                Chunk::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(Decoded::NeedMore);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Error::e_explain(
                            ErrorType::InvalidHTTPHeader,
                            "upstream chunk data not followed by CRLF",
                        );
                    }
                    buf.advance(2);
                    *state = Chunk::Size;
                }
                Chunk::Trailers => {
                    // Trailer lines are dropped; the empty line ends the body.
                    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
                        if buf.len() > MAX_HEAD {
                            return Error::e_explain(
                                ErrorType::InvalidHTTPHeader,
                                "upstream trailers larger than 64 KiB",
                            );
                        }
                        return Ok(Decoded::NeedMore);
                    };
                    buf.advance(end + 2);
                    if end == 0 {
                        *framing = Framing::Empty;
                        return Ok(Decoded::Done);
                    }
                }
            },
        }
    }
}

/// Read a chunk-size line (RFC 9112 §7.1: `chunk-size = 1*HEXDIG`, extensions ignored) from
/// the front of `buf`; `None` until the line is complete.
fn size_line(buf: &mut BytesMut) -> Result<Option<u64>> {
    let invalid = |why: &'static str| Error::e_explain(ErrorType::InvalidHTTPHeader, why);
    // httparse reads a line without digits ("\r\n", ";ext\r\n") as size 0, the last chunk.
    if buf.first().is_some_and(|b| !b.is_ascii_hexdigit()) {
        return invalid("upstream chunk-size line without a size");
    }
    match httparse::parse_chunk_size(buf) {
        Ok(httparse::Status::Complete((used, size))) => {
            buf.advance(used);
            Ok(Some(size))
        }
        Ok(httparse::Status::Partial) if buf.len() > 4096 => {
            invalid("upstream chunk-size line longer than 4 KiB")
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => invalid("upstream sent an invalid chunk size"),
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
