//! The scanner inside a string: escapes resolved one byte at a time, `\u` code units (and
//! surrogate pairs) checked, and the bytes of the strings it keeps (a member name it matches,
//! `resultType`, `status`) or hashes (`requestState`, `taskId`) as they pass.

use super::*;

impl JsonScan {
    pub(super) fn string_byte(&mut self, kind: Str, b: u8) {
        match self.escape {
            0 => match b {
                b'"' => self.string_ends(kind),
                b'\\' => self.escape = 1,
                _ => self.push(kind, b),
            },
            1 => {
                self.escape = 0;
                let c = match b {
                    b'"' | b'\\' | b'/' => b,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        self.escape = 2;
                        self.unit = 0;
                        return;
                    }
                    _ => {
                        self.bad(kind);
                        return;
                    }
                };
                self.push(kind, c);
            }
            _ => {
                let Some(d) = (b as char).to_digit(16) else {
                    self.escape = 0;
                    self.bad(kind);
                    return;
                };
                self.unit = self.unit << 4 | d;
                if self.escape < 5 {
                    self.escape += 1;
                    return;
                }
                self.escape = 0;
                self.code_unit(kind, self.unit);
            }
        }
    }

    fn code_unit(&mut self, kind: Str, u: u32) {
        let c = match (self.high_surrogate.take(), u) {
            (None, 0xD800..=0xDBFF) => {
                self.high_surrogate = Some(u);
                return;
            }
            (Some(h), 0xDC00..=0xDFFF) => 0x10000 + ((h - 0xD800) << 10) + (u - 0xDC00),
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => {
                self.bad(kind);
                return;
            }
            (None, u) => u,
        };
        let mut utf8 = [0u8; 4];
        let n = char::from_u32(c).map_or(0, |ch| ch.encode_utf8(&mut utf8).len());
        for &b in &utf8[..n] {
            self.push(kind, b);
        }
    }

    fn bad(&mut self, kind: Str) {
        match kind {
            Str::State => self.bad_state = true,
            Str::TaskId => self.bad_task = true,
            _ => self.overflow = true,
        }
    }

    /// Unescaped string bytes (no quote, no backslash).
    pub(super) fn plain(&mut self, kind: Str, bytes: &[u8]) {
        if self.high_surrogate.take().is_some() {
            self.bad(kind);
        }
        match kind {
            Str::Ignored => {}
            Str::State => {
                if let Some(h) = self.hasher.as_mut() {
                    h.write(bytes);
                }
            }
            Str::TaskId => {
                if let Some(h) = self.task_hasher.as_mut() {
                    h.write(bytes);
                }
            }
            Str::Key | Str::ResultType | Str::Status => {
                let room = self.buf.len() - self.len;
                if bytes.len() > room {
                    self.overflow = true;
                } else {
                    self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
                    self.len += bytes.len();
                }
            }
        }
    }

    fn push(&mut self, kind: Str, b: u8) {
        if self.high_surrogate.is_some() {
            self.high_surrogate = None;
            self.bad(kind);
        }
        match kind {
            Str::Ignored => {}
            Str::State => {
                if let Some(h) = self.hasher.as_mut() {
                    h.write(&[b]);
                }
            }
            Str::TaskId => {
                if let Some(h) = self.task_hasher.as_mut() {
                    h.write(&[b]);
                }
            }
            Str::Key | Str::ResultType | Str::Status => {
                if self.len < self.buf.len() {
                    self.buf[self.len] = b;
                    self.len += 1;
                } else {
                    self.overflow = true;
                }
            }
        }
    }

    fn string_ends(&mut self, kind: Str) {
        self.in_string = None;
        if self.high_surrogate.take().is_some() {
            self.bad(kind);
        }
        let text: &[u8] = if self.overflow {
            b""
        } else {
            &self.buf[..self.len]
        };
        match kind {
            Str::Ignored => {}
            Str::Key => {
                let m = match (self.depth, text) {
                    (1, b"result") => Member::Result,
                    (1, b"error") => Member::Error,
                    (2, b"resultType") if self.in_result => Member::ResultType,
                    (2, b"requestState") if self.in_result => Member::RequestState,
                    (2, b"taskId") if self.in_result => Member::TaskId,
                    (2, b"status") if self.in_result => Member::Status,
                    (2, b"isError") if self.in_result => Member::IsError,
                    (2, b"code") if self.in_error => Member::Code,
                    _ => Member::Other,
                };
                if self.depth == 1 {
                    self.key1 = m;
                } else {
                    self.key2 = m;
                }
            }
            Str::ResultType => {
                self.result_type = Some(match text {
                    b"input_required" => ResultKind::InputRequired,
                    b"task" => ResultKind::Task,
                    _ => ResultKind::Complete,
                });
                self.key2 = Member::Other;
            }
            Str::State => {
                self.state_digest = self.hasher.take().map(|h| h.finish());
                self.key2 = Member::Other;
            }
            Str::TaskId => {
                self.task_digest = self.task_hasher.take().map(|h| h.finish());
                self.key2 = Member::Other;
            }
            Str::Status => {
                self.task_status = TaskStatus::from_wire(text);
                self.key2 = Member::Other;
            }
        }
    }
}
