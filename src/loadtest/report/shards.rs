//! What a report merged from a sharded run's shards says about them ([`MergeInfo`]): which
//! shards it holds, which were missing, failed or given twice, whether it is partial, and the
//! `all_shards` check that keeps a partial merge from passing for the whole run.

use serde::Serialize;

/// A shard that ran but wrote no measures: why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedShard {
    pub index: u64,
    pub error: String,
}

/// Which shards a merged report holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MergeInfo {
    /// The number of shards the run was split into.
    pub count: u64,
    /// The shards whose measures were added, in order.
    pub ran: Vec<u64>,
    /// Shards with no report.
    pub missing: Vec<u64>,
    /// Shards whose report says the run failed (no measures).
    pub failed: Vec<FailedShard>,
    /// Shards given more than once (the first report counted).
    pub duplicates: Vec<u64>,
    /// Not every shard's measures are in: the figures are not the whole run's.
    pub partial: bool,
    /// `--allow-partial` was given.
    pub allow_partial: bool,
}

fn list(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

impl MergeInfo {
    fn incomplete(&self) -> bool {
        self.partial || !self.duplicates.is_empty()
    }

    /// Every shard is in, or the user asked for a partial merge.
    pub(crate) fn complete_or_allowed(&self) -> bool {
        !self.incomplete() || self.allow_partial
    }

    /// `merged 4 of 4 shards` or `PARTIAL merge: 3 of 4 shards`.
    pub(crate) fn headline(&self) -> String {
        let n = self.ran.len();
        if self.partial {
            format!("PARTIAL merge: {n} of {} shards", self.count)
        } else {
            format!("merged {n} of {} shards", self.count)
        }
    }

    /// What is in and what is not, for the `all_shards` check.
    pub(crate) fn describe(&self) -> String {
        let mut parts = vec![format!(
            "{} of {} shards merged ({})",
            self.ran.len(),
            self.count,
            list(&self.ran)
        )];
        if !self.missing.is_empty() {
            parts.push(format!("missing: {}", list(&self.missing)));
        }
        for f in &self.failed {
            parts.push(format!("shard {} failed: {}", f.index, f.error));
        }
        if !self.duplicates.is_empty() {
            parts.push(format!(
                "given twice: {} (the first report counted)",
                list(&self.duplicates)
            ));
        }
        let mut s = parts.join("; ");
        match (self.incomplete(), self.allow_partial) {
            (false, _) => {}
            (true, true) => s.push_str(" (--allow-partial: this is not the whole run)"),
            (true, false) => s.push_str(
                ": this is not the whole run (--allow-partial merges it anyway, labelled partial)",
            ),
        }
        s
    }
}
