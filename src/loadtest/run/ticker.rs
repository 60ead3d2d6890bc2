//! The run's ticker: once a second, each shard's window of leg latencies merged into that
//! second's histogram (its p99 for the timeline, the encoded histogram so shards' timelines
//! merge exactly) and the live display updated.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::super::measure::new_hist;
use super::super::progress::Progress;
use super::Ctx;

/// The ticker task and what it collects.
pub(super) struct Ticker {
    /// The p99 of each second, for the timeline.
    p99s: Arc<Mutex<Vec<Option<u64>>>>,
    /// Each second's histogram, encoded (a few hundred bytes).
    windows: Arc<Mutex<Vec<String>>>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Ticker {
    /// Start ticking each second from the run's start, showing `progress`.
    pub(super) fn spawn(ctx: &Arc<Ctx>, mut progress: Progress) -> Ticker {
        let p99s: Arc<Mutex<Vec<Option<u64>>>> = Arc::default();
        let windows: Arc<Mutex<Vec<String>>> = Arc::default();
        let (stop, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = {
            let ctx = ctx.clone();
            let p99s = p99s.clone();
            let windows = windows.clone();
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
                    let p99 = second(&ctx, stop, &p99s, &windows);
                    if stop {
                        break;
                    }
                    progress.tick(&ctx, p99, tick);
                }
                progress.finish();
            })
        };
        Ticker {
            p99s,
            windows,
            stop,
            task,
        }
    }

    /// Tick a last time and stop; the p99 timeline and the encoded windows, one per second.
    pub(super) async fn stop(self) -> (Vec<Option<u64>>, Vec<String>) {
        let _ = self.stop.send(());
        let _ = self.task.await;
        let p99s = self.p99s.lock().expect("p99 lock").clone();
        let windows = self.windows.lock().expect("windows lock").clone();
        (p99s, windows)
    }
}

/// Close one second: merge and reset the shards' windows, keep its p99 and encoded histogram
/// (on `stop` only when legs were answered in that last, partial second), return its p99.
fn second(
    ctx: &Ctx,
    stop: bool,
    p99s: &Mutex<Vec<Option<u64>>>,
    windows: &Mutex<Vec<String>>,
) -> Option<u64> {
    let mut window = new_hist();
    for s in &ctx.shards {
        let mut m = s.lock().expect("measures lock");
        let _ = window.add(&m.window);
        m.window.reset();
    }
    let p99 = (!window.is_empty()).then(|| window.value_at_quantile(0.99));
    if !stop || p99.is_some() {
        p99s.lock().expect("p99 lock").push(p99);
        let w = super::super::wire::encode(&window).unwrap_or_default();
        windows.lock().expect("windows lock").push(w);
    }
    p99
}
