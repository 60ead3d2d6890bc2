//! Reading server-sent events (the `text/event-stream` answer of Streamable HTTP), once for the
//! whole project: the gateway's response scanner ([`super::result_scan`]) and edge cache
//! (`notifications/*` in a stream), the federation's own requests, the load tester and the tests
//! all read a stream with [`Lines`], fed chunk by chunk as the bytes arrive, state kept across
//! chunk boundaries. It follows the WHATWG HTML "event stream interpretation" the MCP transport
//! points to:
//!
//! - a leading UTF-8 BOM is skipped;
//! - lines end with CRLF, LF or CR (a CR at the end of one chunk and a LF at the start of the
//!   next are one line end);
//! - a line starting with `:` is a comment;
//! - `field:value` (one space after the colon dropped) or `field` alone (an empty value); the
//!   fields are `data`, `event`, `id` and `retry`, any other is ignored;
//! - an empty line dispatches the event; `data` lines of one event are joined with `\n`; an event
//!   with no data is not dispatched.
//!
//! [`Lines`] hands back the pieces of each line without copying them (what a reader that must
//! not buffer needs); [`Parser`] assembles whole [`Event`]s on top of it; [`response_of`] is the
//! one reading of "the JSON-RPC response in an answer body". No I/O.
//!
//! The writing side (framing one message) is [`super::response::sse_event`].

use std::borrow::Cow;

/// The media type of an SSE answer.
pub(crate) const CONTENT_TYPE: &str = "text/event-stream";

/// Whether a `Content-Type` value names an event stream (parameters such as `charset` allowed).
pub(crate) fn is_event_stream(content_type: &[u8]) -> bool {
    super::media::matches(content_type, CONTENT_TYPE)
}

/// The fields of an event stream the spec gives a meaning to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Data,
    Event,
    Id,
    Retry,
}

impl Field {
    fn named(name: &[u8]) -> Option<Field> {
        Some(match name {
            b"data" => Field::Data,
            b"event" => Field::Event,
            b"id" => Field::Id,
            b"retry" => Field::Retry,
            _ => return None,
        })
    }
}

/// What [`Lines`] found, in stream order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Bytes of the value of a `field` line: a value split by a chunk boundary comes in several
    /// pieces, in order.
    Value(Field, &'a [u8]),
    /// The end of a `field` line (after its value's pieces; an empty value has none).
    End(Field),
    /// An empty line: the event is dispatched.
    Dispatch,
}

/// The UTF-8 byte order mark a stream may start with.
const BOM: &[u8] = b"\xEF\xBB\xBF";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    LineStart,
    /// Reading the field name (in `name`).
    Name,
    /// Just past the colon: one space here is syntax.
    Colon,
    /// In the value of a field line.
    Value,
    /// In a comment, or in the value of a field the spec ignores.
    Skip,
}

/// The line reader: [`Lines::feed`] chunks in arrival order; each [`Piece`] goes to a callback,
/// borrowed from the chunk. Fixed memory (a field name is compared in a 5-byte buffer).
#[derive(Debug, Default)]
pub(crate) struct Lines {
    state: State,
    /// The field of the current line, when the spec knows it.
    field: Option<Field>,
    name: [u8; 5],
    /// Bytes of the field name seen (more than `name` holds: no known field).
    name_len: usize,
    /// The previous byte was a CR: a LF now belongs to it.
    after_cr: bool,
    /// How many bytes of a leading BOM were matched; `None` once past the stream's start.
    bom: Option<usize>,
    started: bool,
}

impl Lines {
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Lines::default()
    }

    /// Read the next chunk, handing each piece it completes to `piece`.
    pub(crate) fn feed<'a>(&mut self, mut chunk: &'a [u8], mut piece: impl FnMut(Piece<'a>)) {
        if !self.started {
            let mut seen = self.bom.unwrap_or(0);
            while seen < BOM.len() {
                match chunk.first() {
                    None => {
                        self.bom = Some(seen);
                        return;
                    }
                    Some(b) if *b == BOM[seen] => {
                        seen += 1;
                        chunk = &chunk[1..];
                    }
                    // Not a BOM after all: its first bytes are the stream's.
                    Some(_) => {
                        self.started = true;
                        self.run(&BOM[..seen], &mut piece);
                        break;
                    }
                }
            }
            self.started = true;
            self.bom = None;
        }
        self.run(chunk, &mut piece);
    }

    /// The end of the stream: an unfinished last line is ended, then the event dispatched
    /// (lenient: a server that closes right after its last `data:` line still delivers it).
    pub(crate) fn finish<'a>(&mut self, mut piece: impl FnMut(Piece<'a>)) {
        if !self.started {
            let seen = self.bom.take().unwrap_or(0);
            self.started = true;
            self.run(&BOM[..seen], &mut piece);
        }
        if self.state != State::LineStart {
            self.line_end(&mut piece);
        }
        piece(Piece::Dispatch);
    }

    fn run<'a>(&mut self, chunk: &'a [u8], piece: &mut impl FnMut(Piece<'a>)) {
        let mut i = 0;
        while i < chunk.len() {
            if matches!(self.state, State::Value | State::Skip) {
                // The rest of a line up to its end, in one piece.
                let rest = &chunk[i..];
                let n = memchr::memchr2(b'\n', b'\r', rest).unwrap_or(rest.len());
                if n > 0 {
                    if let (State::Value, Some(f)) = (self.state, self.field) {
                        piece(Piece::Value(f, &rest[..n]));
                    }
                    i += n;
                    continue;
                }
            }
            let b = chunk[i];
            i += 1;
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                continue;
            }
            if b == b'\n' || b == b'\r' {
                self.after_cr = b == b'\r';
                self.line_end(piece);
                continue;
            }
            match self.state {
                State::LineStart if b == b':' => self.state = State::Skip,
                State::LineStart | State::Name if b != b':' => {
                    if let Some(slot) = self.name.get_mut(self.name_len) {
                        *slot = b;
                    }
                    self.name_len += 1;
                    self.state = State::Name;
                }
                State::LineStart | State::Name => {
                    self.field = self.field_named();
                    self.state = State::Colon;
                }
                State::Colon => {
                    self.state = if self.field.is_some() {
                        State::Value
                    } else {
                        State::Skip
                    };
                    if b != b' ' {
                        i -= 1;
                    }
                }
                State::Value | State::Skip => unreachable!("a value's bytes are taken above"),
            }
        }
    }

    fn field_named(&self) -> Option<Field> {
        self.name.get(..self.name_len).and_then(Field::named)
    }

    fn line_end<'a>(&mut self, piece: &mut impl FnMut(Piece<'a>)) {
        match self.state {
            State::LineStart => piece(Piece::Dispatch),
            State::Name => {
                if let Some(f) = self.field_named() {
                    piece(Piece::End(f));
                }
            }
            State::Colon | State::Value => {
                if let Some(f) = self.field {
                    piece(Piece::End(f));
                }
            }
            State::Skip => {}
        }
        self.state = State::LineStart;
        self.field = None;
        self.name_len = 0;
    }
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
pub(crate) struct Parser {
    lines: Lines,
    cur: Event,
    /// A `data` line was seen in this event (the next one is joined with `\n`).
    has_data: bool,
    /// The current line is a `data` line whose join was done.
    data_open: bool,
    /// The value of the current `event`, `id` or `retry` line.
    value: Vec<u8>,
    retry: Option<u64>,
}

