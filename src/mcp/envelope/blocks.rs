//! The first pass of the [bulk reading](super::bulk): the body in blocks of 64 bytes, each
//! classified at once (SSE2 on x86_64, a byte loop elsewhere) into bit masks, from which come the
//! positions of the document's tokens: the structural characters `{ } [ ] : ,` outside strings,
//! both quotes of every string, and the first byte of every number or literal. What the masks
//! show wrong with the bytes themselves (a control character in a string or outside one, an
//! escape JSON does not have, an unpaired surrogate escape) makes the reading stop: [`Punt`].
//!
//! Strings are told apart as a strict reader tells them apart: a backslash escapes the byte
//! after it, unless it is itself escaped; a quote that is not escaped opens or closes a string.
//! The tracking is exact for any document that is JSON; for one that is not, the second pass
//! always finds a token it cannot place (a scalar with a backslash in it, a token missing), so a
//! document is accepted only when both passes agree it is JSON.

use super::scanner::{hex4, Punt, Scan};

/// The masks of one block: bit `k` is byte `k` of the block.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Masks {
    pub quote: u64,
    pub backslash: u64,
    /// `{ } [ ] : ,`
    pub structural: u64,
    /// space, tab, LF, CR
    pub ws: u64,
    /// below 0x20
    pub ctrl: u64,
}

/// The classification of one block, byte by byte (the reference, and the reading off x86_64).
#[cfg(any(test, not(target_arch = "x86_64")))]
pub(crate) fn classify_bytes(block: &[u8; 64]) -> Masks {
    let mut m = Masks::default();
    for (k, &c) in block.iter().enumerate() {
        let bit = 1u64 << k;
        match c {
            b'"' => m.quote |= bit,
            b'\\' => m.backslash |= bit,
            b'{' | b'}' | b'[' | b']' | b':' | b',' => m.structural |= bit,
            b' ' => m.ws |= bit,
            b'\t' | b'\n' | b'\r' => {
                m.ws |= bit;
                m.ctrl |= bit;
            }
            0..=0x1f => m.ctrl |= bit,
            _ => {}
        }
    }
    m
}

/// The classification of one block, sixteen bytes at a time.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn classify(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let mut m = Masks::default();
    for k in 0..4 {
        // SAFETY: SSE2 is part of every x86_64 CPU, so its intrinsics can always run; the load
        // reads bytes 16k..16k+16 of the 64-byte array (unaligned loads are allowed).
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k).cast::<__m128i>());
            let splat = |c: u8| _mm_set1_epi8(c as i8);
            let bits = |x: __m128i| u64::from(_mm_movemask_epi8(x) as u16) << (16 * k);
            // `[` and `]` are `{` and `}` with bit 0x20 clear; no other byte is.
            let folded = _mm_or_si128(v, splat(0x20));
            let structural = _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(folded, splat(b'{')),
                    _mm_cmpeq_epi8(folded, splat(b'}')),
                ),
                _mm_or_si128(
                    _mm_cmpeq_epi8(v, splat(b':')),
                    _mm_cmpeq_epi8(v, splat(b',')),
                ),
            );
            let ws = _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(v, splat(b' ')),
                    _mm_cmpeq_epi8(v, splat(b'\t')),
                ),
                _mm_or_si128(
                    _mm_cmpeq_epi8(v, splat(b'\n')),
                    _mm_cmpeq_epi8(v, splat(b'\r')),
                ),
            );
            let ctrl = _mm_cmpeq_epi8(_mm_max_epu8(v, splat(0x1f)), splat(0x1f));
            m.quote |= bits(_mm_cmpeq_epi8(v, splat(b'"')));
            m.backslash |= bits(_mm_cmpeq_epi8(v, splat(b'\\')));
            m.structural |= bits(structural);
            m.ws |= bits(ws);
            m.ctrl |= bits(ctrl);
        }
    }
    m
}

