//! The cursors of merged lists. A cursor is the gateway's, not a server's: it names the
//! endpoint, the list, the offset and a digest of the exact list it pages (the caller's own
//! view, in order). Nothing in it is secret — a caller learns nothing it could not page to —
//! but nothing is trusted either: a cursor is honoured only when every field matches the list
//! the gateway would answer now, so a forged, foreign or stale cursor gets -32602, the answer a
//! server gives for an invalid cursor, and the client lists again from the start. It needs no
//! key, so any replica of the gateway honours another's cursor for the same fleet.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

const VERSION: &str = "mcp-edge-c1";

/// A digest of a list: its exposed names in order.
pub(crate) fn digest<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut h = Sha256::new();
    for n in names {
        h.update((n.len() as u64).to_le_bytes());
        h.update(n.as_bytes());
    }
    URL_SAFE_NO_PAD.encode(&h.finalize()[..12])
}

/// The cursor of the page at `offset` of the list `digest` of `method` on endpoint `path`.
pub(crate) fn make(path: &str, method: &str, offset: usize, digest: &str) -> String {
    let text = format!("{VERSION}\n{path}\n{method}\n{offset}\n{digest}");
    URL_SAFE_NO_PAD.encode(text)
}

/// The offset a cursor names, if it is one of ours for this endpoint, method and list.
pub(crate) fn open(
    cursor: &str,
    path: &str,
    method: &str,
    digest: &str,
    len: usize,
) -> Result<usize, &'static str> {
    if cursor.len() > 1024 {
        return Err("the cursor is not one this gateway issued");
    }
    let raw = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| "the cursor is not one this gateway issued")?;
    let text = String::from_utf8(raw).map_err(|_| "the cursor is not one this gateway issued")?;
    let f: Vec<&str> = text.split('\n').collect();
    let [v, p, m, o, d] = f[..] else {
        return Err("the cursor is not one this gateway issued");
    };
    if v != VERSION || p != path || m != method {
        return Err("the cursor belongs to another endpoint or list");
    }
    let offset: usize = o
        .parse()
        .map_err(|_| "the cursor is not one this gateway issued")?;
    if d != digest || offset == 0 || offset >= len {
        return Err("the list changed since this cursor was issued; list again without a cursor");
    }
    Ok(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_opens_only_for_its_own_list() {
        let d = digest(["a", "b", "c"].into_iter());
        let c = make("/mcp", "tools/list", 2, &d);
        assert_eq!(open(&c, "/mcp", "tools/list", &d, 3), Ok(2));
        assert!(open(&c, "/mcp/other", "tools/list", &d, 3).is_err());
        assert!(open(&c, "/mcp", "prompts/list", &d, 3).is_err());
        let changed = digest(["a", "b", "x"].into_iter());
        assert!(open(&c, "/mcp", "tools/list", &changed, 3).is_err());
        assert!(
            open(&c, "/mcp", "tools/list", &d, 2).is_err(),
            "past the end"
        );
        assert!(open("not-a-cursor!", "/mcp", "tools/list", &d, 3).is_err());
        let forged = URL_SAFE_NO_PAD.encode(format!("{VERSION}\n/mcp\ntools/list\n99\n{d}"));
        assert!(open(&forged, "/mcp", "tools/list", &d, 3).is_err());
        // Names are length-prefixed: ["ab","c"] and ["a","bc"] differ.
        assert_ne!(
            digest(["ab", "c"].into_iter()),
            digest(["a", "bc"].into_iter())
        );
    }
}
