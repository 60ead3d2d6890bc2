//! Drives the load: the closed loop (`--concurrency N` workers, each running flows back to back),
//! the open loop (`--rate R` flows per second started on a fixed schedule, first legs timed from
//! their *intended* send time so a stalled target cannot hide behind coordinated omission), the
//! MRTR flow itself (leg after leg until `complete`, then its content checks), and ramp stages.
//! The leg on the wire is [`super::leg`], the decisions before the run [`super::plan`], the
//! display [`super::progress`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;

use super::answer::{answer_input_requests_as, ElicitAction};
use super::client::Http;
use super::feed::Feed;
use super::leg::{send_leg, LegMode, Outcome};
use super::measure::{new_hist, FlowEnd, LegError, LegKind, Measures};
use super::plan::{self, FlowPlan};
use super::progress::Progress;
use super::report::Report;
use super::scenario::pick_weighted;
use super::stages::Stages;
use super::template::RetryParts;
use super::LoadTestArgs;

/// Measurement shards: workers pick one by index; each has its own lock.
const SHARDS: usize = 8;
/// How often an idle worker of a ramped run looks at the level again.
const STAGE_POLL: Duration = Duration::from_millis(10);

/// Live counters for the progress display.
#[derive(Default)]
pub(super) struct Live {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub flows: AtomicU64,
}

pub(super) struct Ctx {
    pub http: Http,
    flows: Vec<FlowPlan>,
    feed: Option<Feed>,
    extra_headers: http::HeaderMap,
    /// `-H Authorization: ...` given: no rotating principals.
    pub user_authorization: bool,
    decline_share: f64,
    cancel_share: f64,
    stages: Option<Stages>,
    cumulative: Vec<u64>,
    total_weight: u64,
    /// The template whose mismatched headers make the bad requests.
    bad_template: usize,
    principals: Vec<HeaderValue>,
    pub upstream_header: HeaderName,
    pub timeout: Duration,
    max_rounds: u32,
    bad_share: f64,
    next_id: AtomicU64,
    pub claimed: AtomicU64,
    pub flow_limit: Option<u64>,
    deadline: Option<Instant>,
    pub start: Instant,
    shards: Vec<Mutex<Measures>>,
    pub live: Live,
}

/// What a worker needs to start one flow.
#[derive(Clone, Copy)]
struct Draw {
    seq: u64,
    bad: bool,
    pick: u64,
    action: ElicitAction,
    /// Seeds the flow's own templates ($uuid, $rand, a random feed row).
    seed: u64,
}

impl Ctx {
    /// Claim the next flow in the closed loop, or `None` when the run is over.
    fn claim(&self) -> Option<u64> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let seq = self.claimed.fetch_add(1, Relaxed);
        match self.flow_limit {
            Some(n) if seq >= n => None,
            _ => Some(seq),
        }
    }

    fn draw(&self, seq: u64, rng: &mut StdRng) -> Draw {
        let bad = self.bad_share > 0.0 && rng.gen::<f64>() < self.bad_share;
        let a: f64 = if self.decline_share + self.cancel_share > 0.0 {
            rng.gen()
        } else {
            1.0
        };
        let action = if a < self.decline_share {
            ElicitAction::Decline
        } else if a < self.decline_share + self.cancel_share {
            ElicitAction::Cancel
        } else {
            ElicitAction::Accept
        };
        Draw {
            seq,
            bad,
            pick: rng.gen_range(0..self.total_weight),
            action,
            seed: rng.gen(),
        }
    }

    /// The stage running at `at`, when the run has stages.
    fn stage(&self, at: Instant) -> Option<usize> {
        let s = self.stages.as_ref()?;
        Some(s.index_at(at.saturating_duration_since(self.start)))
    }

    fn sec(&self, at: Instant) -> usize {
        at.saturating_duration_since(self.start).as_secs() as usize
    }

    fn record(&self, shard: usize, f: impl FnOnce(&mut Measures)) {
        f(&mut self.shards[shard % SHARDS].lock().expect("measures lock"));
    }
}