/// The classification of one block, thirty-two bytes at a time.
///
/// # Safety
/// The CPU must have AVX2 ([`has_avx2`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn classify_avx2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_max_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8,
    };
    let mut m = Masks::default();
    for k in 0..2 {
        // SAFETY: the load reads bytes 32k..32k+32 of the 64-byte array (unaligned loads are
        // allowed); the caller has checked that the CPU has AVX2.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(32 * k).cast::<__m256i>()) };
        let splat = |c: u8| _mm256_set1_epi8(c as i8);
        let is = |c: u8| _mm256_cmpeq_epi8(v, splat(c));
        let bits = |x: __m256i| u64::from(_mm256_movemask_epi8(x) as u32) << (32 * k);
        // `[` and `]` are `{` and `}` with bit 0x20 clear; no other byte is.
        let folded = _mm256_or_si256(v, splat(0x20));
        let structural = _mm256_or_si256(
            _mm256_or_si256(
                _mm256_cmpeq_epi8(folded, splat(b'{')),
                _mm256_cmpeq_epi8(folded, splat(b'}')),
            ),
            _mm256_or_si256(is(b':'), is(b',')),
        );
        let ws = _mm256_or_si256(
            _mm256_or_si256(is(b' '), is(b'\t')),
            _mm256_or_si256(is(b'\n'), is(b'\r')),
        );
        let ctrl = _mm256_cmpeq_epi8(_mm256_max_epu8(v, splat(0x1f)), splat(0x1f));
        m.quote |= bits(is(b'"'));
        m.backslash |= bits(is(b'\\'));
        m.structural |= bits(structural);
        m.ws |= bits(ws);
        m.ctrl |= bits(ctrl);
    }
    m
}

/// Whether the block has no quote, backslash or control byte: inside a string, it holds no
/// token and needs no classification (long strings cost this test).
///
/// # Safety
/// The CPU must have AVX2 ([`has_avx2`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn plain_avx2(block: &[u8; 64]) -> bool {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_max_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8, _mm256_setzero_si256,
    };
    let splat = |c: u8| _mm256_set1_epi8(c as i8);
    let mut any = _mm256_setzero_si256();
    for k in 0..2 {
        // SAFETY: as in `classify_avx2`.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(32 * k).cast::<__m256i>()) };
        let ctrl = _mm256_cmpeq_epi8(_mm256_max_epu8(v, splat(0x1f)), splat(0x1f));
        let quote = _mm256_cmpeq_epi8(v, splat(b'"'));
        let backslash = _mm256_cmpeq_epi8(v, splat(b'\\'));
        any = _mm256_or_si256(
            any,
            _mm256_or_si256(ctrl, _mm256_or_si256(quote, backslash)),
        );
    }
    _mm256_movemask_epi8(any) == 0
}

/// Whether this CPU has AVX2 (looked up once, then cached by std).
#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// The classification of one block, with the widest instructions the CPU has.
#[inline]
fn classify_best(block: &[u8; 64], avx2: bool) -> Masks {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: `avx2` is `has_avx2()`.
        return unsafe { classify_avx2(block) };
    }
    let _ = avx2;
    classify(block)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub(crate) fn classify(block: &[u8; 64]) -> Masks {
    classify_bytes(block)
}

/// Bit `k` set: an odd number of bits at or below `k` are set in `x`.
#[inline]
fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

/// The token positions of a document, read from `start` on, block after block.
pub(crate) struct Tokens<'a> {
    b: &'a [u8],
    /// The position of bit 0 of `bits`.
    base: usize,
    /// The tokens of the current block not yet returned.
    bits: u64,
    /// Where the next block starts.
    next: usize,
    /// Carried from the previous block: its last byte was an escaping backslash, was inside a
    /// string, was part of a number or literal.
    escape_carry: bool,
    in_string: bool,
    scalar_carry: bool,
    /// The `\u` escape at this position is the low half of a pair already checked.
    paired_low: usize,
    /// The CPU has AVX2.
    avx2: bool,
    /// Some block so far has a backslash.
    backslash: bool,
    /// The last block had at most one quote: the next may well lie inside one long string
    /// (the only case where testing it for a plain block pays).
    long_string: bool,
}

impl<'a> Tokens<'a> {
    /// The tokens of `b` from `start`, which must not be inside a string.
    pub(crate) fn new(b: &'a [u8], start: usize) -> Self {
        Tokens {
            b,
            base: start,
            bits: 0,
            next: start,
            escape_carry: false,
            in_string: false,
            scalar_carry: false,
            paired_low: usize::MAX,
            #[cfg(target_arch = "x86_64")]
            avx2: has_avx2(),
            #[cfg(not(target_arch = "x86_64"))]
            avx2: false,
            backslash: false,
            long_string: true,
        }
    }

