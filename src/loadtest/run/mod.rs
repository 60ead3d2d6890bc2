//! Drives the load: the closed loop (`--concurrency N` workers, each running flows back to back),
//! the open loop (`--rate R` flows per second started on a fixed schedule, first legs timed from
//! their *intended* send time so a stalled target cannot hide behind coordinated omission), the
//! ramp stages; a shard's part of them (`--shard`, [`super::shard`]) from a common start
//! (`--start-at`). One flow is [`super::flow`], the leg on the wire [`super::leg`], the
//! decisions before the run [`super::plan`], the display [`super::progress`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use http::{HeaderName, HeaderValue};
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::task::JoinSet;

use super::client::Http;
use super::feed::Feed;
use super::flow::run_one;
use super::measure::Measures;
use super::plan::{self, FlowPlan};
use super::progress::Progress;
use super::report::Report;
use super::shard;
use super::LoadTestArgs;

mod ticker;
use ticker::Ticker;

use super::ctx::{Ctx, Live, SHARDS};

/// How often an idle worker of a ramped run looks at the level again.
const STAGE_POLL: Duration = Duration::from_millis(10);

/// Drain the finished tasks of a set without waiting.
fn reap(set: &mut JoinSet<()>) {
    while set.try_join_next().is_some() {}
}

/// Run the load described by `opts` and return the report.
pub(crate) async fn execute(opts: &LoadTestArgs, show_progress: bool) -> anyhow::Result<Report> {
    opts.validate()?;
    let http = Http::connect(&opts.target, &opts.tls_options()).await?;
    let plan::Plan {
        scenario,
        flows,
        discovery,
        feed,
        extra,
        excluded,
    } = plan::build(opts, &http, show_progress).await?;
    let labels: Vec<String> = flows.iter().map(|f| f.tpl.label.clone()).collect();
    let (ctx, started_unix_ms) =
        start(opts, http, flows, feed, extra, scenario.max_rounds, &labels).await?;
    let ctx = Arc::new(ctx);
    let ticker = Ticker::spawn(&ctx, Progress::new(show_progress, opts));

    let mut set = JoinSet::new();
    match opts.rate {
        None => closed_loop(&ctx, opts, &mut set),
        Some(rate) => open_loop(&ctx, opts, rate, &mut set).await,
    }
    // Let the flows in progress finish, within a bound.
    let mut grace =
        opts.timeout.saturating_mul(scenario.max_rounds.min(3)) + Duration::from_secs(1);
    if scenario.has_tasks() {
        // A followed task ends within its limit, then one cancel and one poll.
        grace = grace.max(opts.task_limit + opts.timeout.saturating_mul(2));
    }
    drain(&mut set, grace).await;
    let elapsed = ctx.start.elapsed();
    let (mut p99_timeline, mut windows) = ticker.stop().await;

    let mut total = Measures::new(&labels);
    for s in &ctx.shards {
        total.merge(&s.lock().expect("measures lock"));
    }
    p99_timeline.truncate(total.timeline.len().max(1));
    windows.truncate(p99_timeline.len());
    let mut report = Report::new(
        opts.clone(),
        scenario,
        started_unix_ms,
        elapsed,
        total,
        p99_timeline,
    );
    report.discovery = discovery;
    report.excluded = excluded;
    report.windows = windows;
    Ok(report)
}

/// Everything the run's workers share, checked before the start (principal tokens, the upstream
/// header), then the start (at `--start-at`, when given). Also the start as unix ms.
async fn start(
    opts: &LoadTestArgs,
    http: Http,
    flows: Vec<FlowPlan>,
    feed: Option<Feed>,
    extra: http::HeaderMap,
    max_rounds: u32,
    labels: &[String],
) -> anyhow::Result<(Ctx, u64)> {
    let (cumulative, total_weight) = cumulative_weights(&flows);
    let bad_template = flows.iter().position(|f| f.tpl.is_call()).unwrap_or(0);
    let principals = principals(opts)?;
    let upstream_header = HeaderName::from_bytes(opts.upstream_header.as_bytes())
        .with_context(|| format!("invalid --upstream-header {:?}", opts.upstream_header))?;
    if let Some(at) = opts.start_at {
        // After the preflight, so that every shard's first flow leaves at the same moment.
        let wait = shard::wait_until(at, SystemTime::now())
            .context("the preflight ended after --start-at")?;
        tokio::time::sleep(wait).await;
    }
    let the_shard = opts.shard_or_whole();
    let start = Instant::now();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let ctx = Ctx {
        http,
        flows,
        feed,
        user_authorization: extra.contains_key(http::header::AUTHORIZATION),
        extra_headers: extra,
        decline_share: opts.decline_share,
        cancel_share: opts.cancel_share,
        task_cancel_share: opts.task_cancel_share,
        task_limit: opts.task_limit,
        stages: opts.stages.clone(),
        cumulative,
        total_weight,
        bad_template,
        principals,
        upstream_header,
        timeout: opts.timeout,
        max_rounds,
        bad_share: opts.bad_share,
        next_id: AtomicU64::new(1),
        claimed: AtomicU64::new(0),
        flow_limit: opts.flows.map(|f| the_shard.part(f)),
        shard: the_shard,
        deadline: opts.effective_duration().map(|d| start + d),
        start,
        shards: (0..SHARDS)
            .map(|_| Mutex::new(Measures::new(labels)))
            .collect(),
        live: Live::default(),
    };
    Ok((ctx, started_unix_ms))
}

