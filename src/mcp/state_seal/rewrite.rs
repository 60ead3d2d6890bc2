//! Where a `requestState` sits in the bytes of a response or a request, and the same bytes with
//! it replaced: a JSON-RPC response body, an SSE stream (event by event, as it streams past),
//! and a retry's request body. Only the state's string changes; every other byte stays.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

use crate::mcp::mrtr::REQUEST_STATE;
use crate::mcp::result_type::INPUT_REQUIRED;

/// The state of an `input_required` result in a JSON-RPC response body, and its span (quotes
/// included); `None` for any other body.
pub fn input_required_state(body: &[u8]) -> Option<(String, usize, usize)> {
    #[derive(Deserialize)]
    struct Response<'a> {
        #[serde(borrow)]
        result: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Result<'a> {
        #[serde(rename = "resultType", borrow)]
        result_type: Option<Cow<'a, str>>,
        #[serde(rename = "requestState", borrow)]
        request_state: Option<&'a RawValue>,
    }
    let text = std::str::from_utf8(body).ok()?;
    let resp: Response = serde_json::from_str(text).ok()?;
    let result: Result = serde_json::from_str(resp.result?.get()).ok()?;
    if result.result_type.as_deref() != Some(INPUT_REQUIRED) {
        return None;
    }
    let raw = result.request_state?;
    let state: String = serde_json::from_str(raw.get()).ok()?;
    let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
    Some((state, start, start + raw.get().len()))
}

/// `body` with the bytes `start..end` replaced by `value` as a JSON string.
pub fn splice(body: &[u8], (start, end): (usize, usize), value: &str) -> Vec<u8> {
    let quoted = serde_json::to_string(value).expect("a string serializes");
    let mut out = Vec::with_capacity(body.len() - (end - start) + quoted.len());
    out.extend_from_slice(&body[..start]);
    out.extend_from_slice(quoted.as_bytes());
    out.extend_from_slice(&body[end..]);
    out
}

/// A JSON response body with its `input_required` state passed through `seal`; `None` when
/// the body is not such a result (it goes on unchanged).
pub fn seal_json(body: &[u8], seal: &mut dyn FnMut(&str) -> String) -> Option<Vec<u8>> {
    let (state, start, end) = input_required_state(body)?;
    Some(splice(body, (start, end), &seal(&state)))
}

/// A retry's request body: `params.requestState` when it is a string, and its span.
pub fn request_state(body: &[u8]) -> Option<(String, usize, usize)> {
    #[derive(Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        params: Option<&'a RawValue>,
    }
    let text = std::str::from_utf8(body).ok()?;
    let req: Request = serde_json::from_str(text).ok()?;
    let params: std::collections::HashMap<Cow<str>, &RawValue> =
        serde_json::from_str(req.params?.get()).ok()?;
    let raw = *params.get(REQUEST_STATE)?;
    let state: String = serde_json::from_str(raw.get()).ok()?;
    let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
    Some((state, start, start + raw.get().len()))
}

/// An SSE response rewritten event by event: whole events pass on as they complete (bytes
/// unchanged), an event whose data is an `input_required` result is written again with its
/// state sealed. Only an unfinished event is held, up to `max` bytes; past that the stream is
/// passed on unchanged from there ([`SseSealer::gave_up`]).
#[derive(Debug)]
pub struct SseSealer {
    held: Vec<u8>,
    max: usize,
    gave_up: bool,
}

impl SseSealer {
    pub(crate) fn new(max: usize) -> Self {
        SseSealer {
            held: Vec::new(),
            max,
            gave_up: false,
        }
    }

    /// An event was longer than `max`: the rest of the stream is not sealed.
    pub(crate) fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// The next chunk; what may be sent on now (whole events), `seal` applied.
    pub(crate) fn feed(&mut self, chunk: &[u8], seal: &mut dyn FnMut(&str) -> String) -> Vec<u8> {
        if self.gave_up {
            return chunk.to_vec();
        }
        self.held.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(self.held.len());
        let mut from = 0;
        while let Some(end) = event_end(&self.held[from..]) {
            write_event(&self.held[from..from + end], seal, &mut out);
            from += end;
        }
        self.held.drain(..from);
        if self.held.len() > self.max {
            self.gave_up = true;
            out.append(&mut self.held);
        }
        out
    }

    /// The end of the stream: an unfinished event goes on as it is (a server that closes right
    /// after its last `data:` line: sealed too).
    pub(crate) fn finish(&mut self, seal: &mut dyn FnMut(&str) -> String) -> Vec<u8> {
        let held = std::mem::take(&mut self.held);
        let mut out = Vec::with_capacity(held.len());
        if !held.is_empty() {
            write_event(&held, seal, &mut out);
        }
        out
    }
}

