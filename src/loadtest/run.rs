//! Drives the load: the closed loop (`--concurrency N` workers, each running flows back to back),
//! the open loop (`--rate R` flows per second started on a fixed schedule, first legs timed from
//! their *intended* send time so a stalled target cannot hide behind coordinated omission), the
//! MRTR flow itself (leg after leg until `complete`), and the live progress display.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;

use super::client::Http;
use super::flows::{
    answer_input_requests, instance_from_meta, json_payload, parse_reply, pick_weighted,
    FlowTemplate, Reply, RetryParts, Scenario,
};
use super::measure::{new_hist, FlowEnd, LegError, LegKind, Measures};
use super::report::Report;
use super::LoadTestArgs;
use crate::mcp::codes;

/// Measurement shards: workers pick one by index; each has its own lock.
const SHARDS: usize = 8;

/// Live counters for the progress display.
#[derive(Default)]
struct Live {
    requests: AtomicU64,
    errors: AtomicU64,
    flows: AtomicU64,
}

struct Ctx {
    http: Http,
    templates: Vec<FlowTemplate>,
    cumulative: Vec<u64>,
    total_weight: u64,
    /// The template whose mismatched headers make the bad requests.
    bad_template: usize,
    principals: Vec<HeaderValue>,
    upstream_header: HeaderName,
    timeout: Duration,
    max_rounds: u32,
    bad_share: f64,
    next_id: AtomicU64,
    claimed: AtomicU64,
    flow_limit: Option<u64>,
    deadline: Option<Instant>,
    start: Instant,
    shards: Vec<Mutex<Measures>>,
    live: Live,
}

/// What a worker needs to start one flow.
#[derive(Clone, Copy)]
struct Draw {
    seq: u64,
    bad: bool,
    pick: u64,
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
        Draw {
            seq,
            bad,
            pick: rng.gen_range(0..self.total_weight),
        }
    }

    fn sec(&self, at: Instant) -> usize {
        at.saturating_duration_since(self.start).as_secs() as usize
    }

    fn record(&self, shard: usize, f: impl FnOnce(&mut Measures)) {
        f(&mut self.shards[shard % SHARDS].lock().expect("measures lock"));
    }
}

/// The answer to one leg as the flow sees it.
enum Outcome {
    Complete,
    InputRequired {
        input_requests: Option<String>,
        request_state: Option<String>,
    },
    Failed,
}

/// Send one leg and classify the answer. Returns the outcome, the error if any, and the instance.
async fn send_leg(
    ctx: &Ctx,
    tpl: &FlowTemplate,
    principal: &HeaderValue,
    id: u64,
    body: Vec<u8>,
    bad: bool,
) -> (Outcome, Option<LegError>, Option<Bytes>) {
    let mut headers = if bad {
        tpl.bad_headers.clone()
    } else {
        tpl.headers.clone()
    };
    headers.insert(http::header::AUTHORIZATION, principal.clone());
    let req = ctx.http.request(headers, body);
    let err = |kind, status: Option<u16>, code| Some(LegError { kind, status, code });
    let ans = match tokio::time::timeout(ctx.timeout, ctx.http.send(req)).await {
        Err(_) => return (Outcome::Failed, err("timeout", None, None), None),
        Ok(Err(_)) => return (Outcome::Failed, err("transport", None, None), None),
        Ok(Ok(a)) => a,
    };
    let status = ans.status.as_u16();
    let mut instance = ans
        .headers
        .get(&ctx.upstream_header)
        .map(|v| Bytes::copy_from_slice(v.as_bytes()));
    let payload = json_payload(
        &ans.body,
        ans.headers
            .get(http::header::CONTENT_TYPE)
            .map(|v| v.as_bytes()),
    );
    let reply = parse_reply(&payload, id);
    if instance.is_none() {
        let meta = match &reply {
            Ok(Reply::Complete { meta, .. }) | Ok(Reply::InputRequired { meta, .. }) => *meta,
            _ => None,
        };
        instance = meta.and_then(instance_from_meta).map(Bytes::from);
    }
    if bad {
        // Expected: 400 with -32020. The id may be absent from a gateway's rejection.
        let code = match &reply {
            Ok(Reply::Error { code }) => Some(*code),
            _ => None,
        };
        let e = match (status, code) {
            (400, Some(c)) if c == i64::from(codes::HEADER_MISMATCH) => None,
            (200..=299, _) => err("bad_not_rejected", Some(status), code),
            _ => err("bad_wrong_rejection", Some(status), code),
        };
        return (Outcome::Failed, e, instance);
    }
    if !ans.status.is_success() {
        let code = match reply {
            Ok(Reply::Error { code }) => Some(code),
            _ => None,
        };
        return (
            Outcome::Failed,
            err("http_status", Some(status), code),
            instance,
        );
    }
    match reply {
        Err(p) => (Outcome::Failed, err(p.kind(), Some(status), None), instance),
        Ok(Reply::Error { code }) => (
            Outcome::Failed,
            err("jsonrpc_error", Some(status), Some(code)),
            instance,
        ),
        Ok(Reply::Complete { is_error: true, .. }) => (
            Outcome::Failed,
            err("tool_error", Some(status), None),
            instance,
        ),
        Ok(Reply::Complete {
            is_error: false, ..
        }) => (Outcome::Complete, None, instance),
        Ok(Reply::InputRequired {
            input_requests,
            request_state,
            ..
        }) => (
            Outcome::InputRequired {
                input_requests: input_requests.map(str::to_owned),
                request_state: request_state.map(str::to_owned),
            },
            None,
            instance,
        ),
    }
}

