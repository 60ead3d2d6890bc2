//! Reading server-sent events (the `text/event-stream` answer of Streamable HTTP): an
//! incremental parser over bytes, fed chunk by chunk as they arrive, that hands back each
//! complete event. It follows the WHATWG event-stream rules the MCP transport points to: lines
//! end with CRLF, LF or CR; `:` starts a comment; `data` lines of one event are joined with
//! `\n`; one space after the colon is dropped; a blank line dispatches the event; an event with
//! no data is not dispatched. No I/O: the gateway, the load tester and the tests share it.
//!
//! The writing side (framing one message) is [`super::response::sse_event`].

/// The media type of an SSE answer.
pub const CONTENT_TYPE: &str = "text/event-stream";

/// Whether a `Content-Type` value names an event stream (parameters such as `charset` allowed).
pub fn is_event_stream(content_type: &[u8]) -> bool {
    super::media::matches(content_type, CONTENT_TYPE)
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event:` field, when given (MCP servers send `message`).
    pub event: Option<String>,
    /// The `id:` field, when given.
    pub id: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: Vec<u8>,
}

/// The incremental parser: [`Parser::feed`] chunks in arrival order, then [`Parser::finish`].
#[derive(Debug, Default)]
pub struct Parser {
    /// The bytes of an unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended with CR: a LF at the start of the next one belongs to it.
    after_cr: bool,
    /// The event being assembled.
    cur: Event,
    has_data: bool,
}

impl Parser {
    pub fn new() -> Self {
        Parser::default()
    }

    /// Feed the next chunk; every event it completes is appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(i) = chunk.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let (head, rest) = chunk.split_at(i);
            let is_cr = rest[0] == b'\r';
            chunk = &rest[1..];
            if is_cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            if self.line.is_empty() {
                self.line_done(head, out);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                self.line_done(&line, out);
                line.clear();
                self.line = line;
            }
        }
        self.line.extend_from_slice(chunk);
    }

    /// The end of the stream: an unfinished last line is taken as a line and an event without
    /// its closing blank line is dispatched (lenient: servers that close right after the last
    /// `data:` line still deliver their answer).
    pub fn finish(mut self, out: &mut Vec<Event>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, out);
        }
        self.dispatch(out);
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let ev = std::mem::take(&mut self.cur);
        if std::mem::take(&mut self.has_data) {
            out.push(ev);
        }
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<Event>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.cur.data.push(b'\n');
                }
                self.cur.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.cur.event = Some(String::from_utf8_lossy(value).into_owned()),
            b"id" => self.cur.id = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }
}

/// Every event of a complete stream body.
pub fn events(body: &[u8]) -> Vec<Event> {
    let mut p = Parser::new();
    let mut out = Vec::new();
    p.feed(body, &mut out);
    p.finish(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &[u8] = b": keepalive\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":5,\"result\":{}}\r\n\r\n";

    #[test]
    fn whole_body_gives_each_event_with_joined_data() {
        let ev = events(STREAM);
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].event.as_deref(), Some("message"));
        assert_eq!(
            ev[0].data,
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}"
        );
        assert_eq!(ev[1].event, None);
        assert_eq!(
            ev[1].data,
            b"{\"jsonrpc\":\"2.0\",\n\"id\":5,\"result\":{}}"
        );
    }

    #[test]
    fn any_chunking_gives_the_same_events() {
        let whole = events(STREAM);
        for split in 1..STREAM.len() {
            let mut p = Parser::new();
            let mut out = Vec::new();
            p.feed(&STREAM[..split], &mut out);
            p.feed(&STREAM[split..], &mut out);
            p.finish(&mut out);
            assert_eq!(out, whole, "split at {split}");
        }
        // One byte at a time.
        let mut p = Parser::new();
        let mut out = Vec::new();
        for b in STREAM {
            p.feed(std::slice::from_ref(b), &mut out);
        }
        p.finish(&mut out);
        assert_eq!(out, whole);
    }

    #[test]
    fn cr_only_lines_fields_without_colon_and_unterminated_events() {
        let ev = events(b"id: 7\rdata\rdata:x\r\r: c\ndata:last");
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].id.as_deref(), Some("7"));
        assert_eq!(ev[0].data, b"\nx");
        assert_eq!(ev[1].data, b"last");
        // Events without data are not dispatched.
        assert!(events(b"event: ping\n\n: only a comment\n\n").is_empty());
    }

    #[test]
    fn content_type_recognition() {
        assert!(is_event_stream(b"text/event-stream"));
        assert!(is_event_stream(b" Text/Event-Stream; charset=utf-8"));
        assert!(!is_event_stream(b"application/json"));
        assert!(!is_event_stream(b"text/event-streamy"));
    }
}
