//! The history's ring, its points and their quantiles, from made-up readings.

use super::read::{quantiles, Hist};
use super::*;
use std::sync::Arc;

#[test]
fn a_ring_keeps_the_newest_values_oldest_first_and_never_grows() {
    let mut r = Ring::new(3);
    assert_eq!(r.iter().count(), 0);
    r.push(1);
    r.push(2);
    assert_eq!(r.iter().copied().collect::<Vec<_>>(), [1, 2]);
    r.push(3);
    r.push(4);
    r.push(5);
    assert_eq!(r.iter().copied().collect::<Vec<_>>(), [3, 4, 5]);
    assert_eq!(r.len(), 3);
    for i in 6..100 {
        r.push(i);
    }
    assert_eq!(r.iter().copied().collect::<Vec<_>>(), [97, 98, 99]);
    assert_eq!(r.capacity(), 3, "no reallocation past the capacity");
}

fn hist(requests: u64, errors: u64, buckets: &[u64]) -> Hist {
    Hist {
        requests,
        errors,
        buckets: buckets.to_vec(),
        count: requests,
    }
}

/// Bounds 10 ms, 100 ms, 1 s.
fn reading(requests: u64, buckets: &[u64], tool_calls: &[(&str, u64)]) -> Cumulative {
    let mut c = Cumulative {
        all: hist(requests, 1, buckets),
        errors: [1, 0, 0],
        flows: [requests / 2, 0],
        cache: [requests / 4, requests / 4],
        limited: 0,
        bounds: vec![0.01, 0.1, 1.0],
        ..Cumulative::default()
    };
    c.pools.insert("p".into(), hist(requests, 1, buckets));
    for (t, n) in tool_calls {
        c.tools.insert((*t).into(), hist(*n, 0, &[*n, *n, *n]));
    }
    c
}

#[test]
fn quantiles_interpolate_inside_the_bucket_of_the_rank() {
    let b = [0.01, 0.1, 1.0];
    let prev = hist(0, 0, &[0, 0, 0]);
    // 100 observations: 50 under 10 ms, 49 in (10, 100] ms, 1 in (100 ms, 1 s].
    let cur = hist(100, 0, &[50, 99, 100]);
    let (p50, p99) = quantiles(&b, &prev, &cur);
    assert!((p50 - 10.0).abs() < 0.01, "{p50}");
    assert!((p99 - 100.0).abs() < 0.01, "{p99}");
    // Past the largest bound: that bound.
    let slow = Hist {
        count: 10,
        ..hist(10, 0, &[0, 0, 0])
    };
    assert_eq!(quantiles(&b, &prev, &slow), (1000.0, 1000.0));
    // No observation between the readings: no figure (not 0).
    assert!(quantiles(&b, &cur, &cur).0.is_nan());
}

#[test]
fn points_are_differences_and_minutes_close_after_sixty_seconds() {
    let mut h = History::default();
    let load = |n| Load {
        pool: Arc::from("p"),
        name: Arc::from("127.0.0.1:1"),
        in_flight: n,
        latency_ms: 1.5,
        up: true,
    };
    h.record(
        1_000,
        reading(10, &[10, 10, 10], &[("a", 5)]),
        vec![load(1)],
    );
    assert_eq!(h.seconds.len(), 0, "one reading makes no point");
    h.record(
        2_000,
        reading(30, &[25, 30, 30], &[("a", 6), ("b", 9)]),
        vec![load(2)],
    );
    let p = h.seconds.iter().last().unwrap().clone();
    assert_eq!((p.at_ms, p.span_ms, p.requests), (2_000, 1_000, 20));
    assert_eq!(p.errors, [0, 0, 0]);
    assert_eq!(p.flows, [10, 0]);
    assert_eq!(p.cache, [5, 5]);
    assert_eq!(p.pools.len(), 1);
    assert_eq!(p.pools[0].requests, 20);
    // The busiest tool of the interval first.
    let tools: Vec<(&str, u32)> = p.tools.iter().map(|t| (&*t.name, t.requests)).collect();
    assert_eq!(tools, [("b", 9), ("a", 1)]);
    assert_eq!(p.instances[0].in_flight, 2);
    let j = p.json();
    assert_eq!(j["cache_hit_ratio"], 0.5);
    assert_eq!(j["pools"][0]["name"], "p");
    // A counter that went back (a reload) counts nothing, never a huge number.
    h.record(3_000, reading(5, &[5, 5, 5], &[]), vec![]);
    assert_eq!(h.seconds.iter().last().unwrap().requests, 0);
    assert_eq!(h.minutes.len(), 0);
    h.record(61_000, reading(105, &[100, 105, 105], &[]), vec![]);
    assert_eq!(h.minutes.len(), 1);
    let m = h.minutes.iter().next().unwrap();
    assert_eq!((m.span_ms, m.requests), (60_000, 95));
}

#[test]
fn a_history_since_the_start_counts_what_came_before_the_first_reading() {
    let mut h = History::since(500);
    h.record(1_000, reading(7, &[7, 7, 7], &[("a", 7)]), vec![]);
    let p = h.seconds.iter().last().unwrap().clone();
    assert_eq!((p.at_ms, p.span_ms, p.requests), (1_000, 500, 7));
}

#[test]
fn the_history_stays_within_its_stated_bound_whatever_it_is_fed() {
    let mut h = History::default();
    let tools: Vec<(String, u64)> = (0..200).map(|i| (format!("tool-{i}"), 0)).collect();
    let instances = || {
        (0..100)
            .map(|i| Load {
                pool: Arc::from("p"),
                name: Arc::from(format!("10.0.0.{i}:80")),
                in_flight: 1,
                latency_ms: 1.0,
                up: true,
            })
            .collect::<Vec<_>>()
    };
    for s in 0..2_000u64 {
        let mut c = reading(s * 10, &[s, s * 5, s * 10], &[]);
        for (i, (t, _)) in tools.iter().enumerate() {
            c.tools
                .insert(t.clone(), hist(s * (i as u64 + 1), 0, &[s, s, s]));
        }
        for p in 0..40 {
            c.pools.insert(format!("pool-{p}"), hist(s, 0, &[s, s, s]));
        }
        h.record(s * 1_000, c, instances());
    }
    assert_eq!(h.seconds.len(), SECONDS);
    assert_eq!(h.minutes.len(), 33);
    let p = h.seconds.iter().last().unwrap();
    assert_eq!(
        (p.pools.len(), p.tools.len(), p.instances.len()),
        (MAX_POOLS, MAX_TOOLS, MAX_INSTANCES)
    );
    // The figure docs/console.md states for a full history at the caps, readings aside.
    let point_max = std::mem::size_of::<Point>()
        + (MAX_POOLS + MAX_TOOLS) * std::mem::size_of::<Series>()
        + MAX_INSTANCES * std::mem::size_of::<Load>();
    let rings: usize = h
        .seconds
        .iter()
        .chain(h.minutes.iter())
        .map(Point::bytes)
        .sum();
    assert!(rings <= (SECONDS + MINUTES) * point_max, "{rings}");
    assert_eq!(
        point_max, 2_432,
        "update docs/console.md (History) with the new size"
    );
}
