//! The instances one request has been sent to (a connect failure is retried on another), as a
//! bit set: what every selector skips.

/// The set of instance indices a request has been sent to (pools hold at most 64 instances
/// for this purpose; later ones are never marked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tried(u64);

impl Tried {
    pub(crate) fn add(&mut self, i: usize) {
        if i < 64 {
            self.0 |= 1 << i;
        }
    }
    pub(crate) fn has(self, i: usize) -> bool {
        i < 64 && self.0 & (1 << i) != 0
    }
    pub(crate) fn count(self) -> u32 {
        self.0.count_ones()
    }
}