/// The running sums of the flows' weights (what [`super::scenario::pick_weighted`] picks from),
/// and their total.
fn cumulative_weights(flows: &[FlowPlan]) -> (Vec<u64>, u64) {
    let mut cumulative = Vec::with_capacity(flows.len());
    let mut acc = 0u64;
    for f in flows {
        acc += u64::from(f.tpl.weight);
        cumulative.push(acc);
    }
    (cumulative, acc)
}

/// The `Authorization` value of each principal token.
fn principals(opts: &LoadTestArgs) -> anyhow::Result<Vec<HeaderValue>> {
    opts.principal_tokens()
        .iter()
        .map(|t| {
            HeaderValue::from_str(&format!("Bearer {t}"))
                .with_context(|| format!("invalid principal token {t:?}"))
        })
        .collect()
}

/// Wait up to `grace` for the flows in progress (a panic in one is raised here), then abort
/// those still running.
async fn drain(set: &mut JoinSet<()>, grace: Duration) {
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
}

/// The closed loop: this shard's workers (run-wide worker `w` is shard `w mod N`'s), each
/// running flows back to back; with stages, worker `w` works while the level is above `w`.
fn closed_loop(ctx: &Arc<Ctx>, opts: &LoadTestArgs, set: &mut JoinSet<()>) {
    let workers = match &opts.stages {
        Some(s) => s.peak(0.0).ceil() as u64,
        None => opts.concurrency.max(1) as u64,
    };
    for w in 0..ctx.shard.part(workers) {
        let ctx = ctx.clone();
        let run_wide = ctx.shard.global(w) as f64;
        set.spawn(async move {
            let mut rng = StdRng::from_entropy();
            loop {
                if let Some(s) = &ctx.stages {
                    if run_wide >= s.level_at(0.0, ctx.start.elapsed()) {
                        if ctx.deadline.is_some_and(|d| Instant::now() >= d) {
                            break;
                        }
                        tokio::time::sleep(STAGE_POLL).await;
                        continue;
                    }
                }
                let Some(seq) = ctx.claim() else { break };
                let d = ctx.draw(seq, &mut rng);
                run_one(&ctx, w as usize, d, Instant::now()).await;
            }
        });
    }
}

/// The open loop: flows started on a fixed schedule. Flow `seq` (run-wide) is due at
/// `seq / rate`, so a shard, which starts only its own flows, keeps its slots of the whole
/// schedule and the shards' schedules interleave into the whole rate.
async fn open_loop(ctx: &Arc<Ctx>, opts: &LoadTestArgs, rate: f64, set: &mut JoinSet<()>) {
    let sem = Arc::new(tokio::sync::Semaphore::new(opts.max_in_flight.max(1)));
    let mut rng = StdRng::from_entropy();
    let period = Duration::from_secs_f64(1.0 / rate);
    let share = 1.0 / ctx.shard.count as f64;
    // With stages the schedule follows the ramped rate; shard i begins i/N of a flow late.
    let mut due = Duration::ZERO;
    let mut credit = -(ctx.shard.index as f64) * share;
    for local in 0u64.. {
        if ctx.flow_limit.is_some_and(|n| local >= n) {
            break;
        }
        let seq = ctx.shard.global(local);
        let intended = match &ctx.stages {
            None => ctx.start + period.mul_f64(seq as f64),
            Some(s) => {
                s.next_due(rate, share, STAGE_POLL, &mut due, &mut credit);
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
            run_one(&ctx, local as usize, d, intended).await;
            drop(permit);
        });
        reap(set);
    }
}
