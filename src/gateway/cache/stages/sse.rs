//! Spots the notifications that invalidate cached results (`notifications/*/list_changed`,
//! `notifications/resources/updated`) in an SSE stream as its chunks pass by, read with the one
//! event-stream reader ([`crate::mcp::sse::Lines`]). Chunks are not held back: the scanner copies
//! only the `data:` lines of the current event, at most [`MAX_EVENT`] bytes (a longer event is
//! skipped, it cannot be a small notification anyway).

use serde::Deserialize;

use crate::mcp::caching::{invalidated_by, Invalidation};
use crate::mcp::sse::{Field, Lines, Piece};

/// The largest event data the scanner looks at.
pub(crate) const MAX_EVENT: usize = 16 * 1024;

#[derive(Debug, Default)]
pub(crate) struct NotificationScanner {
    /// The event-stream line reader (the one of [`crate::mcp::sse`]).
    lines: Lines,
    /// The `data:` of the current event.
    data: Vec<u8>,
    /// The current line is a `data` line whose join with the previous one was done.
    data_open: bool,
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
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<Invalidation>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.feed(chunk, |p| match p {
            Piece::Value(Field::Data, d) => self.data_piece(d),
            Piece::End(Field::Data) => {
                self.data_piece(b"");
                self.data_open = false;
            }
            Piece::Dispatch => self.dispatch(out),
            Piece::Value(..) | Piece::End(_) => {}
        });
        self.lines = lines;
    }

    fn data_piece(&mut self, d: &[u8]) {
        let join = !self.data_open && !self.data.is_empty();
        self.data_open = true;
        if self.too_big || self.data.len() + usize::from(join) + d.len() >= MAX_EVENT {
            self.too_big = true;
            return;
        }
        if join {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(d);
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

    #[test]
    fn cr_lf_crlf_and_a_bom_at_every_split_point() {
        // Before the one line reader, this scanner ended lines at LF only: a CR-only stream
        // invalidated nothing.
        let want = vec![
            Invalidation::Lists(&[TOOLS_LIST]),
            Invalidation::Resource("file:///a".into()),
        ];
        for eol in ["\n", "\r", "\r\n"] {
            let body = [
                ": keep-alive",
                "",
                "event: message",
                "data: {\"method\":\"notifications/tools/list_changed\"}",
                "",
                "data: {\"method\":\"notifications/resources/updated\",",
                "data: \"params\":{\"uri\":\"file:///a\"}}",
                "",
            ]
            .iter()
            .flat_map(|l| [*l, eol])
            .collect::<String>();
            let body = format!("\u{feff}{body}");
            let body = body.as_bytes();
            for cut in 0..=body.len() {
                assert_eq!(
                    scan(&[&body[..cut], &body[cut..]]),
                    want,
                    "{eol:?} cut at {cut}"
                );
            }
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            assert_eq!(scan(&bytes), want, "{eol:?} byte by byte");
        }
    }
}
