//! `--max-concurrent`: an instance works on at most N requests at once and the rest wait their
//! turn, so a bounded instance's latency rises with load (what `bench/overload.sh` and the
//! gateway's overload tests rely on).

use mcp_edge::backend::{Pool, PoolOptions};
use serde_json::json;
use std::time::{Duration, Instant};

use crate::support::http::call;

#[test]
fn a_bounded_instance_queues_past_its_slots() {
    let mut opts = PoolOptions::local(1);
    opts.delay = Duration::from_millis(150);
    opts.max_concurrent = 1;
    let pool = Pool::start(opts).unwrap();
    let addr = pool.addrs()[0];
    let started = Instant::now();
    let calls: Vec<_> = (0..3)
        .map(|i| {
            std::thread::spawn(move || {
                let r = call(
                    addr,
                    i,
                    "echo",
                    json!({"text": "x"}),
                    json!({}),
                    None,
                    json!({}),
                );
                (r.status, started.elapsed())
            })
        })
        .collect();
    let done: Vec<(u16, Duration)> = calls.into_iter().map(|c| c.join().unwrap()).collect();
    assert!(done.iter().all(|(s, _)| *s == 200), "{done:?}");
    // One at a time, 150 ms each: the last answer comes at least 450 ms after the three were
    // sent together (without the bound, all three would take about 150 ms).
    let last = done.iter().map(|(_, t)| *t).max().unwrap();
    assert!(last >= Duration::from_millis(450), "{done:?}");
}
