//! The live progress display of a run: a bar on a terminal, plain lines otherwise, nothing when
//! quiet; requests per second, the last second's p99, errors and completed flows.

use std::io::IsTerminal as _;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::ctx::Ctx;
use super::LoadTestArgs;

/// The progress display: a bar on a terminal, plain lines otherwise, nothing when quiet.
pub(super) struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    last: (Instant, u64),
}

impl Progress {
    pub(super) fn new(show: bool, opts: &LoadTestArgs) -> Self {
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

    pub(super) fn tick(&mut self, ctx: &Ctx, p99_us: Option<u64>, tick: u64) {
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

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
