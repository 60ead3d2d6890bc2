//! The JSON-RPC messages of a 2025-era server's answer, one at a time as they arrive: the whole
//! body when it answered `application/json`, each event when it answered with an event stream
//! (where it may also send notifications and its own requests to the client before the
//! response). Held across a paused call, so the stream is read on from where it stopped.

use serde_json::Value;
use std::collections::VecDeque;

use crate::gateway::transport::upstream_h1::oneshot::{Stream, Streaming};
use crate::mcp::sse;

/// The messages of one upstream answer.
pub(crate) struct Messages {
    stream: Streaming<Box<dyn Stream>>,
    pub status: u16,
    event_stream: bool,
    parser: sse::Parser,
    queue: VecDeque<Value>,
    json: Vec<u8>,
    ended: bool,
    /// A JSON-RPC response was handed out: what is left of the stream is its end.
    responded: bool,
}

/// The largest JSON answer read (an event stream is read event by event).
const MAX_JSON: usize = 32 * 1024 * 1024;

impl Messages {
    pub(crate) fn new(stream: Streaming<Box<dyn Stream>>) -> Messages {
        let ct = stream.head.headers.get(http::header::CONTENT_TYPE);
        let event_stream = ct.is_some_and(|c| sse::is_event_stream(c.as_bytes()));
        Messages {
            status: stream.head.status.as_u16(),
            stream,
            event_stream,
            parser: sse::Parser::new(),
            queue: VecDeque::new(),
            json: Vec::new(),
            ended: false,
            responded: false,
        }
    }

    /// A header of the answer.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.stream
            .head
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
    }

    /// The next message (`None`: the answer ended); what is not JSON is skipped.
    pub(crate) async fn next(&mut self) -> Result<Option<Value>, String> {
        loop {
            if let Some(m) = self.queue.pop_front() {
                self.responded |= is_response(&m);
                return Ok(Some(m));
            }
            if self.ended {
                return Ok(None);
            }
            match self.stream.next().await? {
                Some(chunk) if self.event_stream => {
                    let mut events = Vec::new();
                    self.parser.feed(&chunk, &mut events);
                    self.push(events);
                }
                Some(chunk) => {
                    if self.json.len() + chunk.len() > MAX_JSON {
                        return Err(format!("the answer is larger than {MAX_JSON} bytes"));
                    }
                    self.json.extend_from_slice(&chunk);
                }
                None => {
                    self.ended = true;
                    if self.event_stream {
                        let mut events = Vec::new();
                        std::mem::take(&mut self.parser).finish(&mut events);
                        self.push(events);
                    } else if let Ok(v) = serde_json::from_slice(&self.json) {
                        self.queue.push_back(v);
                    }
                }
            }
        }
    }

    fn push(&mut self, events: Vec<sse::Event>) {
        let parsed = events
            .into_iter()
            .filter_map(|e| serde_json::from_slice(&e.data).ok());
        self.queue.extend(parsed);
    }

    /// The rest of a non-JSON-RPC answer's body (an error page), bounded.
    pub(crate) async fn rest(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.json);
        while let Ok(Some(chunk)) = self.stream.next().await {
            if out.len() + chunk.len() > 64 * 1024 {
                break;
            }
            out.extend_from_slice(&chunk);
        }
        out
    }
}

/// An answer dropped before its end: what has arrived is read (an empty `202`, an event
/// stream whose end came with its response), and after its response the rest too, so that the
/// connection goes back to its pool instead of being closed (`Streaming::finish`). An answer
/// dropped before its response (its call abandoned) is not waited for: its connection closes
/// at once, as the server may take the close as the call's end.
impl Drop for Messages {
    fn drop(&mut self) {
        if !self.ended {
            self.stream.finish(self.responded);
        }
    }
}

/// A JSON-RPC response (a result or an error), not a request or a notification.
pub(crate) fn is_response(m: &Value) -> bool {
    m.get("method").is_none() && (m.get("result").is_some() || m.get("error").is_some())
}

#[cfg(test)]
mod tests {
    use super::is_response;
    use serde_json::json;

    #[test]
    fn only_results_and_errors_are_responses() {
        assert!(is_response(
            &json!({"jsonrpc": "2.0", "id": 1, "result": {}})
        ));
        assert!(is_response(
            &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "x"}})
        ));
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}});
        assert!(!is_response(&progress));
        let question =
            json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {}});
        assert!(!is_response(&question));
        // A request carrying a stray `result` member is still a request.
        let odd = json!({"jsonrpc": "2.0", "id": 8, "method": "roots/list", "result": {}});
        assert!(!is_response(&odd));
    }
}
