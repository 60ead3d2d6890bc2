//! Spots the notifications that invalidate cached results (`notifications/*/list_changed`,
//! `notifications/resources/updated`) in an SSE stream as its chunks pass by. Chunks are not
//! held back: the scanner copies only the `data:` lines of the current event, at most
//! [`MAX_EVENT`] bytes (a longer event is skipped, it cannot be a small notification anyway).

use serde::Deserialize;

use crate::mcp::caching::{invalidated_by, Invalidation};

/// The largest event data the scanner looks at.
pub const MAX_EVENT: usize = 16 * 1024;

#[derive(Debug, Default)]
pub struct NotificationScanner {
    /// The current line, until its end.
    line: Vec<u8>,
    /// The current line is too long and is being skipped.
    skipping: bool,
    /// The `data:` of the current event.
    data: Vec<u8>,
    too_big: bool,
}

#[derive(Deserialize)]
struct Note {
    method: String,
    #[serde(default)]
    params: Option<NoteParams>,
}

#[derive(Deserialize)]
struct NoteParams {
    #[serde(default)]
    uri: Option<String>,
}

impl NotificationScanner {
    /// Scan the next chunk, pushing what each complete notification in it invalidates.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Invalidation>) {
        for &b in chunk {
            if b == b'\n' {
                self.end_line(out);
            } else if !self.skipping {
                if self.line.len() >= MAX_EVENT {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.push(b);
                }
            }
        }
    }

    fn end_line(&mut self, out: &mut Vec<Invalidation>) {
        if std::mem::take(&mut self.skipping) {
            self.too_big = true;
            return;
        }
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.is_empty() {
            self.dispatch(out);
        } else if let Some(d) = line.strip_prefix(b"data:") {
            let d = d.strip_prefix(b" ").unwrap_or(d);
            if self.data.len() + d.len() + 1 > MAX_EVENT {
                self.too_big = true;
            } else {
                if !self.data.is_empty() {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(d);
            }
        }
        self.line = line;
        self.line.clear();
    }

    fn dispatch(&mut self, out: &mut Vec<Invalidation>) {
        let data = std::mem::take(&mut self.data);
        if std::mem::take(&mut self.too_big) || data.is_empty() {
            return;
        }
        if memchr::memmem::find(&data, b"notifications/").is_none() {
            return;
        }
        if let Ok(n) = serde_json::from_slice::<Note>(&data) {
            let uri = n.params.and_then(|p| p.uri);
            out.extend(invalidated_by(&n.method, uri.as_deref()));
        }
        self.data = data;
        self.data.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::methods::*;

    fn scan(chunks: &[&[u8]]) -> Vec<Invalidation> {
        let mut s = NotificationScanner::default();
        let mut out = vec![];
        for c in chunks {
            s.feed(c, &mut out);
        }
        out
    }

    #[test]
    fn notifications_split_across_chunks_are_seen() {
        let ev = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
        for cut in 0..ev.len() {
            let got = scan(&[&ev[..cut], &ev[cut..]]);
            assert_eq!(
                got,
                vec![Invalidation::Lists(&[TOOLS_LIST])],
                "cut at {cut}"
            );
        }
        let crlf = b"data: {\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"file:///a\"}}\r\n\r\n";
        assert_eq!(
            scan(&[crlf]),
            vec![Invalidation::Resource("file:///a".into())]
        );
    }

    #[test]
    fn other_events_and_oversized_ones_invalidate_nothing() {
        let progress =
            b": keep-alive\n\ndata: {\"method\":\"notifications/progress\",\"params\":{}}\n\n";
        assert!(scan(&[progress]).is_empty());
        let mut big = b"data: {\"method\":\"notifications/tools/list_changed\",\"pad\":\"".to_vec();
        big.extend(std::iter::repeat_n(b'x', MAX_EVENT));
        big.extend_from_slice(b"\"}\n\n");
        assert!(scan(&[&big]).is_empty());
        // The scanner recovers for the next event.
        let next = b"data: {\"method\":\"notifications/prompts/list_changed\"}\n\n";
        let mut s = NotificationScanner::default();
        let mut out = vec![];
        s.feed(&big, &mut out);
        s.feed(next, &mut out);
        assert_eq!(out, vec![Invalidation::Lists(&[PROMPTS_LIST])]);
    }
}
