//! Unit tests of `flows`.

use super::*;
use prometheus::Registry;

fn store(max: usize, timeout: Duration) -> (FlowStore, FlowMetrics) {
    let cfg = FlowsConfig {
        enabled: true,
        timeout,
        max_tracked: max,
    };
    (
        FlowStore::new(&cfg),
        FlowMetrics::register(&Registry::new()).unwrap(),
    )
}

fn leg(state: Option<u64>, kind: ResultKind, next: Option<u64>, at: Instant, inst: usize) -> Leg {
    Leg {
        method: "tools/call",
        name: Arc::from("deploy"),
        request_state: state,
        verdict: Verdict {
            kind,
            state_digest: next,
            ..Verdict::default()
        },
        failed: false,
        retry_invited: false,
        instance: Some((0, inst)),
        started: at,
        span: None,
    }
}

fn outcome(m: &FlowMetrics, o: &str) -> u64 {
    m.flows
        .with_label_values(&["tools/call", "deploy", o])
        .get()
}

#[test]
fn a_three_round_flow_completes_with_its_rounds_waits_and_duration() {
    let (s, m) = store(10, Duration::from_secs(60));
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let f1 = s.finish_leg(
        &leg(None, ResultKind::InputRequired, Some(1), t0, 0),
        t0 + ms(10),
        &m,
    );
    assert_eq!(f1.unwrap().round, 1);
    let f2 = s.finish_leg(
        &leg(Some(1), ResultKind::InputRequired, Some(2), t0 + ms(510), 1),
        t0 + ms(520),
        &m,
    );
    assert_eq!(f2.unwrap().round, 2);
    let f3 = s.finish_leg(
        &leg(Some(2), ResultKind::Complete, None, t0 + ms(1520), 1),
        t0 + ms(1530),
        &m,
    );
    assert_eq!(f3.unwrap().round, 3);
    assert_eq!(outcome(&m, "completed"), 1);
    let rounds = m.rounds.with_label_values(&["tools/call", "deploy"]);
    assert_eq!(
        (rounds.get_sample_count(), rounds.get_sample_sum()),
        (1, 3.0)
    );
    let d = m
        .duration
        .with_label_values(&["tools/call", "deploy"])
        .get_sample_sum();
    assert!((d - 1.53).abs() < 1e-6, "{d}");
    let w = m.round_wait.with_label_values(&["tools/call", "deploy"]);
    assert_eq!(w.get_sample_count(), 2);
    assert!((w.get_sample_sum() - 1.5).abs() < 1e-6);
    let p = |x| {
        m.placement
            .with_label_values(&["tools/call", "deploy", x])
            .get()
    };
    assert_eq!((p("same"), p("other")), (1, 1));
    assert!(s.is_empty());
    // A call answered at once is no flow; a replayed state is untracked.
    assert!(s
        .finish_leg(&leg(None, ResultKind::Complete, None, t0, 0), t0, &m)
        .is_none());
    assert!(s
        .finish_leg(&leg(Some(2), ResultKind::Complete, None, t0, 0), t0, &m)
        .is_none());
    assert_eq!(
        m.untracked
            .with_label_values(&["tools/call", "deploy"])
            .get(),
        1
    );
}

#[test]
fn unseen_states_are_abandoned_after_the_timeout_and_errors_fail() {
    let (s, m) = store(10, Duration::from_secs(5));
    let t0 = Instant::now();
    s.finish_leg(
        &leg(None, ResultKind::InputRequired, Some(7), t0, 0),
        t0,
        &m,
    );
    s.finish_leg(
        &leg(None, ResultKind::InputRequired, Some(8), t0, 0),
        t0,
        &m,
    );
    s.sweep(t0 + Duration::from_secs(4), &m);
    assert_eq!((outcome(&m, "abandoned"), s.len()), (0, 2));
    let mut err = leg(Some(8), ResultKind::Complete, None, t0, 0);
    err.failed = true;
    s.finish_leg(&err, t0 + Duration::from_secs(1), &m);
    assert_eq!(outcome(&m, "failed"), 1);
    s.sweep(t0 + Duration::from_secs(6), &m);
    assert_eq!((outcome(&m, "abandoned"), s.len()), (1, 0));
    // A retry invited by the gateway keeps the flow.
    s.finish_leg(
        &leg(None, ResultKind::InputRequired, Some(9), t0, 0),
        t0,
        &m,
    );
    let mut shed = leg(Some(9), ResultKind::Unknown, None, t0, 0);
    shed.retry_invited = true;
    assert_eq!(s.finish_leg(&shed, t0, &m).unwrap().round, 2);
    assert_eq!(s.len(), 1);
}

#[test]
fn a_flood_of_states_never_grows_the_store_past_its_bound() {
    let (s, m) = store(100, Duration::from_secs(600));
    let t0 = Instant::now();
    for i in 0..10_000u64 {
        s.finish_leg(
            &leg(None, ResultKind::InputRequired, Some(i), t0, 0),
            t0,
            &m,
        );
        assert!(s.len() <= 100);
    }
    assert_eq!(s.len(), 100);
    assert_eq!(m.evicted.get(), 9_900);
    assert!(s.lock().marks() <= 2 * 100 + 64);
    // The newest are kept.
    assert!(s
        .finish_leg(&leg(Some(9_999), ResultKind::Complete, None, t0, 0), t0, &m)
        .is_some());
    // Completed flows leave stale marks that are compacted away.
    for i in 0..10_000u64 {
        s.finish_leg(
            &leg(None, ResultKind::InputRequired, Some(20_000 + i), t0, 0),
            t0,
            &m,
        );
        s.finish_leg(
            &leg(Some(20_000 + i), ResultKind::Complete, None, t0, 0),
            t0,
            &m,
        );
    }
    assert!(s.lock().marks() <= 2 * 100 + 64);
}
