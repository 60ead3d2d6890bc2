//! What a response says about its MRTR flow, read as its chunks stream past (never copied nor
//! buffered): whether the JSON-RPC response is an error, a `complete` result or an
//! `input_required` one (or a task, and its id's digest and status: Tasks extension), and the
//! [digest](super::digest) of the result's `requestState`.
//!
//! Only the members of the response object (`result`, `error`) and of `result` (`resultType`,
//! `requestState`) are read, by a byte-level tokenizer that tracks strings, escapes and nesting,
//! so look-alikes inside content (`"text":"\"resultType\":\"input_required\""`) or deeper
//! objects are not taken for them. Memory is fixed: a key is compared in a 16-byte buffer and the
//! state is hashed as it passes. `text/event-stream` bodies are read event by event (the `data:`
//! lines of each, with the one line reader, [`super::sse::Lines`]); the last event that is a
//! response (`result` or `error`) decides, the rule of [`super::sse::response_of`], which reads
//! a body in hand; this one cannot hold the body, so it applies the rule with its own JSON
//! tokenizer as the bytes pass.

use super::json_scan::JsonScan;
use super::sse::{Field, Lines, Piece};

pub use super::verdict::{ResultKind, TaskStatus, Verdict};

/// How much of a body is read at most (the verdict is what was seen by then).
pub(crate) const SCAN_LIMIT: usize = 4 << 20;

/// Reads a JSON or SSE response body chunk by chunk.
#[derive(Debug, Default)]
pub struct ResultScanner {
    json: JsonScan,
    /// The event-stream line reader (the one of [`super::sse`]), for an SSE body.
    sse: Option<Lines>,
    verdict: Verdict,
    scanned: usize,
    /// Only `input_required` is looked for, the old way (flows and tracing off).
    light: Option<super::scan::InputRequiredScanner>,
}

impl ResultScanner {
    /// A scanner for a `application/json` body.
    pub fn json() -> Self {
        Self::default()
    }

    /// A JSON scanner that only spots `input_required` (for its metric), at the cost of the
    /// scanner that came before this one; the verdict has no state digest and never says
    /// complete or error.
    pub(crate) fn input_required_only() -> Self {
        ResultScanner {
            light: Some(Default::default()),
            ..Self::default()
        }
    }

    /// A scanner for a `text/event-stream` body.
    pub fn sse() -> Self {
        ResultScanner {
            sse: Some(Lines::default()),
            ..Self::default()
        }
    }

