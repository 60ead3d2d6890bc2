//! Unit tests of a pool's concurrency limit: shares of new calls and started legs, waiting
//! for a freed slot, the adaptive limit taught by answers, the shed answer.

use super::*;
use prometheus::Registry;

fn limit(yaml: &str) -> Arc<PoolLimit> {
    let c: PoolConcurrency = serde_yaml::from_str(yaml).unwrap();
    let m = ConcurrencyMetrics::register(&Registry::new()).unwrap();
    Arc::new(PoolLimit::new("p", None, &c, &m))
}

#[tokio::test]
async fn new_calls_take_their_share_and_started_legs_the_rest() {
    let l = limit("{max: 10, first_leg_share: 0.8, priority_wait: 0s}");
    assert_eq!(l.now(), (10, 8, 0));
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(l.admit(Leg::First).await.unwrap());
    }
    let shed = l.admit(Leg::First).await.err().unwrap();
    assert_eq!((shed.limit, shed.in_flight, shed.leg), (10, 8, Leg::First));
    assert!(l.would_admit(Leg::Started) && !l.would_admit(Leg::First));
    held.push(l.admit(Leg::Started).await.unwrap());
    held.push(l.admit(Leg::Started).await.unwrap());
    assert!(
        l.admit(Leg::Started).await.is_err(),
        "the whole limit is taken"
    );
    held.pop();
    assert_eq!(l.now().2, 9);
    assert!(
        l.admit(Leg::First).await.is_err(),
        "9 in flight: over new calls' 8"
    );
    let (rej, retry) = refusal(&shed);
    assert_eq!((rej.status, rej.code, retry.as_str()), (503, -31018, "1"));
    let d = |leg: &str, x: &str| {
        l.metrics
            .pool_decisions
            .with_label_values(&["p", leg, x])
            .get()
    };
    assert_eq!(
        (
            d("first", "admitted"),
            d("first", "shed"),
            d("started", "shed")
        ),
        (8, 2, 1)
    );
}

#[tokio::test]
async fn a_started_leg_waits_for_a_freed_slot() {
    let l = limit("{max: 2, first_leg_share: 0.5, priority_wait: 10s}");
    let first = l.admit(Leg::First).await.unwrap();
    let _second = l.admit(Leg::Started).await.unwrap();
    let l2 = l.clone();
    let waiter = tokio::spawn(async move { l2.admit(Leg::Started).await.is_ok() });
    while l.waiting.load(Ordering::Acquire) == 0 {
        tokio::task::yield_now().await;
    }
    // A new call arriving meanwhile does not take the slot the waiter is owed.
    drop(first);
    assert!(waiter.await.unwrap(), "the waiting leg got the freed slot");
    assert!(l.admit(Leg::First).await.is_err());
}

#[tokio::test]
async fn answers_teach_an_adaptive_limit() {
    // `window: 0s` (not a valid config, fine here): each 8 answers close a window.
    let l = limit("{adaptive: true, min: 2, max: 100, initial: 10, window: 0s}");
    assert_eq!(l.now().0, 10);
    let mut permits = Vec::new();
    for _ in 0..10 {
        permits.push(l.admit(Leg::Started).await.unwrap());
    }
    // Eight answers at the same latency (the best seen), with 8 of 10 in flight: the limit
    // grows. A second answer of one request counts once.
    let rtt = std::time::Duration::from_millis(5);
    for p in permits.iter_mut().take(8) {
        p.answered_after(200, rtt);
        p.answered_after(200, rtt / 10);
    }
    assert_eq!(l.now().0, 15, "grown by the tolerance");
    assert!(l.measured().0.is_some());
    // The pool says it is overloaded: the limit falls to 90%.
    permits[8].answered_after(503, rtt);
    assert_eq!(l.now().0, 14);
    assert_eq!(l.now().1, 12, "new calls' share: 90% of 14, rounded down");
}
