//! The keys of one object, for the [scanner](super::scanner): a (case-folded) duplicate makes
//! the scan punt. For up to eight keys, a two-bit filter of each key's 32-bit hash tells most
//! new keys apart at once, and a key the filter may have seen is compared in full with the
//! earlier ones; past that an open-addressing table of folded hashes keeps the check linear in
//! the object's size.
//!
//! A key is its place in the body (two offsets) and its hash: it stays in registers, and its
//! text is looked at again only when two hashes are equal.

use super::punt::{Punt, Scan};
use crate::mcp::strict::{fold_chars, fold_eq};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = ONES * 0x80;

/// An object key (never escaped: the scan punts on escaped keys): `body[start..end]`.
#[derive(Debug, Clone, Copy)]
struct Key {
    /// `start << 32 | end`.
    span: u64,
    /// Equal for keys that [`Key::same`] joins when both are ASCII: a hash of the first and last
    /// eight bytes and the length, each byte with bit 0x20 set (which joins `A` and `a`, and a
    /// few pairs of other characters: equal hashes are then compared in full). Any value for
    /// other keys, which are compared in full with every key.
    ident: u32,
    ascii: bool,
}

impl Key {
    /// The key `body[start..end]` (a range the caller has read); `ascii`: it has no byte above
    /// 0x7f.
    fn new(body: &str, start: usize, end: usize, ascii: bool) -> Self {
        let raw = &body.as_bytes()[start..end];
        let ident = match raw.len() {
            _ if !ascii => 0,
            0..=8 => short_ident(raw),
            n => ident(coarse(&raw[..8]), coarse(&raw[n - 8..]) ^ n as u64),
        };
        Key {
            span: span(start, end),
            ident,
            ascii,
        }
    }

    /// The key `body[start..end]`, read as one word, when it is all ASCII, has no backslash and
    /// is one to eight bytes long (most keys); `None` for any other key. Without
    /// `maybe_backslash` the caller knows the key has none.
    #[inline(always)]
    fn word(body: &str, start: usize, end: usize, maybe_backslash: bool) -> Option<Self> {
        let len = end.wrapping_sub(start);
        let word = body.as_bytes().get(start..start + 8);
        let word = word.filter(|_| len.wrapping_sub(1) < 8)?;
        let mask = !0u64 >> (64 - 8 * len);
        let w = u64::from_le_bytes(word.try_into().expect("8 bytes")) & mask;
        if !plain(w, maybe_backslash) {
            return None;
        }
        Some(Key {
            span: span(start, end),
            ident: ident((w | (ONES * 0x20)) & mask, 0),
            ascii: true,
        })
    }

    /// The same for a key of nine to sixteen bytes, read as two (overlapping) words: its first
    /// eight bytes and its last eight.
    fn two_words(body: &str, start: usize, end: usize, maybe_backslash: bool) -> Option<Self> {
        let len = end.wrapping_sub(start);
        if len.wrapping_sub(9) >= 8 {
            return None;
        }
        let load = |at: usize| {
            let w = body.as_bytes().get(at..at + 8)?;
            Some(u64::from_le_bytes(w.try_into().expect("8 bytes")))
        };
        let (first, last) = (load(start)?, load(end - 8)?);
        if !plain(first, maybe_backslash) || !plain(last, maybe_backslash) {
            return None;
        }
        Some(Key {
            span: span(start, end),
            ident: ident(first | (ONES * 0x20), (last | (ONES * 0x20)) ^ len as u64),
            ascii: true,
        })
    }

    fn raw<'a>(&self, body: &'a str) -> &'a str {
        &body[(self.span >> 32) as usize..(self.span as u32) as usize]
    }

    /// Whether a case-folding reader takes the two keys for one member.
    fn same(&self, o: &Key, body: &str) -> bool {
        if self.ascii && o.ascii {
            self.raw(body).eq_ignore_ascii_case(o.raw(body))
        } else {
            fold_eq(self.raw(body), o.raw(body))
        }
    }

    /// The hash of the key in the table: equal for keys that [`Key::same`] joins. Both hash
    /// the folded key, the ident's way when it is at most eight bytes long (so an ASCII key's
    /// is its ident), or all its bytes, lowercased eight at a time.
    fn table_hash(&self, body: &str) -> u32 {
        let raw = self.raw(body);
        let long = |b: &[u8]| (word_hash(b) >> 32) as u32;
        match (self.ascii, raw.len()) {
            (true, 0..=8) => self.ident,
            (true, _) => long(raw.as_bytes()),
            (false, _) => {
                let folded: String = fold_chars(raw).collect();
                match folded.len() {
                    0..=8 => short_ident(folded.as_bytes()),
                    _ => long(folded.as_bytes()),
                }
            }
        }
    }
}