/// The length of the first whole event in `b` (through the empty line that ends it), if any.
/// A CR as the last byte may be half of a CRLF: the event is not taken as ended yet.
fn event_end(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    let mut line_start = 0;
    while i < b.len() {
        let end = match b[i] {
            b'\n' => i + 1,
            b'\r' if i + 1 == b.len() => return None,
            b'\r' if b[i + 1] == b'\n' => i + 2,
            b'\r' => i + 1,
            _ => {
                i += 1;
                continue;
            }
        };
        if i == line_start {
            return Some(end);
        }
        line_start = end;
        i = end;
    }
    None
}

/// One event as it goes on: unchanged, or with its data's state sealed (its other lines kept,
/// the data written as one `data:` line).
fn write_event(event: &[u8], seal: &mut dyn FnMut(&str) -> String, out: &mut Vec<u8>) {
    let mut parsed = Vec::new();
    let mut parser = crate::mcp::sse::Parser::new();
    parser.feed(event, &mut parsed);
    parser.finish(&mut parsed);
    let sealed = match parsed.first() {
        Some(e) => seal_json(&e.data, seal),
        None => None,
    };
    let Some(data) = sealed else {
        out.extend_from_slice(event);
        return;
    };
    for line in event.split_inclusive(|b| *b == b'\n') {
        let bare = line.trim_ascii_end();
        let is_data = bare == b"data" || bare.starts_with(b"data:");
        if !is_data && !bare.is_empty() {
            out.extend_from_slice(bare);
            out.push(b'\n');
        }
    }
    // Data lines were joined with LF: each line of the new data is a `data:` line again.
    for line in data.split(|b| *b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upper(s: &str) -> String {
        s.to_uppercase()
    }

    #[test]
    fn only_an_input_required_state_changes() {
        let body = br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{},"requestState":"abc"}}"#;
        let out = seal_json(body, &mut upper).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{},"requestState":"ABC"}}"#
        );
        let complete =
            br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","requestState":"abc"}}"#;
        assert!(seal_json(complete, &mut upper).is_none());
        let text = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"text":"\"resultType\":\"input_required\",\"requestState\":\"x\""}]}}"#;
        assert!(
            seal_json(text, &mut upper).is_none(),
            "a look-alike in content"
        );
        assert!(seal_json(b"not json", &mut upper).is_none());
        let escaped = br#"{"result":{"resultType":"input_required","requestState":"a\"b"}}"#;
        let out = seal_json(escaped, &mut upper).unwrap();
        assert_eq!(
            out,
            br#"{"result":{"resultType":"input_required","requestState":"A\"B"}}"#
        );
    }

    #[test]
    fn a_retry_state_is_found_with_its_span() {
        let body = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{"requestState":"no"},"requestState":"s1","inputResponses":{}}}"#;
        let (state, start, end) = request_state(body).unwrap();
        assert_eq!(state, "s1");
        let out = splice(body, (start, end), "orig");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{"requestState":"no"},"requestState":"orig","inputResponses":{}}}"#
        );
        assert!(request_state(br#"{"params":{"name":"t"}}"#).is_none());
    }

    #[test]
    fn sse_events_pass_whole_and_the_answer_is_sealed_across_chunks() {
        let stream = concat!(
            ": hello\n\n",
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n",
            "event: message\r\nid: 7\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\r\n",
            "data: {\"resultType\":\"input_required\",\"requestState\":\"abc\"}}\r\n\r\n",
        )
        .as_bytes();
        for cut in 1..stream.len() {
            let mut s = SseSealer::new(1 << 20);
            let mut out = s.feed(&stream[..cut], &mut upper);
            out.extend(s.feed(&stream[cut..], &mut upper));
            out.extend(s.finish(&mut upper));
            let text = String::from_utf8(out).unwrap();
            assert!(
                text.starts_with(": hello\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"),
                "cut {cut}: {text}"
            );
            assert!(
                text.ends_with("event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\ndata: {\"resultType\":\"input_required\",\"requestState\":\"ABC\"}}\n\n"),
                "cut {cut}: {text}"
            );
        }
    }

    #[test]
    fn an_event_past_the_bound_gives_up_and_passes_unchanged() {
        let mut s = SseSealer::new(16);
        let first = s.feed(b"data: {\"result\":{\"resultType\"", &mut upper);
        assert!(s.gave_up());
        assert_eq!(first, b"data: {\"result\":{\"resultType\"");
        let rest = s.feed(
            b":\"input_required\",\"requestState\":\"x\"}}\n\n",
            &mut upper,
        );
        assert_eq!(rest, b":\"input_required\",\"requestState\":\"x\"}}\n\n");
    }
}
