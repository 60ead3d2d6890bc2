//! Bounded label values for the gateway's metrics: `method` (the protocol's methods, others
//! `_other`), `code` (the codes of [`crate::mcp::codes`], each with its own label) and `name`
//! (the names the config writes, plus the first `metrics.name_label_limit` names *of requests
//! that passed the header check*: a burst of junk names in refused requests cannot use up the
//! label set; names longer than [`MAX_NAME_LABEL`] bytes are `_other`).

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use crate::mcp::{codes, methods};

/// Names longer than this are counted as `_other` (label values stay small).
pub(crate) const MAX_NAME_LABEL: usize = 128;

/// The label for names past the bound, and for unknown methods.
pub(crate) const OTHER: &str = "_other";

/// Methods that get their own label value.
const KNOWN_METHODS: &[&str] = methods::KNOWN;

/// A bounded `method` label value.
pub(crate) fn method_label(m: Option<&str>) -> &'static str {
    METHOD_LABELS[method_index(m)]
}

/// [`KNOWN_METHODS`], then `_other`, then the empty label (no method).
pub(crate) const METHOD_LABELS: [&str; KNOWN_METHODS.len() + 2] = {
    let mut all = [""; KNOWN_METHODS.len() + 2];
    let mut i = 0;
    while i < KNOWN_METHODS.len() {
        all[i] = KNOWN_METHODS[i];
        i += 1;
    }
    all[KNOWN_METHODS.len()] = OTHER;
    all
};

/// The index of a method's label in [`METHOD_LABELS`].
pub(crate) fn method_index(m: Option<&str>) -> usize {
    match m {
        None => KNOWN_METHODS.len() + 1,
        Some(m) => KNOWN_METHODS
            .iter()
            .position(|k| *k == m)
            .unwrap_or(KNOWN_METHODS.len()),
    }
}

/// A bounded `code` label value.
pub(crate) fn code_label(code: Option<i32>) -> &'static str {
    match code {
        None => "",
        Some(c) => codes::label(c).unwrap_or(OTHER),
    }
}

/// Bounded `name` label values: the config's names, then the first `limit` others seen.
pub struct NameLabels {
    /// The config's names; replaced on reload.
    fixed: RwLock<HashSet<Arc<str>>>,
    seen: RwLock<HashSet<Arc<str>>>,
    limit: usize,
    other: Arc<str>,
    empty: Arc<str>,
}

impl NameLabels {
    pub(crate) fn new(fixed: impl IntoIterator<Item = String>, limit: usize) -> Self {
        NameLabels {
            fixed: RwLock::new(fixed.into_iter().map(Arc::from).collect()),
            seen: RwLock::new(HashSet::new()),
            limit,
            other: Arc::from(OTHER),
            empty: Arc::from(""),
        }
    }

    /// Pin the names of a new config (on reload); names seen before keep their labels.
    pub(crate) fn set_fixed(&self, fixed: impl IntoIterator<Item = String>) {
        let names = fixed.into_iter().map(Arc::from).collect();
        *self.fixed.write().unwrap_or_else(|p| p.into_inner()) = names;
    }

    /// The label of `name`. Only a name whose request passed the header check (`admit`) may
    /// take a free place in the label set; others get a label only if they already have one.
    pub(crate) fn label(&self, name: Option<&str>, admit: bool) -> Arc<str> {
        let Some(name) = name else {
            return self.empty.clone();
        };
        if name.len() > MAX_NAME_LABEL {
            return self.other.clone();
        }
        let fixed = self.fixed.read().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = fixed.get(name) {
            return n.clone();
        }
        drop(fixed);
        let seen = self.seen.read().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = seen.get(name) {
            return n.clone();
        }
        let full = !admit || seen.len() >= self.limit;
        drop(seen);
        if full {
            return self.other.clone();
        }
        let mut seen = self.seen.write().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= self.limit {
            return self.other.clone();
        }
        let n: Arc<str> = Arc::from(name);
        seen.insert(n.clone());
        n
    }

    #[cfg(test)]
    /// Distinct values handed out besides `_other` and the config's names.
    pub(crate) fn seen_count(&self) -> usize {
        self.seen.read().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_labels_are_bounded() {
        let n = NameLabels::new(vec!["fixed".to_string()], 3);
        assert_eq!(&*n.label(Some("fixed"), false), "fixed");
        for i in 0..10 {
            let l = n.label(Some(&format!("t{i}")), true);
            let want = if i < 3 {
                format!("t{i}")
            } else {
                OTHER.to_string()
            };
            assert_eq!(&*l, want);
        }
        assert_eq!(
            &*n.label(Some("t1"), false),
            "t1",
            "names seen early keep their label"
        );
        assert_eq!(n.seen_count(), 3);
        assert_eq!(&*n.label(None, true), "");
    }

    #[test]
    fn refused_requests_cannot_take_label_places_and_long_names_are_other() {
        let n = NameLabels::new(Vec::<String>::new(), 2);
        for i in 0..100 {
            assert_eq!(&*n.label(Some(&format!("junk{i}")), false), OTHER);
        }
        assert_eq!(n.seen_count(), 0);
        assert_eq!(&*n.label(Some("get_weather"), true), "get_weather");
        assert_eq!(&*n.label(Some(&"x".repeat(129)), true), OTHER);
    }

    #[test]
    fn a_reload_pins_the_new_configs_names() {
        let n = NameLabels::new(vec!["old".to_string()], 0);
        n.set_fixed(vec!["deploy_prod".to_string()]);
        assert_eq!(&*n.label(Some("deploy_prod"), false), "deploy_prod");
        assert_eq!(&*n.label(Some("old"), false), OTHER);
    }

    #[test]
    fn method_and_code_labels_are_bounded() {
        assert_eq!(method_label(Some("tools/call")), "tools/call");
        assert_eq!(method_label(Some("evil/123")), OTHER);
        assert_eq!(code_label(Some(codes::GATEWAY_RATE_LIMITED)), "-31001");
        assert_eq!(code_label(Some(-1)), OTHER);
    }
}
