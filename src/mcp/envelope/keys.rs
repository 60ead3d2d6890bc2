//! The keys of one object, for the [scanner](super::scanner): a (case-folded) duplicate makes
//! the scan punt. Up to eight keys are compared one by one on the stack (most objects); past
//! that an open-addressing table of folded hashes keeps the check linear in the object's size.

use super::scanner::{Punt, Scan};
use crate::mcp::strict::{fold_chars, fold_eq};

/// An object key (never escaped: the scan punts on escaped keys).
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    pub raw: &'a str,
    ascii: bool,
}

impl<'a> Key<'a> {
    /// `ascii`: the key has no byte above 0x7f.
    pub fn new(raw: &'a str, ascii: bool) -> Self {
        Key { raw, ascii }
    }

    /// Whether a case-folding reader takes the two keys for one member.
    fn same(&self, o: &Key) -> bool {
        if self.ascii && o.ascii {
            self.raw.eq_ignore_ascii_case(o.raw)
        } else {
            fold_eq(self.raw, o.raw)
        }
    }

    /// Length and first and last byte, case folded, of an ASCII key: equal for keys that
    /// [`Key::same`] joins. Keys with other characters (whose folded length may differ) get
    /// [`ANY`], which always compares in full.
    fn fingerprint(&self) -> u32 {
        match self.raw.as_bytes() {
            _ if !self.ascii => ANY,
            [] => 0,
            [first, .., last] | [first @ last] => {
                let len = self.raw.len().min(0xfff) as u32;
                len << 16
                    | u32::from(first.to_ascii_lowercase()) << 8
                    | u32::from(last.to_ascii_lowercase())
            }
        }
    }

    /// A hash of the folded key: equal for keys that [`Key::same`] joins (both hash the bytes
    /// of the folded key; an ASCII key is lowercased eight bytes at a time on the way).
    fn fold_hash(&self) -> u64 {
        if self.ascii {
            return word_hash(self.raw.as_bytes(), true);
        }
        let folded: String = fold_chars(self.raw).collect();
        word_hash(folded.as_bytes(), false)
    }
}

/// FxHash-style over 8-byte words, finished with murmur3's fmix64. With `lower`, the bytes (all
/// ASCII) are lowercased first: A-Z found by SWAR (no byte of an ASCII word carries over).
fn word_hash(bytes: &[u8], lower: bool) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let fold = |w: u64| {
        if !lower {
            return w;
        }
        let upper =
            (w.wrapping_add(ONES * 0x3f) ^ w.wrapping_add(ONES * 0x25)) & !w & (ONES * 0x80);
        w | (upper >> 2)
    };
    let mut h = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    let mut step = |w: u64| h = (h.rotate_left(5) ^ fold(w)).wrapping_mul(0x517c_c1b7_2722_0a95);
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

/// Keys compared one by one up to this many members; a table past it.
const LINEAR: usize = 8;

/// The fingerprint of a key that is not all ASCII.
const ANY: u32 = u32::MAX;

/// The keys of one object so far, to refuse (folded) duplicates.
pub struct Seen<'a> {
    first: [Key<'a>; LINEAR],
    prints: [u32; LINEAR],
    /// Some key so far is not all ASCII (its fingerprint is [`ANY`]).
    wide: bool,
    n: usize,
    table: Option<Table<'a>>,
}

impl<'a> Seen<'a> {
    pub fn new() -> Self {
        Seen {
            first: [Key {
                raw: "",
                ascii: true,
            }; LINEAR],
            prints: [0; LINEAR],
            wide: false,
            n: 0,
            table: None,
        }
    }

    pub fn note(&mut self, k: Key<'a>) -> Scan<()> {
        if self.n < LINEAR {
            let fp = k.fingerprint();
            // The common case: all ASCII so far and no equal fingerprint, so no equal key.
            let prints = &self.prints[..self.n];
            if fp != ANY && !self.wide && !prints.contains(&fp) {
                self.first[self.n] = k;
                self.prints[self.n] = fp;
                self.n += 1;
                return Ok(());
            }
            self.wide |= fp == ANY;
            for (p, pfp) in self.first[..self.n].iter().zip(&self.prints) {
                if (*pfp == fp || *pfp == ANY || fp == ANY) && p.same(&k) {
                    return Err(Punt);
                }
            }
            self.first[self.n] = k;
            self.prints[self.n] = fp;
        } else {
            let first = &self.first;
            let t = self.table.get_or_insert_with(|| Table::with(first));
            t.insert(k)?;
        }
        self.n += 1;
        Ok(())
    }
}

/// An open-addressing set of folded keys for wide objects. The hash is not keyed, so the total
/// probe length is bounded: a crafted set of colliding keys makes the scan punt, and the serde
/// walk (a keyed hash set) reads the object in linear time instead.
struct Table<'a> {
    keys: Vec<Key<'a>>,
    /// (hash, index into `keys` + 1); 0 is an empty slot.
    slots: Vec<(u32, u32)>,
    probes: usize,
}

impl<'a> Table<'a> {
    fn with(first: &[Key<'a>]) -> Self {
        let mut t = Table {
            keys: Vec::with_capacity(64),
            slots: vec![(0, 0); 128],
            probes: 0,
        };
        for k in first {
            // The first keys are already known to be distinct.
            let h = k.fold_hash() >> 32;
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

    fn insert(&mut self, k: Key<'a>) -> Scan<()> {
        let h = (k.fold_hash() >> 32) as u32;
        let mask = self.slots.len() - 1;
        let mut at = (h as usize) & mask;
        while let (sh, idx @ 1..) = self.slots[at] {
            if sh == h && self.keys[idx as usize - 1].same(&k) {
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
