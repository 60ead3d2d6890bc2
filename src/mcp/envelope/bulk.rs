//! The second pass of the bulk reading: a container value read token by token from
//! [`Tokens`], with the grammar, the scalars and the keys checked as [`Scanner::value`] checks
//! them, but without looking at the bytes between tokens (strings' contents, whitespace): the
//! [first pass](super::blocks) has checked those sixty-four at a time.

use super::blocks::Tokens;
use super::keys::Seen;
use super::scanner::{scalar_end, Punt, Scan, Scanner};
use crate::mcp::strict::MAX_DEPTH;

/// Bit `c` set: byte `c` may follow a number or a literal (whitespace, `, ] } : " [ {`).
const DELIMITERS: u128 = {
    let mut set = 0u128;
    let mut k = 0;
    let all = b" \t\n\r,]}:\"[{";
    while k < all.len() {
        set |= 1 << all[k];
        k += 1;
    }
    set
};

impl<'a> Scanner<'a> {
    /// The container at the current position (`{` or `[`), nesting at `level`; the position
    /// moves past it.
    pub(crate) fn container(&mut self, level: usize) -> Scan<()> {
        let mut t = Tokens::new(self.bytes(), self.i);
        let first = t.next()?;
        self.i = self.token_container(&mut t, first, level)?;
        Ok(())
    }

    /// The object or array whose bracket is at `at`; the position after it.
    fn token_container(&mut self, t: &mut Tokens<'a>, at: usize, level: usize) -> Scan<usize> {
        let level = level + 1;
        if level > MAX_DEPTH {
            return Err(Punt);
        }
        if self.bytes()[at] == b'{' {
            self.token_object(t, level)
        } else {
            self.token_array(t, level)
        }
    }

    /// A member's or element's value, whose first token is at `at`.
    #[inline(always)]
    fn token_value(&mut self, t: &mut Tokens<'a>, at: usize, level: usize) -> Scan<()> {
        match self.bytes()[at] {
            b'"' => t.next().map(drop),
            b'{' | b'[' => self.token_container(t, at, level).map(drop),
            _ => self.token_scalar(at),
        }
    }

    /// A number or a literal at `at`.
    #[inline(always)]
    fn token_scalar(&mut self, at: usize) -> Scan<()> {
        let b = self.bytes();
        let end = scalar_end(b, at)?;
        // Only a delimiter may follow a number or a literal (`truex`, `1.5.2`, `1\`).
        match b.get(end) {
            Some(&c) if c >= 128 || DELIMITERS >> c & 1 == 0 => Err(Punt),
            _ => Ok(()),
        }
    }

    fn token_array(&mut self, t: &mut Tokens<'a>, level: usize) -> Scan<usize> {
        let b = self.bytes();
        let mut at = t.next()?;
        if b[at] == b']' {
            return Ok(at + 1);
        }
        loop {
            self.token_value(t, at, level)?;
            let sep = t.next()?;
            match b[sep] {
                b',' => at = t.next()?,
                b']' => return Ok(sep + 1),
                _ => return Err(Punt),
            }
        }
    }

    fn token_object(&mut self, t: &mut Tokens<'a>, level: usize) -> Scan<usize> {
        let b = self.bytes();
        let mut at = t.next()?;
        if b[at] == b'}' {
            return Ok(at + 1);
        }
        let mut seen = Seen::new(self.text_all());
        loop {
            if b[at] != b'"' {
                return Err(Punt);
            }
            let close = t.next()?;
            seen.note_at(at + 1, close, t.saw_backslash())?;
            let colon = t.next()?;
            if b[colon] != b':' {
                return Err(Punt);
            }
            let v = t.next()?;
            self.token_value(t, v, level)?;
            let sep = t.next()?;
            match b[sep] {
                b',' => at = t.next()?,
                b'}' => return Ok(sep + 1),
                _ => return Err(Punt),
            }
        }
    }
}
