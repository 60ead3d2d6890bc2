//! The standalone `GET` streams of 2025-era sessions open on this replica, bounded by
//! `legacy.max_streams`: each holds four sockets (the client's, the hop's two ends and the
//! upstream's) for as long as the client stays, so their number is what the bound protects.
//! A slot is taken before the stream opens and given back when it ends, however it ends.

use prometheus::IntGauge;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// How many streams are open (carried over reloads with the bridge).
#[derive(Default)]
pub(crate) struct Streams {
    open: AtomicUsize,
}

/// One open stream's place; dropping it frees the place.
pub(crate) struct StreamSlot {
    streams: Arc<Streams>,
    gauge: IntGauge,
}

impl Streams {
    /// A place for one more stream, unless `max` are open; `gauge` follows the count.
    pub(crate) fn take(self: &Arc<Self>, max: usize, gauge: &IntGauge) -> Option<StreamSlot> {
        let before = self.open.fetch_add(1, Ordering::AcqRel);
        if before >= max {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        gauge.set((before + 1) as i64);
        Some(StreamSlot {
            streams: self.clone(),
            gauge: gauge.clone(),
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let before = self.streams.open.fetch_sub(1, Ordering::AcqRel);
        self.gauge.set(before.saturating_sub(1) as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_taken_up_to_the_bound_and_given_back_on_drop() {
        let s = Arc::new(Streams::default());
        let g = IntGauge::new("t", "t").unwrap();
        let a = s.take(2, &g).unwrap();
        let _b = s.take(2, &g).unwrap();
        assert!(s.take(2, &g).is_none());
        assert_eq!(g.get(), 2);
        drop(a);
        assert_eq!(g.get(), 1);
        assert!(s.take(2, &g).is_some());
    }
}