/// Run one flow (or one bad request) to its end and record every leg.
async fn run_one(ctx: &Ctx, shard: usize, d: Draw, intended: Instant) {
    let principal = &ctx.principals[(d.seq % ctx.principals.len() as u64) as usize];
    if d.bad {
        let tpl = &ctx.flows[ctx.bad_template].tpl;
        let id = ctx.next_id.fetch_add(1, Relaxed);
        let mode = LegMode {
            bad: true,
            ..LegMode::default()
        };
        let body = tpl.body(id, RetryParts::default());
        let (_, e, inst) = send_leg(ctx, tpl, principal, id, body, mode).await;
        let now = Instant::now();
        ctx.live.requests.fetch_add(1, Relaxed);
        if e.is_some() {
            ctx.live.errors.fetch_add(1, Relaxed);
        }
        let op = ctx.bad_template;
        let stage = ctx.stage(now);
        ctx.record(shard, |m| {
            if let Some(s) = stage {
                m.tally.stage_leg(s, now - intended, e.is_some());
            }
            m.record_leg(
                op,
                LegKind::Bad,
                now - intended,
                ctx.sec(now),
                e,
                inst.as_deref(),
                None,
            )
        });
        return;
    }
    let op = pick_weighted(&ctx.cumulative, d.pick);
    let plan = &ctx.flows[op];
    let owned;
    let tpl = if plan.dynamic {
        let mut rng = StdRng::seed_from_u64(d.seed);
        match plan.instantiate(d.seq, &mut rng, ctx.feed.as_ref(), &ctx.extra_headers) {
            Ok(t) => {
                owned = t;
                &owned
            }
            Err(_) => &plan.tpl,
        }
    } else {
        &plan.tpl
    };
    ctx.record(shard, |m| m.flows_started += 1);
    let mode = LegMode {
        bad: false,
        want_result: !plan.checks.is_empty(),
        tool_error_ok: false,
    };
    let mut asked = false;
    let mut first_instance: Option<Bytes> = None;
    let mut state: Option<String> = None;
    let mut responses: Vec<u8> = Vec::new();
    let mut has_responses = false;
    let mut send_at = intended;
    let mut round = 1u32;
    let mut final_result: Option<serde_json::Value> = None;
    let end = loop {
        let id = ctx.next_id.fetch_add(1, Relaxed);
        let retry = RetryParts {
            input_responses: has_responses.then_some(responses.as_slice()),
            request_state: state.as_deref(),
        };
        let body = tpl.body(id, retry);
        let mode = LegMode {
            // After a decline or cancel, the tool's error result is the expected end.
            tool_error_ok: asked && d.action != ElicitAction::Accept,
            ..mode
        };
        let (outcome, mut e, inst) = send_leg(ctx, tpl, principal, id, body, mode).await;
        let now = Instant::now();
        let kind = match (tpl.is_call(), round) {
            (false, _) => LegKind::Plain,
            (true, 1) => LegKind::First,
            (true, _) => LegKind::Retry,
        };
        let mut next = None;
        let end = match outcome {
            Outcome::Complete { result } => {
                final_result = result;
                Some(FlowEnd::Completed)
            }
            Outcome::Failed { result } => {
                final_result = result;
                Some(FlowEnd::Failed)
            }
            Outcome::InputRequired { .. } if round >= ctx.max_rounds => Some(FlowEnd::Abandoned),
            Outcome::InputRequired {
                input_requests,
                request_state,
            } => {
                responses.clear();
                has_responses = false;
                asked = true;
                match input_requests
                    .map(|ir| answer_input_requests_as(&ir, &tpl.answers, d.action, &mut responses))
                {
                    Some(Err(why)) => {
                        e = Some(LegError {
                            kind: "unanswerable_input_request",
                            status: None,
                            code: None,
                            message: Some(why.to_string()),
                        });
                        Some(FlowEnd::Failed)
                    }
                    answered => {
                        has_responses = answered.is_some();
                        next = Some(request_state);
                        None
                    }
                }
            }
        };
        ctx.live.requests.fetch_add(1, Relaxed);
        if e.is_some() {
            ctx.live.errors.fetch_add(1, Relaxed);
        }
        let first = first_instance.as_deref();
        let stage = ctx.stage(now);
        ctx.record(shard, |m| {
            if let Some(s) = stage {
                m.tally.stage_leg(s, now - send_at, e.is_some());
            }
            m.record_leg(
                op,
                kind,
                now - send_at,
                ctx.sec(now),
                e,
                inst.as_deref(),
                first,
            )
        });
        if round == 1 {
            first_instance = inst;
        }
        if let Some(end) = end {
            break (end, now);
        }
        state = next.flatten();
        send_at = now;
        round += 1;
    };
    let (end, at) = end;
    if end == FlowEnd::Completed {
        ctx.live.flows.fetch_add(1, Relaxed);
    } else if end == FlowEnd::Abandoned {
        ctx.live.errors.fetch_add(1, Relaxed);
    }
    let is_call = tpl.is_call();
    let deliberate = asked && d.action != ElicitAction::Accept;
    // Content checks run on every final result of a flow that accepted its elicitations.
    let checked: Vec<(&str, Result<(), String>)> = match (&final_result, deliberate) {
        (Some(r), false) => plan
            .checks
            .iter()
            .map(|c| (c.label.as_str(), c.evaluate(r)))
            .collect(),
        _ => Vec::new(),
    };
    let stage = ctx.stage(at);
    ctx.record(shard, |m| {
        for (label, outcome) in checked {
            m.tally.check(label, outcome);
        }
        if deliberate {
            match d.action {
                ElicitAction::Decline => m.tally.declined += 1,
                ElicitAction::Cancel => m.tally.cancelled += 1,
                ElicitAction::Accept => {}
            }
        }
        if let (Some(s), FlowEnd::Completed) = (stage, end) {
            m.tally.stage_flow_completed(s);
        }
        m.record_flow(op, end, round, at - intended, ctx.sec(at), is_call)
    });
}

