//! The strict JSON walker under [`super::envelope`]: it visits a whole document once and refuses
//! what two JSON readers could read differently.
//!
//! Readers disagree on documents with repeated members (one keeps the first, another the last),
//! and some readers match member names *without case*: Go's `encoding/json` folds names with
//! Unicode simple case folding (`"Name"`, `"NAME"` and `"ſ"`-for-`"s"` spellings all fill the field
//! `name`, the last one winning; CVE-2026-27896). So, in every object at any depth, two keys that
//! are equal **after case folding** are refused, exactly equal ones included. The fold used here,
//! [`fold_chars`], is per character `lowercase(uppercase(c))`; it joins every pair of characters
//! that Unicode simple folding joins (and a few more, e.g. `ß` with `ss`), so it refuses a
//! superset of what a folding reader could merge. Refusing a little more is safe; accepting a
//! document that a folding reader reads differently is not.
//!
//! Depth is bounded by [`MAX_DEPTH`]. Nothing is kept: callers (the envelope) pick the members
//! they need from the visits and delegate everything else to [`Walk`].

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};

/// How deep objects and arrays may nest (the envelope itself uses 4 levels).
pub(crate) const MAX_DEPTH: usize = 64;

/// Why a document was refused although it is JSON (the serde error is then only a carrier).
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub invalid: Option<(&'static str, String)>,
}

impl Faults {
    /// Record the first reason to refuse, and return the error that stops the walk.
    pub(crate) fn fail<E: de::Error>(&mut self, reason: &'static str, message: String) -> E {
        if self.invalid.is_none() {
            self.invalid = Some((reason, message));
        }
        E::custom("rejected")
    }
}

/// The characters of `s` as a case-folding reader compares them.
pub(crate) fn fold_chars(s: &str) -> impl Iterator<Item = char> + '_ {
    s.chars().flat_map(fold_char)
}

/// One character as a case-folding reader compares it (one or more characters).
pub(crate) fn fold_char(c: char) -> impl Iterator<Item = char> {
    let ascii = c.is_ascii().then(|| c.to_ascii_lowercase());
    let wide = (!c.is_ascii()).then(|| c.to_uppercase().flat_map(char::to_lowercase));
    ascii.into_iter().chain(wide.into_iter().flatten())
}

/// Whether two keys name the same member for a case-folding reader.
pub(crate) fn fold_eq(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        // The common case: no character outside ASCII can fold into ASCII here.
        return a.eq_ignore_ascii_case(b);
    }
    fold_chars(a).eq(fold_chars(b))
}

/// The known member `k` is a case variant of (equal after folding, not exactly), if any.
pub(crate) fn case_variant_of(k: &str, known: &[&'static str]) -> Option<&'static str> {
    known.iter().copied().find(|m| *m != k && fold_eq(m, k))
}

/// A key, borrowed from the input when it has no escapes.
pub(crate) struct Key<'de>(pub Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A key compared and hashed as a case-folding reader sees it.
#[derive(Clone)]
struct Folded<'de>(Cow<'de, str>);

impl PartialEq for Folded<'_> {
    fn eq(&self, o: &Self) -> bool {
        fold_eq(&self.0, &o.0)
    }
}
impl Eq for Folded<'_> {}
impl Hash for Folded<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for c in fold_chars(&self.0) {
            c.hash(h);
        }
    }
}

/// How many keys of one object are remembered without a heap allocation.
const INLINE_KEYS: usize = 8;

/// Remembers the keys of one object to refuse (folded) duplicates. The first [`INLINE_KEYS`]
/// keys live on the stack (an envelope's objects have a handful of members each); the rest go
/// to a hash set, so an object with tens of thousands of members costs linear time.
pub(crate) struct SeenKeys<'de> {
    inline: [Folded<'de>; INLINE_KEYS],
    len: usize,
    /// Created for the ninth key (so small objects skip even the hasher's setup).
    more: Option<HashSet<Folded<'de>>>,
}

impl Default for SeenKeys<'_> {
    fn default() -> Self {
        SeenKeys {
            inline: [const { Folded(Cow::Borrowed("")) }; INLINE_KEYS],
            len: 0,
            more: None,
        }
    }
}

