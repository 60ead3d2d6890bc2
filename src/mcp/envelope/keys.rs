//! The keys of one object, for the [scanner](super::scanner): a (case-folded) duplicate makes
//! the scan punt. Up to eight keys are compared all at once by a 32-bit hash of the folded key
//! (most objects), and in full only when two hashes are equal; past that an open-addressing
//! table of folded hashes keeps the check linear in the object's size.
//!
//! A key is its place in the body (two offsets) and its hash: it stays in registers, and its
//! text is looked at again only when two hashes are equal.

use super::scanner::{Punt, Scan};
use crate::mcp::strict::{fold_chars, fold_eq};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = ONES * 0x80;

/// An object key (never escaped: the scan punts on escaped keys): `body[start..end]`.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// `start << 32 | end`.
    span: u64,
    /// Equal for keys that [`Key::same`] joins when both are ASCII (a hash of the lowercased
    /// length, first eight and last eight bytes); any value for other keys, which are compared
    /// in full with every key.
    ident: u32,
    ascii: bool,
}

impl Key {
    /// The key `body[start..end]`; `ascii`: it has no byte above 0x7f. Offsets past `u32`
    /// make the scan punt.
    pub fn new(body: &str, start: usize, end: usize, ascii: bool) -> Scan<Self> {
        let raw = body.get(start..end).ok_or(Punt)?.as_bytes();
        let word = |b: &[u8]| {
            let mut w = [0u8; 8];
            w[..b.len()].copy_from_slice(b);
            lower(u64::from_le_bytes(w))
        };
        let ident = match raw.len() {
            _ if !ascii => 0,
            0..=8 => ident(word(raw), 0),
            n => ident(word(&raw[..8]), word(&raw[n - 8..]) ^ n as u64),
        };
        Ok(Key {
            span: span(start, end).ok_or(Punt)?,
            ident,
            ascii,
        })
    }

