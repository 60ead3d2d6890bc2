//! The byte scanner under [`super::fast`]: it validates a JSON document in one pass over the
//! bytes, with the strict walk's rules (every value checked, nesting bounded by [`MAX_DEPTH`],
//! keys equal after case folding refused in every object), and without a visitor call per token.
//!
//! It only ever *accepts*: whatever it does not accept it hands back as [`Punt`], and the caller
//! then reads the document with the [serde walk](super::walk), which refuses it with the right
//! message or accepts it. So the scanner may punt on more than the walk refuses (keys with
//! escapes, `\u` escapes of surrogates it cannot pair, numbers near the limits of a double) but
//! must never accept what the walk refuses. What it accepts is exactly RFC 8259 JSON as
//! serde_json reads it: UTF-8, no control characters in strings, the escapes `\" \\ \/ \b \f \n
//! \r \t \uXXXX`, numbers `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` whose value is a finite
//! double, `true`/`false`/`null`, whitespace of space, tab, CR and LF.
//!
//! The envelope's own members are read here byte by byte; any other container with a block or
//! more of body left (the arguments: where the bytes are) goes to the two-pass [bulk
//! reading](super::bulk), which holds to the same rules.

use super::keys::Seen;
pub(crate) use super::punt::{Punt, Scan};
use crate::mcp::strict::MAX_DEPTH;

/// A container with at least this much body left (from its bracket on) is read by the
/// [bulk](super::bulk) passes; a smaller one byte by byte, which costs less than a block.
const BULK: usize = 64;

/// A string's content (between the quotes, escapes not decoded).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Str<'a> {
    pub raw: &'a str,
    pub escaped: bool,
}