/// Drain the finished tasks of a set without waiting.
fn reap(set: &mut JoinSet<()>) {
    while set.try_join_next().is_some() {}
}

/// Run the load described by `opts` and return the report.
pub(crate) async fn execute(opts: &LoadTestArgs, show_progress: bool) -> anyhow::Result<Report> {
    opts.validate()?;
    let http = Http::connect(&opts.target, opts.http_client, &opts.tls_options()).await?;
    let plan = plan::build(opts, &http, show_progress).await?;
    let scenario = plan.scenario;
    let flows = plan.flows;
    let mut cumulative = Vec::with_capacity(flows.len());
    let mut acc = 0u64;
    for f in &flows {
        acc += u64::from(f.tpl.weight);
        cumulative.push(acc);
    }
    let bad_template = flows.iter().position(|f| f.tpl.is_call()).unwrap_or(0);
    let principals = opts
        .principal_tokens()
        .iter()
        .map(|t| {
            HeaderValue::from_str(&format!("Bearer {t}"))
                .with_context(|| format!("invalid principal token {t:?}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let upstream_header = HeaderName::from_bytes(opts.upstream_header.as_bytes())
        .with_context(|| format!("invalid --upstream-header {:?}", opts.upstream_header))?;
    let labels: Vec<String> = flows.iter().map(|f| f.tpl.label.clone()).collect();
    let start = Instant::now();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let ctx = Arc::new(Ctx {
        http,
        flows,
        feed: plan.feed,
        user_authorization: plan.extra.contains_key(http::header::AUTHORIZATION),
        extra_headers: plan.extra,
        decline_share: opts.decline_share,
        cancel_share: opts.cancel_share,
        stages: opts.stages.clone(),
        cumulative,
        total_weight: acc,
        bad_template,
        principals,
        upstream_header,
        timeout: opts.timeout,
        max_rounds: scenario.max_rounds,
        bad_share: opts.bad_share,
        next_id: AtomicU64::new(1),
        claimed: AtomicU64::new(0),
        flow_limit: opts.flows,
        deadline: opts.effective_duration().map(|d| start + d),
        start,
        shards: (0..SHARDS)
            .map(|_| Mutex::new(Measures::new(&labels)))
            .collect(),
        live: Live::default(),
    });

    // The ticker: p99 of each second for the timeline, and the live display.
    let p99s: Arc<Mutex<Vec<Option<u64>>>> = Arc::default();
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let ticker = {
        let ctx = ctx.clone();
        let p99s = p99s.clone();
        let mut progress = Progress::new(show_progress, opts);
        tokio::spawn(async move {
            let first = tokio::time::Instant::from_std(ctx.start) + Duration::from_secs(1);
            let mut iv = tokio::time::interval_at(first, Duration::from_secs(1));
            let mut tick = 0u64;
            loop {
                let stop = tokio::select! {
                    _ = iv.tick() => false,
                    _ = &mut stop_rx => true,
                };
                tick += 1;
                let mut window = new_hist();
                for s in &ctx.shards {
                    let mut m = s.lock().expect("measures lock");
                    let _ = window.add(&m.window);
                    m.window.reset();
                }
                let p99 = (!window.is_empty()).then(|| window.value_at_quantile(0.99));
                // On stop this is the last, partial second (kept when legs were answered in it).
                if !stop || p99.is_some() {
                    p99s.lock().expect("p99 lock").push(p99);
                }
                if stop {
                    break;
                }
                progress.tick(&ctx, p99, tick);
            }
            progress.finish();
        })
    };

    let mut set = JoinSet::new();
    match opts.rate {
        None => {
            let workers = match &opts.stages {
                Some(s) => s.peak(0.0).ceil() as usize,
                None => opts.concurrency.max(1),
            };
            for w in 0..workers {
                let ctx = ctx.clone();
                set.spawn(async move {
                    let mut rng = StdRng::from_entropy();
                    loop {
                        // A ramped run: worker w works while the level is above w.
                        if let Some(s) = &ctx.stages {
                            let level = s.level_at(0.0, ctx.start.elapsed());
                            if (w as f64) >= level {
                                if ctx.deadline.is_some_and(|d| Instant::now() >= d) {
                                    break;
                                }
                                tokio::time::sleep(STAGE_POLL).await;
                                continue;
                            }
                        }
                        let Some(seq) = ctx.claim() else { break };
                        let d = ctx.draw(seq, &mut rng);
                        run_one(&ctx, w, d, Instant::now()).await;
                    }
                });
            }
        }
        Some(rate) => {
            let sem = Arc::new(tokio::sync::Semaphore::new(opts.max_in_flight.max(1)));
            let mut rng = StdRng::from_entropy();
            let period = Duration::from_secs_f64(1.0 / rate);
            // With stages the schedule follows the ramped rate.
            let mut due = Duration::ZERO;
            let mut credit = 0.0f64;
            for seq in 0u64.. {
                if ctx.flow_limit.is_some_and(|n| seq >= n) {
                    break;
                }
                let intended = match &ctx.stages {
                    None => ctx.start + period.mul_f64(seq as f64),
                    Some(s) => {
                        // Integrate the ramped rate: a flow is due each time one more flow's
                        // worth of rate has accumulated (exact spacing when the rate is high).
                        let step = STAGE_POLL.as_secs_f64();
                        loop {
                            let r = s.level_at(rate, due);
                            if r * step >= 1.0 {
                                due += Duration::from_secs_f64(1.0 / r);
                                break;
                            }
                            credit += r * step;
                            due += STAGE_POLL;
                            if credit >= 1.0 {
                                credit -= 1.0;
                                break;
                            }
                            if due >= s.total() {
                                break;
                            }
                        }
                        ctx.start + due
                    }
                };
                if ctx.deadline.is_some_and(|d| intended >= d) {
                    break;
                }
                tokio::time::sleep_until(tokio::time::Instant::from_std(intended)).await;
                // When the target stalls and every slot is taken, this waits; the flows it
                // delays are still timed from their intended start.
                let permit = sem.clone().acquire_owned().await.expect("semaphore open");
                ctx.claimed.fetch_add(1, Relaxed);
                let d = ctx.draw(seq, &mut rng);
                let ctx = ctx.clone();
                set.spawn(async move {
                    run_one(&ctx, seq as usize, d, intended).await;
                    drop(permit);
                });
                reap(&mut set);
            }
        }
    }
    // Let the flows in progress finish, within a bound.
    let grace = opts.timeout.saturating_mul(scenario.max_rounds.min(3)) + Duration::from_secs(1);
    let drained = tokio::time::timeout(grace, async {
        while let Some(r) = set.join_next().await {
            if let Err(e) = r {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
    })
    .await
    .is_ok();
    if !drained {
        set.abort_all();
        while set.join_next().await.is_some() {}
    }
    let elapsed = start.elapsed();
    let _ = stop_tx.send(());
    let _ = ticker.await;

    let mut total = Measures::new(&labels);
    for s in &ctx.shards {
        total.merge(&s.lock().expect("measures lock"));
    }
    let mut p99_timeline = p99s.lock().expect("p99 lock").clone();
    p99_timeline.truncate(total.timeline.len().max(1));
    let mut report = Report::new(
        opts.clone(),
        scenario,
        started_unix_ms,
        elapsed,
        total,
        p99_timeline,
    );
    report.discovery = plan.discovery;
    report.excluded = plan.excluded;
    Ok(report)
}