/// Whether the word is all ASCII and (when it may have one) has no backslash.
#[inline(always)]
fn plain(w: u64, maybe_backslash: bool) -> bool {
    let x = w ^ (ONES * u64::from(b'\\'));
    w & HIGH == 0 && (!maybe_backslash || x.wrapping_sub(ONES) & !x & HIGH == 0)
}

/// Both offsets in one word (bodies are below 4 GiB: [`Scanner::new`] refuses bigger ones).
///
/// [`Scanner::new`]: super::scanner::Scanner::new
#[inline(always)]
fn span(start: usize, end: usize) -> u64 {
    (start as u64) << 32 | end as u64
}

/// A 32-bit hash of a key's words (each byte with bit 0x20 set: see [`Key::ident`]).
#[inline(always)]
fn ident(a: u64, b: u64) -> u32 {
    // The high half folded onto the low one first: the product's upper bits (the hash) then
    // depend on every byte, and so do its lowest bits (the table's slot, the filter's bits).
    let x = a ^ b.rotate_left(29);
    let h = (x ^ (x >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 32) as u32
}

/// Up to eight bytes as one word, each with bit 0x20 set (zero past the end).
fn coarse(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    for (w, c) in w.iter_mut().zip(b) {
        *w = c | 0x20;
    }
    u64::from_le_bytes(w)
}

/// The ident of a key of at most eight bytes, as [`Key::word`] computes it.
fn short_ident(b: &[u8]) -> u32 {
    ident(coarse(b), 0)
}

/// The ASCII bytes of `w` lowercased: A-Z found by SWAR (no byte of an ASCII word carries over).
#[inline]
fn lower(w: u64) -> u64 {
    let upper = (w.wrapping_add(ONES * 0x3f) ^ w.wrapping_add(ONES * 0x25)) & !w & HIGH;
    w | (upper >> 2)
}

/// FxHash-style over 8-byte words, finished with murmur3's fmix64, the ASCII letters lowercased
/// first (so that case variants hash alike; other bytes are left as they are).
fn word_hash(bytes: &[u8]) -> u64 {
    let mut h = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    let mut step = |w: u64| {
        h = (h.rotate_left(5) ^ lower(w)).wrapping_mul(0x517c_c1b7_2722_0a95);
    };
    for w in &mut words {
        step(u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        step(u64::from_le_bytes(last));
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// Keys compared by hash up to this many members; a table past it.
const LINEAR: usize = 8;

/// The keys of one object so far, to refuse (folded) duplicates.
pub(crate) struct Seen<'a> {
    body: &'a str,
    /// The first keys' spans (their hashes are computed again when needed: rarely).
    spans: [u64; LINEAR],
    /// Two bits of each hash so far: a key whose two bits are not both set has a hash not seen
    /// yet (most keys), and costs a test.
    bloom: u64,
    /// Some key so far is not all ASCII.
    wide: bool,
    n: usize,
    table: Option<Table>,
}

impl<'a> Seen<'a> {
    /// The keys of an object in `body`.
    #[inline(always)]
    pub(crate) fn new(body: &'a str) -> Self {
        Seen {
            body,
            spans: [0; LINEAR],
            bloom: 0,
            wide: false,
            n: 0,
            table: None,
        }
    }

    /// The key `body[start..end]` (between its quotes): `Punt` if it has an escape or was seen
    /// before. Without `maybe_backslash` the caller knows the key has no backslash.
    #[inline(always)]
    pub(crate) fn note_at(&mut self, start: usize, end: usize, maybe_backslash: bool) -> Scan<()> {
        match Key::word(self.body, start, end, maybe_backslash) {
            Some(k) => self.note(k),
            None => match Key::two_words(self.body, start, end, maybe_backslash) {
                Some(k) => self.note(k),
                None => self.note_other(start, end),
            },
        }
    }

    #[cold]
    fn note_other(&mut self, start: usize, end: usize) -> Scan<()> {
        let raw = self.body.get(start..end).ok_or(Punt)?;
        if raw.contains('\\') {
            return Err(Punt);
        }
        self.note(Key::new(self.body, start, end, raw.is_ascii()))
    }

    #[inline(always)]
    fn note(&mut self, k: Key) -> Scan<()> {
        if self.n < LINEAR {
            // The common case: all ASCII so far and a hash not seen, so no equal key.
            let bits = 1u64 << (k.ident & 63) | 1u64 << ((k.ident >> 6) & 63);
            let fresh = self.bloom & bits != bits;
            self.bloom |= bits;
            if fresh && !self.wide && k.ascii {
                self.spans[self.n] = k.span;
                self.n += 1;
                return Ok(());
            }
            self.note_slow(k)
        } else {
            self.note_wide(k)
        }
    }

    /// A key whose hash equals an earlier one's, or one of them not all ASCII: compared in full.
    #[cold]
    fn note_slow(&mut self, k: Key) -> Scan<()> {
        self.wide |= !k.ascii;
        for p in self.first() {
            let candidate = p.ident == k.ident || !p.ascii || !k.ascii;
            if candidate && p.same(&k, self.body) {
                return Err(Punt);
            }
        }
        self.spans[self.n] = k.span;
        self.n += 1;
        Ok(())
    }

    /// The keys kept apart so far.
    fn first(&self) -> impl Iterator<Item = Key> + '_ {
        let body = self.body;
        self.spans[..self.n.min(LINEAR)].iter().map(move |&span| {
            let (start, end) = ((span >> 32) as usize, (span as u32) as usize);
            Key::new(body, start, end, body[start..end].is_ascii())
        })
    }

    /// A key past the first eight: into the table.
    fn note_wide(&mut self, k: Key) -> Scan<()> {
        if self.table.is_none() {
            let first: Vec<Key> = self.first().collect();
            self.table = Some(Table::with(&first, self.body));
        }
        let t = self.table.as_mut().expect("made above");
        t.insert(k, self.body)?;
        self.n += 1;
        Ok(())
    }
}

/// An open-addressing set of folded keys for wide objects. The hash is not keyed, so the total
/// probe length is bounded: a crafted set of colliding keys makes the scan punt, and the serde
/// walk (a keyed hash set) reads the object in linear time instead.
struct Table {
    keys: Vec<Key>,
    /// (hash, index into `keys` + 1); 0 is an empty slot.
    slots: Vec<(u32, u32)>,
    probes: usize,
}

impl Table {
    fn with(first: &[Key], body: &str) -> Self {
        let mut t = Table {
            keys: Vec::with_capacity(64),
            slots: vec![(0, 0); 128],
            probes: 0,
        };
        for k in first {
            // The first keys are already known to be distinct.
            let h = k.table_hash(body);
            t.place(h, t.keys.len() as u32 + 1);
            t.keys.push(*k);
        }
        t
    }

    fn place(&mut self, h: u32, idx: u32) {
        let mask = self.slots.len() - 1;
        let mut at = (h as usize) & mask;
        while self.slots[at].1 != 0 {
            at = (at + 1) & mask;
        }
        self.slots[at] = (h, idx);
    }

    fn insert(&mut self, k: Key, body: &str) -> Scan<()> {
        let h = k.table_hash(body);
        let mask = self.slots.len() - 1;
        let mut at = (h as usize) & mask;
        while let (sh, idx @ 1..) = self.slots[at] {
            if sh == h && self.keys[idx as usize - 1].same(&k, body) {
                return Err(Punt);
            }
            self.probes += 1;
            at = (at + 1) & mask;
        }
        if self.probes > 8 * self.keys.len() + 1024 {
            return Err(Punt);
        }
        self.slots[at] = (h, self.keys.len() as u32 + 1);
        self.keys.push(k);
        if self.keys.len() * 2 > self.slots.len() {
            let wider = vec![(0, 0); self.slots.len() * 2];
            let old = std::mem::replace(&mut self.slots, wider);
            for (sh, idx) in old.into_iter().filter(|s| s.1 != 0) {
                self.place(sh, idx);
            }
        }
        Ok(())
    }
}