impl Parser {
    pub(crate) fn new() -> Self {
        Parser::default()
    }

    /// Feed the next chunk; every event it completes is appended to `out`.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.feed(chunk, |p| self.piece(p, out));
        self.lines = lines;
    }

    /// The end of the stream: an unfinished last line is taken as a line and an event without
    /// its closing blank line is dispatched (lenient: servers that close right after the last
    /// `data:` line still deliver their answer).
    pub(crate) fn finish(mut self, out: &mut Vec<Event>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.finish(|p| self.piece(p, out));
    }

    #[cfg(test)]
    /// The last valid `retry:` (the reconnection time in milliseconds the server asks for).
    pub(crate) fn retry(&self) -> Option<u64> {
        self.retry
    }

    fn piece(&mut self, p: Piece<'_>, out: &mut Vec<Event>) {
        match p {
            Piece::Value(Field::Data, v) => {
                self.open_data();
                self.cur.data.extend_from_slice(v);
            }
            Piece::End(Field::Data) => {
                self.open_data();
                self.data_open = false;
            }
            Piece::Value(_, v) => self.value.extend_from_slice(v),
            Piece::End(f) => {
                let v = std::mem::take(&mut self.value);
                let text = || Some(String::from_utf8_lossy(&v).into_owned());
                match f {
                    Field::Event => self.cur.event = text(),
                    Field::Id => self.cur.id = text(),
                    // Only ASCII digits set it (the spec ignores any other value).
                    Field::Retry if !v.is_empty() && v.iter().all(u8::is_ascii_digit) => {
                        self.retry = std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok());
                    }
                    Field::Retry | Field::Data => {}
                }
                self.value = v;
                self.value.clear();
            }
            Piece::Dispatch => {
                let ev = std::mem::take(&mut self.cur);
                if std::mem::take(&mut self.has_data) {
                    out.push(ev);
                }
            }
        }
    }

    fn open_data(&mut self) {
        if !self.data_open {
            if self.has_data {
                self.cur.data.push(b'\n');
            }
            self.has_data = true;
            self.data_open = true;
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

/// Whether an event's data is a JSON-RPC response: a JSON object with a `result` or an `error`
/// member (not a notification or a request of the server's).
pub(crate) fn is_response(data: &[u8]) -> bool {
    use serde::de::{Deserializer, IgnoredAny};
    use serde::Deserialize;
    fn present<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        IgnoredAny::deserialize(d).map(|_| true)
    }
    #[derive(Deserialize)]
    struct Members {
        #[serde(default, deserialize_with = "present")]
        result: bool,
        #[serde(default, deserialize_with = "present")]
        error: bool,
    }
    // (serde also reads a struct from an array: only an object is a response.)
    data.trim_ascii_start().starts_with(b"{")
        && serde_json::from_slice::<Members>(data).is_ok_and(|m| m.result || m.error)
}

/// The JSON-RPC response in an answer body, the one reading of it: the body itself unless
/// `content_type` names an event stream; in a stream, the data of the last event that
/// [is a response](is_response) (`None` when none is). The gateway's response scanner applies
/// the same rule as the bytes stream past ([`super::result_scan`]: it cannot hold the body).
pub(crate) fn response_of<'a>(
    content_type: Option<&[u8]>,
    body: &'a [u8],
) -> Option<Cow<'a, [u8]>> {
    if !content_type.is_some_and(is_event_stream) {
        return Some(Cow::Borrowed(body));
    }
    let last = events(body).into_iter().rfind(|ev| is_response(&ev.data))?;
    Some(Cow::Owned(last.data))
}

#[cfg(test)]
mod tests;
