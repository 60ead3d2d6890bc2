//! Lower-case hex: the one spelling of bytes as text the project writes (task-id owner hints,
//! Redis limit keys, state-key ids, nonces, digests in logs and test fixtures).

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Append `bytes` to `out` as lower-case hex.
pub(crate) fn push(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
}

/// `bytes` as lower-case hex.
pub fn encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push(&mut s, bytes);
    s
}

/// The hex digit of a nibble (`0..16`).
pub(crate) fn digit(nibble: u8) -> u8 {
    DIGITS[usize::from(nibble & 15)]
}

#[cfg(test)]
mod tests {
    #[test]
    fn lower_case_two_digits_a_byte() {
        assert_eq!(super::encode(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        let mut s = String::from("k:");
        super::push(&mut s, &[0xbe, 0xef]);
        assert_eq!(s, "k:beef");
        assert_eq!(super::digit(11), b'b');
    }
}