    /// The key `body[start..end]`, read as one word, when it is all ASCII, has no backslash and
    /// is at most eight bytes long (most keys); `None` for any other key.
    #[inline(always)]
    fn word(body: &str, start: usize, end: usize) -> Option<Self> {
        let len = end.wrapping_sub(start);
        let word = body.as_bytes().get(start..start + 8).filter(|_| len <= 8)?;
        let mask = if len == 0 { 0 } else { !0u64 >> (64 - 8 * len) };
        let w = u64::from_le_bytes(word.try_into().expect("8 bytes")) & mask;
        let x = w ^ (ONES * u64::from(b'\\'));
        let backslash = x.wrapping_sub(ONES) & !x & HIGH;
        if w & HIGH != 0 || backslash != 0 {
            return None;
        }
        Some(Key {
            span: span(start, end)?,
            ident: ident(lower(w), 0),
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

    /// A hash of the folded key: equal for keys that [`Key::same`] joins (both hash the bytes
    /// of the folded key; an ASCII key is lowercased eight bytes at a time on the way).
    fn fold_hash(&self, body: &str) -> u64 {
        let raw = self.raw(body);
        if self.ascii {
            return word_hash(raw.as_bytes(), true);
        }
        let folded: String = fold_chars(raw).collect();
        word_hash(folded.as_bytes(), false)
    }
}

/// Both offsets in one word; `None` past `u32`.
#[inline(always)]
fn span(start: usize, end: usize) -> Option<u64> {
    Some(u64::from(u32::try_from(start).ok()?) << 32 | u64::from(u32::try_from(end).ok()?))
}

/// A 32-bit hash of a key's (lowercased) words.
#[inline(always)]
fn ident(a: u64, b: u64) -> u32 {
    let h = (a ^ b.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 32) as u32
}

/// The ASCII bytes of `w` lowercased: A-Z found by SWAR (no byte of an ASCII word carries over).
#[inline]
fn lower(w: u64) -> u64 {
    let upper = (w.wrapping_add(ONES * 0x3f) ^ w.wrapping_add(ONES * 0x25)) & !w & HIGH;
    w | (upper >> 2)
}

/// FxHash-style over 8-byte words, finished with murmur3's fmix64. With `fold`, the bytes (all
/// ASCII) are lowercased first.
fn word_hash(bytes: &[u8], fold: bool) -> u64 {
    let mut h = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    let mut step = |w: u64| {
        let w = if fold { lower(w) } else { w };
        h = (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
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
pub struct Seen<'a> {
    body: &'a str,
    /// The first keys' spans and hashes (apart, so that each is one store): the hashes are
    /// compared all at once.
    spans: [u64; LINEAR],
    idents: [u32; LINEAR],
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
    pub fn new(body: &'a str) -> Self {
        Seen {
            body,
            spans: [0; LINEAR],
            idents: [0; LINEAR],
            bloom: 0,
            wide: false,
            n: 0,
            table: None,
        }
    }

    /// The key `body[start..end]` (between its quotes), read by the bulk pass: `Punt` if it has
    /// an escape or was seen before.
    #[inline(always)]
    pub fn note_at(&mut self, start: usize, end: usize) -> Scan<()> {
        match Key::word(self.body, start, end) {
            Some(k) => self.note(k),
            None => self.note_other(start, end),
        }
    }

    #[cold]
    fn note_other(&mut self, start: usize, end: usize) -> Scan<()> {
        let raw = self.body.get(start..end).ok_or(Punt)?;
        if raw.contains('\\') {
            return Err(Punt);
        }
        self.note(Key::new(self.body, start, end, raw.is_ascii())?)
    }

    #[inline(always)]
    pub fn note(&mut self, k: Key) -> Scan<()> {
        if self.n < LINEAR {
            // The common case: all ASCII so far and a hash not seen, so no equal key.
            let bits = 1u64 << (k.ident & 63) | 1u64 << ((k.ident >> 6) & 63);
            let fresh = self.bloom & bits != bits;
            self.bloom |= bits;
            if fresh && !self.wide && k.ascii {
                self.spans[self.n] = k.span;
                self.idents[self.n] = k.ident;
                self.n += 1;
                return Ok(());
            }
            self.note_slow(k)
        } else {
            self.note_wide(k)
        }
    }

    /// Bit `i` set: key `i` so far has hash `h`.
    #[inline(always)]
    fn equal_hashes(&self, h: u32) -> u32 {
        let all = self.idents.iter().enumerate();
        let bits = all.fold(0u32, |m, (i, &x)| m | (u32::from(x == h) << i));
        bits & ((1u32 << self.n) - 1)
    }

    /// A key whose hash equals an earlier one's, or one of them not all ASCII: compared in full.
    #[cold]
    fn note_slow(&mut self, k: Key) -> Scan<()> {
        let equal = self.equal_hashes(k.ident);
        self.wide |= !k.ascii;
        for (i, p) in self.first().enumerate() {
            let candidate = equal & (1 << i) != 0 || !p.ascii || !k.ascii;
            if candidate && p.same(&k, self.body) {
                return Err(Punt);
            }
        }
        self.spans[self.n] = k.span;
        self.idents[self.n] = k.ident;
        self.n += 1;
        Ok(())
    }

    /// The keys kept apart so far.
    fn first(&self) -> impl Iterator<Item = Key> + '_ {
        let n = self.n.min(LINEAR);
        let body = self.body;
        let idents = self.idents[..n].iter();
        let spans = self.spans[..n].iter();
        spans.zip(idents).map(move |(&span, &ident)| {
            let raw = &body[(span >> 32) as usize..(span as u32) as usize];
            Key {
                span,
                ident,
                ascii: raw.is_ascii(),
            }
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
            let h = k.fold_hash(body) >> 32;
            t.place(h as u32, t.keys.len() as u32 + 1);
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
        let h = (k.fold_hash(body) >> 32) as u32;
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