const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each of the 8 bytes (little-endian) that is `"`, `\` or below 0x20 (SWAR).
/// The lowest set bit is exact (marks the first such byte); bits above it may be spurious.
#[inline]
fn special(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    zero(w ^ (ONES * u64::from(b'"'))) | zero(w ^ (ONES * u64::from(b'\\'))) | below_space
}

pub(crate) struct Scanner<'a> {
    s: &'a str,
    b: &'a [u8],
    pub i: usize,
}

impl<'a> Scanner<'a> {
    /// The body must be UTF-8 as a whole (outside strings JSON is ASCII anyway), and below
    /// 4 GiB (the keys' offsets are 32-bit).
    pub(crate) fn new(body: &'a [u8]) -> Scan<Self> {
        if u32::try_from(body.len()).is_err() {
            return Err(Punt);
        }
        let s = std::str::from_utf8(body).map_err(|_| Punt)?;
        Ok(Scanner { s, b: body, i: 0 })
    }

    /// The whole body.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.b
    }

    /// The whole body, as text.
    pub(crate) fn text_all(&self) -> &'a str {
        self.s
    }

    /// The text from `start` to the current position.
    pub(crate) fn since(&self, start: usize) -> &'a str {
        &self.s[start..self.i]
    }

    #[inline]
    pub(crate) fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte after whitespace (not consumed).
    #[inline]
    pub(crate) fn peek(&mut self) -> Scan<u8> {
        self.ws();
        self.b.get(self.i).copied().ok_or(Punt)
    }

    fn eat(&mut self, c: u8) -> Scan<()> {
        if self.peek()? != c {
            return Err(Punt);
        }
        self.i += 1;
        Ok(())
    }

    /// Only whitespace may follow the document.
    pub(crate) fn end(&mut self) -> Scan<()> {
        self.ws();
        if self.i == self.b.len() {
            Ok(())
        } else {
            Err(Punt)
        }
    }

    /// Any value; `level` is the nesting of the container holding it (a container value nests
    /// one deeper).
    pub(crate) fn value(&mut self, level: usize) -> Scan<()> {
        match self.peek()? {
            // Containers with at least a block of body left take the bulk reading.
            b'{' | b'[' if self.b.len() - self.i >= BULK => self.container(level),
            b'{' => self.object(level + 1, |sc, _, l| sc.value(l)),
            b'[' => self.array(level + 1),
            b'"' => self.string().map(drop),
            _ => {
                self.i = scalar_end(self.b, self.i)?;
                Ok(())
            }
        }
    }

    /// A number (at its first byte).
    pub(crate) fn number(&mut self) -> Scan<()> {
        self.i = number_end(self.b, self.i)?;
        Ok(())
    }

    /// A string (at its opening quote).
    pub(crate) fn string(&mut self) -> Scan<Str<'a>> {
        self.i += 1;
        let start = self.i;
        let b = self.b;
        let mut escaped = false;
        loop {
            // Eight bytes at a time, straight to the first quote, backslash or control byte.
            while let Some(chunk) = b.get(self.i..self.i + 8) {
                let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                let m = special(w);
                if m == 0 {
                    self.i += 8;
                    continue;
                }
                self.i += (m.trailing_zeros() / 8) as usize;
                break;
            }
            match *b.get(self.i).ok_or(Punt)? {
                b'"' => {
                    let raw = &self.s[start..self.i];
                    self.i += 1;
                    return Ok(Str { raw, escaped });
                }
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                0..=0x1f => return Err(Punt),
                _ => self.i += 1,
            }
        }
    }

    /// One escape (at its backslash). Surrogates only as a high-low pair.
    fn escape(&mut self) -> Scan<()> {
        match self.b.get(self.i + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                self.i += 2;
                Ok(())
            }
            Some(b'u') => {
                let unit = hex4(self.b, self.i + 2)?;
                self.i += 6;
                match unit {
                    0xD800..=0xDBFF => {
                        if self.b.get(self.i..self.i + 2) != Some(b"\\u") {
                            return Err(Punt);
                        }
                        if !(0xDC00..=0xDFFF).contains(&hex4(self.b, self.i + 2)?) {
                            return Err(Punt);
                        }
                        self.i += 6;
                        Ok(())
                    }
                    0xDC00..=0xDFFF => Err(Punt),
                    _ => Ok(()),
                }
            }
            _ => Err(Punt),
        }
    }

    fn array(&mut self, level: usize) -> Scan<()> {
        if level > MAX_DEPTH {
            return Err(Punt);
        }
        self.i += 1;
        if self.peek()? == b']' {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.value(level)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Punt),
            }
        }
    }

    /// An object at nesting `level` (at its `{`): each key is checked against the earlier ones,
    /// then `member(scanner, key, level)` must consume the value.
    pub(crate) fn object<F>(&mut self, level: usize, mut member: F) -> Scan<()>
    where
        F: FnMut(&mut Self, &'a str, usize) -> Scan<()>,
    {
        if level > MAX_DEPTH {
            return Err(Punt);
        }
        self.i += 1;
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(());
        }
        let mut seen = Seen::new(self.s);
        loop {
            if self.peek()? != b'"' {
                return Err(Punt);
            }
            let start = self.i + 1;
            let k = self.string()?;
            if k.escaped {
                return Err(Punt);
            }
            seen.note_at(start, start + k.raw.len(), false)?;
            self.eat(b':')?;
            member(self, k.raw, level)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Punt),
            }
        }
    }
}

/// The four hex digits of a `\u` escape at `at`, as a UTF-16 unit.
pub(crate) fn hex4(b: &[u8], at: usize) -> Scan<u32> {
    let digits = b.get(at..at + 4).ok_or(Punt)?;
    digits.iter().try_fold(0u32, |acc, &d| {
        let v = (d as char).to_digit(16).ok_or(Punt)?;
        Ok(acc << 4 | v)
    })
}

/// The end of the number or literal (`true`, `false`, `null`) that starts at `at`.
#[inline(always)]
pub(crate) fn scalar_end(b: &[u8], at: usize) -> Scan<usize> {
    let word: &[u8] = match b.get(at) {
        Some(b'-' | b'0'..=b'9') => return number_end(b, at),
        Some(b't') => b"true",
        Some(b'f') => b"false",
        Some(b'n') => b"null",
        _ => return Err(Punt),
    };
    if b[at..].starts_with(word) {
        Ok(at + word.len())
    } else {
        Err(Punt)
    }
}

/// The end of the number that starts at `start`.
#[inline(always)]
pub(crate) fn number_end(b: &[u8], start: usize) -> Scan<usize> {
    let digits = |mut i: usize| {
        while let Some(b'0'..=b'9') = b.get(i) {
            i += 1;
        }
        i
    };
    let mut i = start;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let int_start = i;
    i = match b.get(i) {
        Some(b'0') => i + 1,
        Some(b'1'..=b'9') => digits(i + 1),
        _ => return Err(Punt),
    };
    let int = i - int_start;
    if b.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return Err(Punt);
        }
        i = end;
    }
    let mut exponent = false;
    if let Some(b'e' | b'E') = b.get(i) {
        exponent = true;
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let end = digits(i);
        if end == i {
            return Err(Punt);
        }
        i = end;
    }
    // Without an exponent, up to 300 integer digits are below 1e300: always finite. Anything
    // else is read as serde_json reads it (nearest double) and must be comfortably finite.
    if exponent || int > 300 {
        let text = std::str::from_utf8(&b[start..i]).map_err(|_| Punt)?;
        let v: f64 = text.parse().map_err(|_| Punt)?;
        if v.is_nan() || v.abs() > 1e308 {
            return Err(Punt);
        }
    }
    Ok(i)
}

#[cfg(test)]
#[path = "scanner_tests.rs"]
pub(super) mod tests;