    /// The position of the next token; `Punt` past the end of the body or at bytes that cannot
    /// be JSON.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Scan<usize> {
        while self.bits == 0 {
            self.fill()?;
        }
        let at = self.base + self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        Ok(at)
    }

    /// Whether any byte up to the end of the current block may be a backslash: without one,
    /// no string so far has an escape.
    #[inline(always)]
    pub(crate) fn saw_backslash(&self) -> bool {
        self.backslash
    }

    /// Classify the next block.
    fn fill(&mut self) -> Scan<()> {
        let start = self.next;
        let rest = self.b.get(start..).filter(|r| !r.is_empty()).ok_or(Punt)?;
        #[cfg(target_arch = "x86_64")]
        if let (true, true, false, true, Some(block)) = (
            self.long_string,
            self.in_string,
            self.escape_carry,
            self.avx2,
            rest.first_chunk::<64>(),
        ) {
            // SAFETY: `avx2` is `has_avx2()`.
            if unsafe { plain_avx2(block) } {
                // Still inside the same string: no token, nothing carried but that.
                (self.base, self.next, self.bits) = (start, start + 64, 0);
                self.scalar_carry = false;
                return Ok(());
            }
        }
        let m = match rest.first_chunk::<64>() {
            Some(block) => classify_best(block, self.avx2),
            None => {
                // The last, short block: padded with spaces, which are whitespace.
                let mut block = [b' '; 64];
                block[..rest.len()].copy_from_slice(rest);
                classify_best(&block, self.avx2)
            }
        };
        self.base = start;
        self.next = start + 64;

        self.backslash |= m.backslash != 0;
        self.long_string = m.quote & (m.quote.wrapping_sub(1)) == 0;
        let escaped = self.escapes(m.backslash)?;
        let quote = m.quote & !escaped;
        let mut inside = prefix_xor(quote);
        if self.in_string {
            inside = !inside;
        }
        self.in_string = inside >> 63 == 1;
        // Control bytes: never inside a string, and outside one only as whitespace.
        if m.ctrl & (inside | !m.ws) != 0 {
            return Err(Punt);
        }
        let scalar = !(m.structural | m.ws | m.quote | inside);
        let scalar_start = scalar & !(scalar << 1 | u64::from(self.scalar_carry));
        self.scalar_carry = scalar >> 63 == 1;
        self.bits = (m.structural & !inside) | quote | scalar_start;
        Ok(())
    }

    /// The bytes of this block escaped by a backslash, each checked to be an escape JSON has.
    fn escapes(&mut self, backslash: u64) -> Scan<u64> {
        let mut escaped = u64::from(self.escape_carry);
        self.escape_carry = false;
        let mut bs = backslash & !escaped;
        while bs != 0 {
            let k = bs.trailing_zeros();
            bs &= bs - 1;
            if k == 63 {
                self.escape_carry = true;
            } else {
                escaped |= 1 << (k + 1);
                bs &= !(1 << (k + 1));
            }
        }
        let mut each = escaped;
        while each != 0 {
            let at = self.base + each.trailing_zeros() as usize;
            each &= each - 1;
            self.check_escape(at)?;
        }
        Ok(escaped)
    }

    /// The escaped byte at `at` (after its backslash): one JSON has, and a `\u` escape of a
    /// surrogate only as a high-low pair.
    fn check_escape(&mut self, at: usize) -> Scan<()> {
        match self.b.get(at) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(()),
            Some(b'u') => match hex4(self.b, at + 1)? {
                0xD800..=0xDBFF => {
                    if self.b.get(at + 5..at + 7) != Some(b"\\u") {
                        return Err(Punt);
                    }
                    if !(0xDC00..=0xDFFF).contains(&hex4(self.b, at + 7)?) {
                        return Err(Punt);
                    }
                    self.paired_low = at + 6;
                    Ok(())
                }
                0xDC00..=0xDFFF if at != self.paired_low => Err(Punt),
                _ => Ok(()),
            },
            _ => Err(Punt),
        }
    }
}

#[cfg(test)]
#[path = "blocks_tests.rs"]
mod tests;
