//! Query strings as the frameworks behind the gateway read them: the one reader of query keys.
//!
//! The gateway decides on a query key (today: a bearer token sent as `access_token`, which MCP
//! forbids, RFC 6750 §2.3 notwithstanding) before a framework upstream reads the same query its
//! own way. So the refusal is not a list of spellings: a key is taken to *name* a parameter when
//! the rules of any common reader turn it into that name. The readers and their rules:
//!
//! | reader | splits pairs on | decodes | key name |
//! |---|---|---|---|
//! | WHATWG `URLSearchParams` | `&` | `+` → space, `%XX` | as is; a leading `?` of the whole string dropped |
//! | Go `net/url` | `&` (`;` before 1.17) | `+`, `%XX` (a bad escape drops the pair) | as is |
//! | Python `parse_qs(l)` | `&` (`;` before 3.9.2) | `+`, `%XX` (a bad escape kept) | as is, not stripped |
//! | Rack | `&` (`;` before 3.0) | `+`, `%XX` | leading `[`/`]` skipped, then up to the next bracket: `access_token[]`, `[access_token]`, `access_token]x` |
//! | PHP | `&` (`arg_separator.input`, often `&;`) | `+`, `%XX` | leading spaces dropped; ` `, `.`, `[` become `_` (bytes 0x80–0x9F too, reported of older builds); `name[…]` is the array `name` |
//! | Java servlets | `&` | `%XX` (`%uXXXX` on IIS-era containers) | as is |
//! | Express `qs` | `&` | `+`, `%XX` | `name[…]`, `[name]`; with `allowDots`, `name.x` and `.name`; `ignoreQueryPrefix` drops a `?` |
//! | ASP.NET, nginx, C readers | `&` | `%uXXXX`; a malformed `%X` dropped (nginx) | a NUL ends the name; `Trim()` drops blanks |
//! | case-insensitive frameworks | | | names compared without case |
//!
//! From which, for each pair (split on `&` **and** `;`; the key is what precedes the first `=`,
//! the whole pair without one) and each decoding of its key (below), the key names `name` when
//! one of these readings of it equals `name` ignoring case:
//!
//! 1. the key, cut at a NUL, trimmed of blanks (whitespace and control characters) at both ends
//!    and of `?` at the start (query-prefix readers), with PHP's mangling: ` `, `.`, `[` and a
//!    byte that is not UTF-8 (0x80–0x9F in PHP's case) read as `_`;
//! 2. the bracket base: after leading brackets, the run up to the next `[` or `]` (Rack, `qs`,
//!    PHP arrays), with the same mangling (PHP's `access.token[]`);
//! 3. the dotted base: the same with `.` a separator too (`qs` with `allowDots`).
//!
//! Case is compared with the strict JSON reader's fold ([`super::strict::fold_char`]: ASCII case
//! and the Unicode characters such as `ſ` or the Kelvin sign that fold onto ASCII letters).
//!
//! **Decodings.** Every reader decodes a key once: `+` is a space, `%XX` a byte, `%uXXXX` a code
//! point (IIS, JavaScript's `unescape`); a malformed `%` is read both ways readers read it: kept
//! as a literal (PHP, Python, Node) and dropped with the hex digit after it (nginx). No common
//! reader decodes a key twice by default; a chain can (a proxy or a router that decodes before
//! a framework decodes again, Apache `mod_rewrite` without `[B]`), so keys are read again after
//! up to [`MAX_DECODES`] decodings (`access%255Ftoken`), and a key that still decodes after that
//! is taken to name anything (no client encodes a key that deep). It costs nothing for a key
//! without `%` or `+`. Values are not decoded: no reader takes a key out of a value.
//!
//! This refuses a little more than any one reader would read as the name (a `[` that PHP would
//! keep, a `?` before a later key); that is the point. Cost: a key without `%` or `+` is read
//! in place, without allocating; only the decodings of an encoded key are built.
//! [`decode_component`] is the plain, strict decoding for the gateway's own endpoints, where the
//! gateway is the only reader. No I/O.

use super::strict::fold_char;

/// How many decodings of a key are read (a client, a proxy and a framework can each decode).
pub(crate) const MAX_DECODES: usize = 3;

/// The raw `(key, value)` pairs of a query string, split on `&` and `;`, not decoded.
pub(crate) fn pairs(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query
        .split(['&', ';'])
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
}

/// Whether some key of `query` may name the parameter `name` for a reader behind.
pub(crate) fn has_key(query: Option<&str>, name: &str) -> bool {
    query.is_some_and(|q| pairs(q).any(|(k, _)| names(k, name)))
}

/// Whether a reader could read the raw key `raw` (as it appears in the query) as `name`.
pub(crate) fn names(raw: &str, name: &str) -> bool {
    if reads_as(raw.as_bytes(), name) {
        return true;
    }
    let mut next = decode_all(std::iter::once(raw.as_bytes()));
    for _ in 0..MAX_DECODES {
        if next.is_empty() {
            return false;
        }
        if next.iter().any(|k| reads_as(k, name)) {
            return true;
        }
        next = decode_all(next.iter().map(Vec::as_slice));
    }
    // Still decoding: what it finally becomes is anyone's guess.
    !next.is_empty()
}