impl<'de> SeenKeys<'de> {
    /// Remember `k`; if a key equal to it after folding was seen, return that key instead.
    fn insert(&mut self, k: &Cow<'de, str>) -> Result<(), Cow<'de, str>> {
        let key = Folded(k.clone());
        let inline = &self.inline[..self.len.min(INLINE_KEYS)];
        if let Some(prev) = inline.iter().find(|s| **s == key) {
            return Err(prev.0.clone());
        }
        if self.len < INLINE_KEYS {
            self.inline[self.len] = key;
        } else {
            let more = self.more.get_or_insert_with(HashSet::new);
            if let Some(prev) = more.get(&key) {
                return Err(prev.0.clone());
            }
            more.insert(key);
        }
        self.len += 1;
        Ok(())
    }
}

/// Refuse `k` if this object already has it, or a key a case-folding reader takes for it.
#[allow(clippy::ptr_arg)] // the Cow is kept (cloning a borrowed key is a pointer copy)
pub(crate) fn check_new_key<'de, E: de::Error>(
    faults: &mut Faults,
    seen: &mut SeenKeys<'de>,
    k: &Cow<'de, str>,
    at: &str,
) -> Result<(), E> {
    match seen.insert(k) {
        Ok(()) => Ok(()),
        Err(prev) if prev == *k => Err(faults.fail(
            "duplicate-key",
            format!("duplicate key {k:?} in {at}; each member may appear once"),
        )),
        Err(prev) => Err(faults.fail(
            "case-variant-key",
            format!(
                "keys {prev:?} and {k:?} in {at} differ only in letter case; readers that match \
                 names without case would take them for one member"
            ),
        )),
    }
}

/// The error for a key that a case-folding reader takes for the known member `known`.
pub(crate) fn case_variant<E: de::Error>(faults: &mut Faults, k: &str, known: &str, at: &str) -> E {
    faults.fail(
        "case-variant-key",
        format!(
            "key {k:?} in {at} is {known:?} in another letter case; readers that match names \
             without case would read it as {known:?}: spell it exactly"
        ),
    )
}

/// The scalar `visit_*` methods of a visitor that answers every non-string scalar alike.
macro_rules! scalars {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}
pub(crate) use scalars;

/// The error for nesting past [`MAX_DEPTH`].
pub(crate) fn too_deep<E: de::Error>(faults: &mut Faults) -> E {
    faults.fail(
        "too-deep",
        format!("nesting deeper than {MAX_DEPTH} levels"),
    )
}

/// Walks any value, refusing (folded) duplicate keys and excessive depth, keeping nothing.
pub(crate) struct Walk<'s> {
    pub faults: &'s mut Faults,
    pub depth: usize,
}

impl<'de, 's> DeserializeSeed<'de> for Walk<'s> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 's> Visitor<'de> for Walk<'s> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    scalars!(());
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(too_deep(self.faults));
        }
        while seq
            .next_element_seed(Walk {
                faults: &mut *self.faults,
                depth,
            })?
            .is_some()
        {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(too_deep(self.faults));
        }
        let mut seen = SeenKeys::default();
        while let Some(Key(k)) = map.next_key()? {
            check_new_key(self.faults, &mut seen, &k, "an object")?;
            map.next_value_seed(Walk {
                faults: &mut *self.faults,
                depth,
            })?;
        }
        Ok(())
    }
}

/// Reads a value that should be a string: `Some` when it is one; anything else is walked.
pub(crate) struct MaybeString<'s> {
    pub faults: &'s mut Faults,
    pub depth: usize,
}

impl<'de, 's> DeserializeSeed<'de> for MaybeString<'s> {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 's> Visitor<'de> for MaybeString<'s> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Option<String>, E> {
        Ok(Some(v.to_owned()))
    }
    scalars!(None);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<String>, A::Error> {
        let walk = Walk {
            faults: self.faults,
            depth: self.depth,
        };
        walk.visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<String>, A::Error> {
        let walk = Walk {
            faults: self.faults,
            depth: self.depth,
        };
        walk.visit_map(map).map(|()| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_joins_what_go_joins() {
        // ASCII case, the long s (U+017F) and the Kelvin sign (U+212A), as Go's SimpleFold does.
        assert!(fold_eq("name", "NAME"));
        assert!(fold_eq("name", "nAmE"));
        assert!(fold_eq("params", "param\u{17f}"));
        assert!(fold_eq("kind", "\u{212a}ind"));
        assert!(fold_eq("σ", "ς") && fold_eq("Σ", "ς"));
        assert!(!fold_eq("name", "names"));
        assert!(!fold_eq("name", "nane"));
    }

    #[test]
    fn case_variants_of_known_members_are_found() {
        const KNOWN: &[&str] = &["name", "uri"];
        assert_eq!(case_variant_of("Name", KNOWN), Some("name"));
        assert_eq!(case_variant_of("URI", KNOWN), Some("uri"));
        assert_eq!(case_variant_of("name", KNOWN), None);
        assert_eq!(case_variant_of("other", KNOWN), None);
    }
}