/// Run one flow (or one bad request) to its end and record every leg.
async fn run_one(ctx: &Ctx, shard: usize, d: Draw, intended: Instant) {
    let principal = &ctx.principals[(d.seq % ctx.principals.len() as u64) as usize];
    if d.bad {
        let tpl = &ctx.templates[ctx.bad_template];
        let id = ctx.next_id.fetch_add(1, Relaxed);
        let (_, e, inst) = send_leg(
            ctx,
            tpl,
            principal,
            id,
            tpl.body(id, RetryParts::default()),
            true,
        )
        .await;
        let now = Instant::now();
        ctx.live.requests.fetch_add(1, Relaxed);
        if e.is_some() {
            ctx.live.errors.fetch_add(1, Relaxed);
        }
        let op = ctx.bad_template;
        ctx.record(shard, |m| {
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
    let tpl = &ctx.templates[op];
    ctx.record(shard, |m| m.flows_started += 1);
    let mut first_instance: Option<Bytes> = None;
    let mut state: Option<String> = None;
    let mut responses: Vec<u8> = Vec::new();
    let mut has_responses = false;
    let mut send_at = intended;
    let mut round = 1u32;
    let end = loop {
        let id = ctx.next_id.fetch_add(1, Relaxed);
        let retry = RetryParts {
            input_responses: has_responses.then_some(responses.as_slice()),
            request_state: state.as_deref(),
        };
        let body = tpl.body(id, retry);
        let (outcome, mut e, inst) = send_leg(ctx, tpl, principal, id, body, false).await;
        let now = Instant::now();
        let kind = match (tpl.is_call(), round) {
            (false, _) => LegKind::Plain,
            (true, 1) => LegKind::First,
            (true, _) => LegKind::Retry,
        };
        let mut next = None;
        let end = match outcome {
            Outcome::Complete => Some(FlowEnd::Completed),
            Outcome::Failed => Some(FlowEnd::Failed),
            Outcome::InputRequired { .. } if round >= ctx.max_rounds => Some(FlowEnd::Abandoned),
            Outcome::InputRequired {
                input_requests,
                request_state,
            } => {
                responses.clear();
                has_responses = false;
                match input_requests
                    .map(|ir| answer_input_requests(&ir, &tpl.answers, &mut responses))
                {
                    Some(Err(_)) => {
                        e = Some(LegError {
                            kind: "unanswerable_input_request",
                            status: None,
                            code: None,
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
        ctx.record(shard, |m| {
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
    ctx.record(shard, |m| {
        m.record_flow(op, end, round, at - intended, ctx.sec(at), is_call)
    });
}

/// Drain the finished tasks of a set without waiting.
fn reap(set: &mut JoinSet<()>) {
    while set.try_join_next().is_some() {}
}

/// The progress display: a bar on a terminal, plain lines otherwise, nothing when quiet.
struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    last: (Instant, u64),
}

impl Progress {
    fn new(show: bool, opts: &LoadTestArgs) -> Self {
        let (bar, plain) = match (show, std::io::stderr().is_terminal()) {
            (false, _) => (None, false),
            (true, false) => (None, true),
            (true, true) => {
                let (len, unit) = match (opts.flows, opts.effective_duration()) {
                    (Some(n), _) => (n, "flows"),
                    (None, d) => (d.map_or(0, |d| d.as_secs()), "s"),
                };
                let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
                let style = ProgressStyle::with_template(&format!(
                    "{{spinner}} {{elapsed_precise}} [{{bar:30.cyan/blue}}] {{pos}}/{{len}} {unit}  {{msg}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
                bar.set_style(style);
                (Some(bar), false)
            }
        };
        Progress {
            bar,
            plain,
            last: (Instant::now(), 0),
        }
    }

    fn tick(&mut self, ctx: &Ctx, p99_us: Option<u64>, tick: u64) {
        let now = Instant::now();
        let requests = ctx.live.requests.load(Relaxed);
        let dt = now.duration_since(self.last.0).as_secs_f64().max(1e-3);
        let rate = (requests - self.last.1) as f64 / dt;
        self.last = (now, requests);
        let errors = ctx.live.errors.load(Relaxed);
        let flows = ctx.live.flows.load(Relaxed);
        let p99 = p99_us.map_or("-".to_string(), |v| format!("{:.1} ms", v as f64 / 1000.0));
        let msg = format!("{rate:>7.0} req/s  p99 {p99}  errors {errors}  flows {flows}");
        if let Some(bar) = &self.bar {
            let pos = match ctx.flow_limit {
                Some(_) => ctx
                    .claimed
                    .load(Relaxed)
                    .min(bar.length().unwrap_or(u64::MAX)),
                None => now.duration_since(ctx.start).as_secs(),
            };
            bar.set_position(pos);
            bar.set_message(msg);
        } else if self.plain && tick.is_multiple_of(2) {
            eprintln!(
                "loadtest {:>5.1}s {msg}",
                now.duration_since(ctx.start).as_secs_f64()
            );
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Run the load described by `opts` and return the report.
pub(crate) async fn execute(opts: &LoadTestArgs, show_progress: bool) -> anyhow::Result<Report> {
    opts.validate()?;
    let scenario = Scenario::load(&opts.scenario)?;
    let templates = scenario
        .flows
        .iter()
        .map(FlowTemplate::new)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut cumulative = Vec::with_capacity(templates.len());
    let mut acc = 0u64;
    for t in &templates {
        acc += u64::from(t.weight);
        cumulative.push(acc);
    }
    let bad_template = templates
        .iter()
        .position(FlowTemplate::is_call)
        .unwrap_or(0);
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
    let labels: Vec<String> = templates.iter().map(|t| t.label.clone()).collect();
    let http = Http::new(&opts.target, opts.http_client).await?;
    let start = Instant::now();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let ctx = Arc::new(Ctx {
        http,
        templates,
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
            for w in 0..opts.concurrency.max(1) {
                let ctx = ctx.clone();
                set.spawn(async move {
                    let mut rng = StdRng::from_entropy();
                    while let Some(seq) = ctx.claim() {
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
            for seq in 0u64.. {
                if ctx.flow_limit.is_some_and(|n| seq >= n) {
                    break;
                }
                let intended = ctx.start + period.mul_f64(seq as f64);
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
    Ok(Report::new(
        opts.clone(),
        scenario,
        started_unix_ms,
        elapsed,
        total,
        p99_timeline,
    ))
}