/// The distinct next decodings of these readings (empty when none of them decodes).
fn decode_all<'a>(readings: impl Iterator<Item = &'a [u8]>) -> Vec<Vec<u8>> {
    let mut next: Vec<Vec<u8>> = Vec::new();
    for k in readings {
        for d in decodings(k).into_iter().flatten() {
            if !next.contains(&d) {
                next.push(d);
            }
        }
    }
    next
}

/// A character a reader drops around a name: whitespace, control characters, a BOM.
fn blank(c: char) -> bool {
    c.is_whitespace() || c.is_control() || c == '\u{feff}'
}

/// Whether one decoded key is `name` for some reader (the readings of the module doc).
fn reads_as(key: &[u8], name: &str) -> bool {
    let key = key.split(|b| *b == 0).next().unwrap_or_default();
    // Borrowed when UTF-8 (always, before decoding); a stray byte becomes U+FFFD.
    let key = String::from_utf8_lossy(key);
    let key = key
        .trim_start_matches(|c| blank(c) || c == '?')
        .trim_end_matches(blank);
    same(key, name) || same(base(key, &['[', ']']), name) || same(base(key, &['[', ']', '.']), name)
}

/// The first run of `key` between `stops` (leading ones skipped), trimmed of blanks.
fn base<'k>(key: &'k str, stops: &[char]) -> &'k str {
    let rest = key.trim_start_matches(|c| stops.contains(&c) || blank(c));
    let end = rest.find(|c| stops.contains(&c)).unwrap_or(rest.len());
    rest[..end].trim_end_matches(blank)
}

/// Whether `key` is `name` without case, PHP's mangled characters reading as `_`.
fn same(key: &str, name: &str) -> bool {
    let mut k = key.chars().flat_map(fold_char);
    let mut n = name.chars().flat_map(fold_char);
    loop {
        match (k.next(), n.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a == b || (b == '_' && php_underscore(a)) => {}
            _ => return false,
        }
    }
}

/// A character PHP turns into `_` in a variable name (U+FFFD: a byte that was not UTF-8, which
/// may have been one of 0x80–0x9F).
fn php_underscore(c: char) -> bool {
    matches!(c, ' ' | '.' | '[' | '\u{fffd}')
}

/// The next decodings of a key: the readings that keep its malformed escapes as literals and
/// that drop them (the same when it has none); `None` where decoding changes nothing.
fn decodings(s: &[u8]) -> [Option<Vec<u8>>; 2] {
    if !s.iter().any(|b| *b == b'%' || *b == b'+') {
        return [None, None];
    }
    let (mut keep, mut drop) = (Vec::with_capacity(s.len()), Vec::with_capacity(s.len()));
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            if let Some((bytes, len, used)) = escape(&s[i + 1..]) {
                keep.extend_from_slice(&bytes[..len]);
                drop.extend_from_slice(&bytes[..len]);
                i += 1 + used;
            } else {
                // Malformed: kept as is, or (nginx) the `%` and a hex digit after it dropped.
                let skip = usize::from(s.get(i + 1).is_some_and(u8::is_ascii_hexdigit));
                keep.extend_from_slice(&s[i..=i + skip]);
                i += 1 + skip;
            }
            continue;
        }
        let b = if s[i] == b'+' { b' ' } else { s[i] };
        keep.push(b);
        drop.push(b);
        i += 1;
    }
    let changed = |v: Vec<u8>| (v != s).then_some(v);
    [changed(keep), changed(drop)]
}

/// A well-formed escape after a `%`: `XX` (one byte) or `uXXXX` (a code point, as UTF-8): its
/// bytes, how many, and how many input bytes it used.
fn escape(rest: &[u8]) -> Option<([u8; 4], usize, usize)> {
    let mut out = [0u8; 4];
    if let Some(b) = hex(rest.get(..2)?) {
        out[0] = b as u8;
        return Some((out, 1, 2));
    }
    let code = rest
        .strip_prefix(b"u")
        .or_else(|| rest.strip_prefix(b"U"))?;
    let c = char::from_u32(hex(code.get(..4)?)?)?;
    let len = c.encode_utf8(&mut out).len();
    Some((out, len, 5))
}

/// The value of a run of hex digits.
fn hex(digits: &[u8]) -> Option<u32> {
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    digits
        .iter()
        .try_fold(0u32, |v, d| Some(v * 16 + (*d as char).to_digit(16)?))
}

/// One query component decoded once, strictly, as `application/x-www-form-urlencoded`: `+` a
/// space, `%XX` a byte. `None` when an escape is malformed or the bytes are not UTF-8.
pub(crate) fn decode_component(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                out.push(hex(b.get(i + 1..i + 3)?)? as u8);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests;
