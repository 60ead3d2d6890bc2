//! The byte-level JSON tokenizer under [`super::result_scan`]: tracks strings, escapes and
//! nesting of a JSON-RPC response and reads only `result`/`error` and, inside `result`,
//! `resultType`, `requestState` (hashed as it passes, decoded) and, for the Tasks extension,
//! `taskId` (hashed the same way) and `status`, and `result.isError` and `error.code` (for the
//! audit trail). Fixed memory. The bytes inside strings (escapes, `\u` code units, the values
//! it keeps) are [`strings`].

mod strings;

use super::digest::StateHasher;
use super::verdict::{ResultKind, TaskStatus, Verdict};

/// The members this scanner reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Member {
    #[default]
    Other,
    Result,
    Error,
    ResultType,
    RequestState,
    TaskId,
    Status,
    IsError,
    Code,
}

/// What the string being read is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Str {
    #[default]
    Ignored,
    /// A key at depth 1 or 2: compared in `buf`.
    Key,
    /// The value of `result.resultType`: compared in `buf`.
    ResultType,
    /// The value of `result.requestState`: hashed.
    State,
    /// The value of `result.taskId`: hashed.
    TaskId,
    /// The value of `result.status`: compared in `buf`.
    Status,
}

#[derive(Debug, Default)]
pub(super) struct JsonScan {
    /// Nesting depth (the response object is depth 1).
    depth: u32,
    /// Bit d: the container at depth d (d < 64) is an object.
    objects: u64,
    /// The next string at this depth is a key.
    expect_key: bool,
    in_string: Option<Str>,
    /// Inside a string: 0 none, 1 after a backslash, 2..=5 reading `\u` hex digits.
    escape: u8,
    unit: u32,
    high_surrogate: Option<u32>,
    buf: [u8; 16],
    len: usize,
    overflow: bool,
    /// The last key read at depth 1 and at depth 2.
    key1: Member,
    key2: Member,
    /// The value of the current depth-1 member `result` is an object.
    pub(super) in_result: bool,
    pub(super) saw_result: bool,
    pub(super) saw_error: bool,
    /// The value of the current depth-1 member `error` is an object.
    pub(super) in_error: bool,
    /// `result.isError` is `true`.
    is_error: bool,
    /// Reading the digits of `error.code`: (negative, value so far).
    code: Option<(bool, i64)>,
    reading_code: bool,
    result_type: Option<ResultKind>,
    hasher: Option<StateHasher>,
    state_digest: Option<u64>,
    bad_state: bool,
    task_hasher: Option<StateHasher>,
    task_digest: Option<u64>,
    bad_task: bool,
    task_status: Option<TaskStatus>,
}

impl JsonScan {
    pub(super) fn feed(&mut self, chunk: &[u8]) {
        let mut i = 0;
        while i < chunk.len() {
            // Inside a string, plain bytes up to the next quote or backslash pass in one go.
            if let (Some(kind), 0) = (self.in_string, self.escape) {
                let rest = &chunk[i..];
                let n = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
                if n > 0 {
                    self.plain(kind, &rest[..n]);
                    i += n;
                    continue;
                }
            }
            self.step(chunk[i]);
            i += 1;
        }
    }

    pub(super) fn verdict(&self) -> Verdict {
        let kind = if self.saw_error {
            ResultKind::Error
        } else if self.saw_result {
            self.result_type.unwrap_or(ResultKind::Complete)
        } else {
            ResultKind::Unknown
        };
        Verdict {
            kind,
            state_digest: self.state_digest.filter(|_| !self.bad_state),
            task_digest: self.task_digest.filter(|_| !self.bad_task),
            task_status: self.task_status,
            tool_error: self.is_error && kind == ResultKind::Complete,
            error_code: self
                .code
                .filter(|_| kind == ResultKind::Error)
                .map(|(neg, v)| if neg { -v } else { v }),
        }
    }

    fn is_object(&self, depth: u32) -> bool {
        depth < 64 && self.objects & (1 << depth) != 0
    }

    pub(super) fn step(&mut self, b: u8) {
        if let Some(kind) = self.in_string {
            self.string_byte(kind, b);
            return;
        }
        if self.reading_code {
            if let (true, Some((_, v))) = (b.is_ascii_digit(), self.code.as_mut()) {
                *v = v.saturating_mul(10).saturating_add(i64::from(b - b'0'));
                return;
            }
            self.reading_code = false;
        }
        match b {
            b'{' | b'[' => {
                self.value_starts(b);
                self.depth = self.depth.saturating_add(1);
                if self.depth < 64 {
                    if b == b'{' {
                        self.objects |= 1 << self.depth;
                    } else {
                        self.objects &= !(1 << self.depth);
                    }
                }
                self.expect_key = b == b'{';
            }
            b'}' | b']' => {
                if self.depth == 2 {
                    self.in_result = false;
                    self.in_error = false;
                }
                self.depth = self.depth.saturating_sub(1);
                self.expect_key = false;
            }
            b',' => self.expect_key = self.is_object(self.depth),
            b':' => self.expect_key = false,
            b'"' => {
                let kind = if self.expect_key {
                    if self.depth <= 2 {
                        Str::Key
                    } else {
                        Str::Ignored
                    }
                } else {
                    self.value_starts(b);
                    match (self.depth, self.key2) {
                        (2, Member::ResultType) if self.in_result => Str::ResultType,
                        (2, Member::RequestState) if self.in_result => {
                            self.hasher = Some(StateHasher::default());
                            Str::State
                        }
                        (2, Member::TaskId) if self.in_result => {
                            self.task_hasher = Some(StateHasher::default());
                            Str::TaskId
                        }
                        (2, Member::Status) if self.in_result => Str::Status,
                        _ => Str::Ignored,
                    }
                };
                self.len = 0;
                self.overflow = false;
                self.in_string = Some(kind);
            }
            _ => {
                if !b.is_ascii_whitespace() {
                    self.value_starts(b);
                }
            }
        }
    }

    /// A value begins at the current depth: act on the member it belongs to.
    fn value_starts(&mut self, first: u8) {
        if self.expect_key {
            return;
        }
        if self.depth == 1 {
            match self.key1 {
                Member::Result => {
                    self.saw_result = true;
                    self.in_result = first == b'{';
                }
                Member::Error => {
                    self.saw_error = true;
                    self.in_error = first == b'{';
                }
                _ => {}
            }
            self.key1 = Member::Other;
        } else if self.depth == 2 && self.in_error && self.key2 == Member::Code {
            if first == b'-' || first.is_ascii_digit() {
                let v = if first == b'-' {
                    0
                } else {
                    i64::from(first - b'0')
                };
                self.code = Some((first == b'-', v));
                self.reading_code = true;
            }
            self.key2 = Member::Other;
        } else if self.depth == 2 && self.in_result && self.key2 == Member::IsError {
            self.is_error = first == b't';
            self.key2 = Member::Other;
        } else if self.depth == 2 && self.in_result && first != b'"' {
            // resultType / requestState that is not a string: not ours to read.
            self.key2 = Member::Other;
        }
    }
}
