//! A streaming scanner that spots `"resultType":"input_required"` in a JSON response as its
//! chunks pass by, without copying or buffering them (for MRTR metrics in the gateway).

const KEY: &[u8] = b"\"resultType\"";
const VALUE: &[u8] = b"\"input_required\"";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    /// Matching the key; `usize` bytes of it matched so far.
    #[default]
    Key,
    /// After the key, before the colon.
    Colon,
    /// After the colon, matching the value.
    Value,
}

/// Feed it the chunks of one response body in order.
#[derive(Debug, Default, Clone)]
pub struct InputRequiredScanner {
    phase: Phase,
    matched: usize,
    found: bool,
}

impl InputRequiredScanner {
    /// Scan the next chunk; returns true once `"resultType":"input_required"` has been seen.
    pub fn feed(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            if self.found {
                break;
            }
            self.step(b);
        }
        self.found
    }

    pub(crate) fn found(&self) -> bool {
        self.found
    }

    fn step(&mut self, b: u8) {
        match self.phase {
            Phase::Key => {
                if b == KEY[self.matched] {
                    self.matched += 1;
                    if self.matched == KEY.len() {
                        self.phase = Phase::Colon;
                        self.matched = 0;
                    }
                } else {
                    // The key starts with the only quote it contains: restart on a quote.
                    self.matched = usize::from(b == b'"');
                }
            }
            Phase::Colon => match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b':' => self.phase = Phase::Value,
                _ => self.reset(b),
            },
            Phase::Value => {
                if self.matched == 0 && matches!(b, b' ' | b'\t' | b'\r' | b'\n') {
                    return;
                }
                if b == VALUE[self.matched] {
                    self.matched += 1;
                    if self.matched == VALUE.len() {
                        self.found = true;
                    }
                } else {
                    self.reset(b);
                }
            }
        }
    }

    fn reset(&mut self, b: u8) {
        self.phase = Phase::Key;
        self.matched = usize::from(b == b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_in_pieces(s: &str, piece: usize) -> bool {
        let mut sc = InputRequiredScanner::default();
        s.as_bytes().chunks(piece).any(|c| sc.feed(c))
    }

    #[test]
    fn finds_it_across_any_chunking() {
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType" : "input_required","inputRequests":{}}}"#;
        for piece in 1..body.len() {
            assert!(scan_in_pieces(body, piece), "piece {piece}");
        }
    }

    #[test]
    fn ignores_complete_results_and_look_alikes() {
        for body in [
            r#"{"result":{"resultType":"complete","content":[{"text":"input_required"}]}}"#,
            r#"{"result":{"text":"\"resultType\" is input_required"}}"#,
            r#"{"result":{"resultTypes":"input_required"}}"#,
        ] {
            assert!(!scan_in_pieces(body, 3), "{body}");
        }
        assert!(scan_in_pieces(
            r#"{"a":"x","resultType":"input_required"}"#,
            5
        ));
    }
}
