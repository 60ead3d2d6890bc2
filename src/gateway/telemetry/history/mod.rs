//! The gateway's own history of what it served, for the console's charts: two fixed-size rings
//! of [`Point`]s, one per second for the last [`SECONDS`] seconds and one per minute for the
//! last [`MINUTES`] minutes. A point is the difference between two readings of the metrics
//! ([`Cumulative`], read in [`read`]): requests, errors by side, p50/p99 overall, per pool
//! and for the busiest tools of the interval, MRTR flows completed and abandoned, cache hits
//! and misses, refusals by limits, and the balancer's load per instance at its end.
//!
//! Memory is bounded by construction: a ring never grows past its capacity, a point holds at
//! most [`MAX_POOLS`] pool series, [`MAX_TOOLS`] tool series and [`MAX_INSTANCES`] instance
//! loads, and names are shared (`Arc<str>`) through a bounded table. [`History::bytes`] is the
//! figure the docs state. Nothing here is on the request path: a background task records.

use serde_json::{json, Value};

mod point;
mod read;

pub(crate) use point::{Load, Names, Point, Ring, MAX_INSTANCES, MINUTES, SECONDS};
#[cfg(test)]
use point::{Series, MAX_POOLS, MAX_TOOLS};
pub(crate) use read::{side_of_sample, Cumulative};

/// Both rings and the readings their next points are measured from.
#[derive(Debug)]
pub(crate) struct History {
    pub(crate) seconds: Ring<Point>,
    pub(crate) minutes: Ring<Point>,
    last: Option<(u64, Cumulative)>,
    minute_start: Option<(u64, Cumulative)>,
    pub(crate) names: Names,
}

impl Default for History {
    fn default() -> Self {
        History {
            seconds: Ring::new(SECONDS),
            minutes: Ring::new(MINUTES),
            last: None,
            minute_start: None,
            names: Names::default(),
        }
    }
}

impl History {
    /// A history of a process whose metrics were all zero at `at_ms` (its start): the first
    /// reading makes a point from there, so what the process served before the sampler's first
    /// tick is in the history too (the sampler may start after the listeners do).
    pub(crate) fn since(at_ms: u64) -> History {
        History {
            last: Some((at_ms, Cumulative::default())),
            minute_start: Some((at_ms, Cumulative::default())),
            ..History::default()
        }
    }

    /// Record a reading taken at `at_ms`: a per-second point from the previous reading, and a
    /// per-minute point once a minute has passed since the minute's first reading.
    pub(crate) fn record(&mut self, at_ms: u64, now: Cumulative, instances: Vec<Load>) {
        if let Some((t0, prev)) = &self.last {
            let p = prev.delta(&now, *t0, at_ms, &mut self.names, instances.clone());
            self.seconds.push(p);
        }
        match &self.minute_start {
            Some((t0, start)) if at_ms.saturating_sub(*t0) >= 60_000 => {
                let p = start.delta(&now, *t0, at_ms, &mut self.names, instances);
                self.minutes.push(p);
                self.minute_start = Some((at_ms, now.clone()));
            }
            Some(_) => {}
            None => self.minute_start = Some((at_ms, now.clone())),
        }
        self.last = Some((at_ms, now));
    }

    /// The bytes the history holds now.
    pub(crate) fn bytes(&self) -> usize {
        let points: usize = self
            .seconds
            .iter()
            .chain(self.minutes.iter())
            .map(Point::bytes)
            .sum();
        let readings = [&self.last, &self.minute_start]
            .iter()
            .filter_map(|r| r.as_ref())
            .map(|(_, c)| c.bytes())
            .sum::<usize>();
        points + readings + self.names.bytes()
    }

    /// The JSON of `GET /-/history`: both rings, oldest point first.
    pub(crate) fn json(&self, now_ms: u64) -> Value {
        json!({
            "now_ms": now_ms,
            "seconds": {"span_ms": 1000, "capacity": SECONDS, "points": self.seconds.iter().map(Point::json).collect::<Vec<_>>()},
            "minutes": {"span_ms": 60_000, "capacity": MINUTES, "points": self.minutes.iter().map(Point::json).collect::<Vec<_>>()},
            "memory_bytes": self.bytes(),
        })
    }
}

#[cfg(test)]
mod tests;