    /// The scanner for a response whose `Content-Type` is `content_type` (read with
    /// [`super::media`]): JSON or an event stream; `follow`: flows or tracing want the whole
    /// verdict (otherwise only `input_required` is looked for, and an event stream not at all).
    pub(crate) fn for_response(content_type: &[u8], follow: bool) -> Option<Self> {
        match (super::media::is_json(content_type), follow) {
            (true, true) => Some(Self::json()),
            (true, false) => Some(Self::input_required_only()),
            (false, true) if super::sse::is_event_stream(content_type) => Some(Self::sse()),
            _ => None,
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        if let Some(light) = self.light.as_mut() {
            if !light.found() {
                light.feed(chunk);
            }
            return;
        }
        if self.scanned >= SCAN_LIMIT || self.done() {
            return;
        }
        let chunk = &chunk[..chunk.len().min(SCAN_LIMIT - self.scanned)];
        self.scanned += chunk.len();
        let Some(sse) = self.sse.as_mut() else {
            self.json.feed(chunk);
            return;
        };
        let (json, verdict) = (&mut self.json, &mut self.verdict);
        sse.feed(chunk, |p| match p {
            Piece::Value(Field::Data, d) => json.feed(d),
            // Data lines are joined with `\n` (JSON whitespace between them).
            Piece::End(Field::Data) => json.step(b'\n'),
            Piece::Dispatch => {
                let v = std::mem::take(json).verdict();
                if v.kind != ResultKind::Unknown {
                    *verdict = v;
                }
            }
            Piece::Value(..) | Piece::End(_) => {}
        });
    }

    /// The verdict so far (for SSE, the last complete event that was a response; for JSON, the
    /// body read so far).
    pub fn verdict(&self) -> Verdict {
        if let Some(light) = &self.light {
            return Verdict {
                kind: if light.found() {
                    ResultKind::InputRequired
                } else {
                    ResultKind::Unknown
                },
                ..Verdict::default()
            };
        }
        match self.sse {
            Some(_) => {
                let pending = self.json.verdict();
                if pending.kind != ResultKind::Unknown {
                    pending
                } else {
                    self.verdict
                }
            }
            None => self.json.verdict(),
        }
    }

    /// Nothing later in the body can change the verdict (a JSON body whose `error` or whole
    /// `result` was read).
    pub(crate) fn done(&self) -> bool {
        self.sse.is_none()
            && ((self.json.saw_error && !self.json.in_error)
                || (self.json.saw_result && !self.json.in_result))
    }

    /// `resultType` is `input_required` (the old scanner's question).
    pub(crate) fn found(&self) -> bool {
        self.verdict().kind == ResultKind::InputRequired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::digest::state_digest;

    fn scan(body: &str, piece: usize, sse: bool) -> Verdict {
        let mut s = if sse {
            ResultScanner::sse()
        } else {
            ResultScanner::json()
        };
        body.as_bytes().chunks(piece).for_each(|c| s.feed(c));
        s.verdict()
    }

    fn all_chunkings(body: &str, sse: bool) -> Verdict {
        let v = scan(body, body.len(), sse);
        for piece in 1..body.len() {
            assert_eq!(scan(body, piece, sse), v, "piece {piece} of {body}");
        }
        v
    }

    #[test]
    fn reads_the_result_type_and_the_state_digest() {
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType" : "input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"requestState":"no"}}},"requestState":"v1.abc\/d\u00e9"}}"#;
        let v = all_chunkings(body, false);
        assert_eq!(v.kind, ResultKind::InputRequired);
        assert_eq!(v.state_digest, Some(state_digest("v1.abc/dé")));
        let done = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"{\"resultType\":\"input_required\",\"requestState\":\"x\"}"}],"resultType":"complete"}}"#;
        assert_eq!(
            all_chunkings(done, false),
            Verdict {
                kind: ResultKind::Complete,
                ..Verdict::default()
            }
        );
        let no_type = r#"{"id":3,"jsonrpc":"2.0","result":{"content":[]}}"#;
        assert_eq!(all_chunkings(no_type, false).kind, ResultKind::Complete);
        let err = r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"bad","data":{"result":{"resultType":"input_required"}}}}"#;
        assert_eq!(all_chunkings(err, false).kind, ResultKind::Error);
        assert_eq!(all_chunkings("not json", false).kind, ResultKind::Unknown);
        let surrogate =
            r#"{"result":{"resultType":"input_required","requestState":"\ud83d\ude00!"}}"#;
        assert_eq!(
            all_chunkings(surrogate, false).state_digest,
            Some(state_digest("😀!"))
        );
        let lone = r#"{"result":{"resultType":"input_required","requestState":"\ud83d!"}}"#;
        assert_eq!(all_chunkings(lone, false).state_digest, None);
    }

    #[test]
    fn reads_tool_errors_and_error_codes() {
        let tool = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"no","isError":true}],"isError" : true}}"#;
        let v = all_chunkings(tool, false);
        assert!(v.tool_error && v.kind == ResultKind::Complete, "{v:?}");
        let fine = r#"{"result":{"content":[{"isError":true}],"isError":false}}"#;
        assert!(!all_chunkings(fine, false).tool_error);
        let err = r#"{"jsonrpc":"2.0","id":4,"error":{"message":"bad","data":{"code":7},"code": -32602}}"#;
        let v = all_chunkings(err, false);
        assert_eq!((v.kind, v.error_code), (ResultKind::Error, Some(-32602)));
        let odd = r#"{"error":{"code":"x"}}"#;
        assert_eq!(all_chunkings(odd, false).error_code, None);
        let sse = "data: {\"id\":1,\"error\":{\"code\":-32001,\"message\":\"m\"}}\n\n";
        assert_eq!(all_chunkings(sse, true).error_code, Some(-32001));
    }

    #[test]
    fn deeper_look_alikes_are_not_read() {
        let body = r#"{"result":{"x":{"resultType":"input_required","requestState":"s"},"resultType":"complete"}}"#;
        assert_eq!(
            all_chunkings(body, false),
            Verdict {
                kind: ResultKind::Complete,
                ..Verdict::default()
            }
        );
        assert!(!ResultScanner::json().found());
        let mut light = ResultScanner::input_required_only();
        light.feed(br#"{"result":{"resultType":"input_required","requestState":"s"}}"#);
        assert!(light.found());
        assert_eq!(light.verdict().state_digest, None);
    }

    #[test]
    fn reads_task_ids_and_statuses() {
        let created = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"0123456789abcdef.x\/y","status":"working","_meta":{"taskId":"no","status":"failed"}}}"#;
        let v = all_chunkings(created, false);
        assert_eq!(v.kind, ResultKind::Task);
        assert_eq!(v.task_digest, Some(state_digest("0123456789abcdef.x/y")));
        assert_eq!(v.task_status, Some(TaskStatus::Working));
        let got = r#"{"jsonrpc":"2.0","id":2,"result":{"taskId":"t1","status":"completed","result":{"status":"failed","content":[]}}}"#;
        let v = all_chunkings(got, false);
        assert_eq!(v.kind, ResultKind::Complete);
        assert_eq!(v.task_digest, Some(state_digest("t1")));
        assert_eq!(v.task_status, Some(TaskStatus::Completed));
        assert!(v.task_status.unwrap().is_terminal());
        let odd = r#"{"result":{"taskId":7,"status":"sleeping_forever_and_ever"}}"#;
        let v = all_chunkings(odd, false);
        assert_eq!((v.task_digest, v.task_status), (None, None));
        for st in [
            "working",
            "input_required",
            "completed",
            "failed",
            "cancelled",
        ] {
            assert_eq!(TaskStatus::from_wire(st.as_bytes()).unwrap().as_str(), st);
        }
    }

    #[test]
    fn sse_takes_the_last_response_event() {
        let body = concat!(
            ": keep-alive\n\n",
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"result\":{}}}\n\n",
            "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":{\"resultType\":\"input_required\",\"requestState\":\"abc\"}}\r\n\r\n",
        );
        let v = all_chunkings(body, true);
        assert_eq!(v.kind, ResultKind::InputRequired);
        assert_eq!(v.state_digest, Some(state_digest("abc")));
        let progress_only = "data: {\"method\":\"notifications/progress\",\"params\":{}}\n\n";
        assert_eq!(all_chunkings(progress_only, true).kind, ResultKind::Unknown);
        // The stream ended without the blank line: the pending event still counts.
        let unterminated = "data: {\"id\":1,\"result\":{\"resultType\":\"complete\"}}\n";
        assert_eq!(all_chunkings(unterminated, true).kind, ResultKind::Complete);
    }

    #[test]
    fn sse_line_ends_and_a_bom_do_not_change_the_verdict() {
        // Before the one line reader, a CR alone ended no line here (CR-only streams gave
        // Unknown) and a BOM hid the first `data:` line.
        let lines = [
            ": keep-alive",
            "",
            "event: message",
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,",
            "data: \"result\":{\"resultType\":\"input_required\",\"requestState\":\"abc\"}}",
            "",
            "data: {\"method\":\"notifications/message\",\"params\":{}}",
            "",
        ];
        let want = Verdict {
            kind: ResultKind::InputRequired,
            state_digest: Some(state_digest("abc")),
            ..Verdict::default()
        };
        for eol in ["\n", "\r", "\r\n"] {
            let body: String = lines.iter().flat_map(|l| [*l, eol]).collect();
            assert_eq!(all_chunkings(&body, true), want, "{eol:?}");
            let bom = format!("\u{feff}{body}");
            assert_eq!(all_chunkings(&bom, true), want, "BOM, {eol:?}");
            // Two chunks at every split index.
            for split in 0..=bom.len() {
                let mut s = ResultScanner::sse();
                s.feed(&bom.as_bytes()[..split]);
                s.feed(&bom.as_bytes()[split..]);
                assert_eq!(s.verdict(), want, "split at {split}, {eol:?}");
            }
        }
    }

    #[test]
    fn the_scanner_follows_the_content_type_in_any_spelling() {
        let input_required = br#"{"result":{"resultType":"input_required","requestState":"s"}}"#;
        for json in [
            "application/json",
            "Application/JSON; charset=utf-8",
            " application/json ",
            "APPLICATION/JSON;charset=UTF-8",
        ] {
            for follow in [true, false] {
                let mut s = ResultScanner::for_response(json.as_bytes(), follow).expect(json);
                s.feed(input_required);
                assert!(s.found(), "{json} {follow}");
            }
        }
        let sse = b"data: {\"result\":{\"resultType\":\"input_required\"}}\n\n";
        for stream in [
            "text/event-stream",
            "Text/Event-Stream; charset=utf-8",
            " text/event-stream",
        ] {
            let mut s = ResultScanner::for_response(stream.as_bytes(), true).expect(stream);
            s.feed(sse);
            assert!(s.found(), "{stream}");
            assert!(ResultScanner::for_response(stream.as_bytes(), false).is_none());
        }
        for other in [
            "application/json-seq",
            "text/plain",
            "",
            "application/jsonx",
        ] {
            assert!(
                ResultScanner::for_response(other.as_bytes(), true).is_none(),
                "{other}"
            );
        }
    }
}
