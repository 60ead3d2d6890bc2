//! Where a JSON string ends, read fast: its plain bytes passed over a 64-bit word at a time (one
//! SWAR test, [`stops`], for a quote, a backslash or a control byte), the byte that needs a look
//! read alone ([`one_byte`]): no raw control character, each escape one JSON knows, and whether
//! any escape is in it (a key with one is refused by the span reader).

/// One past the closing quote of the string opening at `i`: no raw control character in it,
/// each escape one JSON knows.
pub(super) fn string_end(s: &[u8], i: usize) -> Option<usize> {
    Some(scan_string(s, i)?.0)
}

/// [`string_end`], and whether the string holds an escape. Plain bytes are passed over eight
/// at a time ([`stops`]); a byte that needs a look is read alone.
pub(super) fn scan_string(s: &[u8], i: usize) -> Option<(usize, bool)> {
    if s.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    let mut escaped = false;
    loop {
        while let Some(eight) = s.get(j..j + 8) {
            let word = u64::from_le_bytes(eight.try_into().expect("eight bytes"));
            let at = stops(word);
            if at != 0 {
                // The lowest flag is exact (a borrow only carries upward, past a true one).
                let stop = (at.trailing_zeros() / 8) as usize;
                j += stop;
                // The common stop, the closing quote, ends it here.
                if eight[stop] == b'"' {
                    return Some((j + 1, escaped));
                }
                break;
            }
            j += 8;
        }
        match one_byte(s, j, &mut escaped)? {
            Ok(n) => j += n,
            Err(end) => return Some((end, escaped)),
        }
    }
}

/// The string's byte at `j` read alone: `Ok`: how far the string goes on; `Err`: it ends, one
/// past this closing quote; `None`: no string (a control byte, an unknown escape, the end of
/// the text). An escape sets `escaped`.
fn one_byte(s: &[u8], j: usize, escaped: &mut bool) -> Option<Result<usize, usize>> {
    Some(match *s.get(j)? {
        b'"' => Err(j + 1),
        0..=0x1f => return None,
        b'\\' => {
            *escaped = true;
            Ok(escape_len(s, j)?)
        }
        _ => Ok(1),
    })
}

/// The length of the escape at `j` (its backslash), when it is one JSON knows.
fn escape_len(s: &[u8], j: usize) -> Option<usize> {
    match *s.get(j + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(2),
        b'u' if s.get(j + 2..j + 6)?.iter().all(u8::is_ascii_hexdigit) => Some(6),
        _ => None,
    }
}

/// A flag (the byte's high bit) on each byte of `word` (eight bytes, the first lowest) that
/// ends a string's plain run: `"`, `\`, or a control character below 0x20. Bytes past the
/// first flagged one may be flagged wrongly; the first never is.
fn stops(word: u64) -> u64 {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = ONES * 0x80;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    zero(word ^ (ONES * u64::from(b'"'))) | zero(word ^ (ONES * u64::from(b'\\'))) | below_space
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The string scan a byte at a time, as it was before the eight-byte runs (each byte read
    /// by the same [`one_byte`]: what is held to it is the runs).
    fn scan_bytewise(s: &[u8], i: usize) -> Option<(usize, bool)> {
        if s.get(i) != Some(&b'"') {
            return None;
        }
        let (mut j, mut escaped) = (i + 1, false);
        loop {
            match one_byte(s, j, &mut escaped)? {
                Ok(n) => j += n,
                Err(end) => return Some((end, escaped)),
            }
        }
    }

    #[test]
    fn the_eight_byte_scan_reads_every_string_as_the_bytewise_scan() {
        // Every string of up to four bytes from an alphabet of the bytes that matter (and
        // their neighbours), after 0 to 9 plain bytes (so each byte falls at each place of an
        // eight-byte word, and at the tail), with and without a closing tail.
        let alphabet = [
            b'"', b'\\', b'a', b'u', b'0', 0x00, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xff,
        ];
        let n = alphabet.len();
        let mut checked = 0;
        for len in 0..=4u32 {
            for code in 0..n.pow(len) {
                let mut body: Vec<u8> = (0..len as usize)
                    .map(|d| alphabet[code / n.pow(d as u32) % n])
                    .collect();
                for lead in 0..=9 {
                    for tail in [&b""[..], b"\"xyzxyzxyz"] {
                        let mut s = vec![b'"'];
                        s.extend(std::iter::repeat_n(b'x', lead));
                        s.append(&mut body.clone());
                        s.extend_from_slice(tail);
                        assert_eq!(scan_string(&s, 0), scan_bytewise(&s, 0), "{s:?}");
                        checked += 1;
                    }
                }
                body.clear();
            }
        }
        assert!(checked > 700_000);
    }
}
