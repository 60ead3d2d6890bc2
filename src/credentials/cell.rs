//! One cached token with single-flight refresh: the client credentials token of a pool, or
//! one caller's exchanged token. A valid token is served at once; past its refresh point, the
//! first request starts one refresh in the background and every request meanwhile still gets
//! the valid token (nobody waits); without a valid token, every request waits on the same one
//! fetch. A failed fetch is remembered for [`FAIL_FAST`], so an endpoint that is down is asked
//! once per second, not once per request.

use futures::future::{BoxFuture, FutureExt, Shared};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::token::{Failure, Token};

/// How long a failed fetch answers for the cell before the endpoint is asked again.
pub(crate) const FAIL_FAST: Duration = Duration::from_secs(1);

type Fetch = Shared<BoxFuture<'static, Result<Token, Failure>>>;

/// How a request got its token (counted per pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A cached token, before its refresh point.
    Hit,
    /// A cached token still valid, while a refresh runs in the background.
    StaleRefresh,
    /// No valid token: the request waited on a fetch (its own or one already running).
    Miss,
}

impl Outcome {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::StaleRefresh => "stale_refresh",
            Outcome::Miss => "miss",
        }
    }
}

#[derive(Default)]
struct State {
    token: Option<Token>,
    running: Option<Fetch>,
    failed: Option<(Instant, Failure)>,
}

/// The cell. Cheap to create; share it behind an `Arc`.
#[derive(Default)]
pub(crate) struct Cell {
    state: Mutex<State>,
}

impl Cell {
    /// The token, from the cache or from `fetch` (called at most once at a time per cell; its
    /// future runs on its own task, so a request that gives up does not cancel it). `fetched`
    /// is told the result of every fetch this call started.
    pub(crate) async fn get<F>(
        self: &Arc<Self>,
        fetch: F,
        fetched: impl Fn(&Result<Token, Failure>) + Send + Sync + 'static,
    ) -> (Result<http::HeaderValue, Failure>, Outcome)
    where
        F: FnOnce() -> BoxFuture<'static, Result<Token, Failure>>,
    {
        let now = Instant::now();
        let running = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(t) = s.token.as_ref().filter(|t| now < t.valid_until) {
                let header = t.header.clone();
                if now < t.refresh_at {
                    return (Ok(header), Outcome::Hit);
                }
                if s.running.is_none() {
                    s.running = Some(self.start(fetch(), fetched));
                }
                return (Ok(header), Outcome::StaleRefresh);
            }
            if let Some((at, f)) = &s.failed {
                if now < *at + FAIL_FAST && s.running.is_none() {
                    return (Err(f.clone()), Outcome::Miss);
                }
            }
            match &s.running {
                Some(r) => r.clone(),
                None => {
                    let r = self.start(fetch(), fetched);
                    s.running = Some(r.clone());
                    r
                }
            }
        };
        (running.await.map(|t| t.header), Outcome::Miss)
    }

    /// Run `fut` on its own task; its result is stored in the cell when it ends.
    fn start(
        self: &Arc<Self>,
        fut: BoxFuture<'static, Result<Token, Failure>>,
        fetched: impl Fn(&Result<Token, Failure>) + Send + Sync + 'static,
    ) -> Fetch {
        let cell = self.clone();
        let task = tokio::spawn(async move {
            let r = fut.await;
            {
                let mut s = cell.state.lock().unwrap_or_else(|p| p.into_inner());
                s.running = None;
                match &r {
                    Ok(t) => {
                        s.token = Some(t.clone());
                        s.failed = None;
                    }
                    Err(f) => s.failed = Some((Instant::now(), f.clone())),
                }
            }
            // Counted once stored: a fetch the metrics show is the one requests get.
            fetched(&r);
            r
        });
        async move {
            task.await
                .unwrap_or_else(|e| Err(Failure::Local(format!("the token fetch stopped: {e}"))))
        }
        .boxed()
        .shared()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn fetcher(
        n: Arc<AtomicUsize>,
        life: Duration,
        delay: Duration,
    ) -> impl FnOnce() -> BoxFuture<'static, Result<Token, Failure>> {
        move || {
            async move {
                tokio::time::sleep(delay).await;
                let i = n.fetch_add(1, Ordering::SeqCst);
                let margin = life / 2;
                Ok(Token::new(&format!("t{i}"), life, margin, Instant::now()).unwrap())
            }
            .boxed()
        }
    }

    #[tokio::test]
    async fn concurrent_misses_share_one_fetch_and_refresh_does_not_stall() {
        let cell = Arc::new(Cell::default());
        let n = Arc::new(AtomicUsize::new(0));
        let life = Duration::from_millis(400);
        let delay = Duration::from_millis(50);
        let gets = (0..20).map(|_| {
            let (cell, n) = (cell.clone(), n.clone());
            async move { cell.get(fetcher(n, life, delay), |_| {}).await }
        });
        let got = futures::future::join_all(gets).await;
        assert_eq!(n.load(Ordering::SeqCst), 1, "one fetch for twenty requests");
        assert!(got
            .iter()
            .all(|(r, o)| r.as_ref().unwrap() == "Bearer t0" && *o == Outcome::Miss));
        // Past the refresh point (half its life).
        tokio::time::sleep(Duration::from_millis(220)).await;
        let t = Instant::now();
        let (r, o) = cell.get(fetcher(n.clone(), life, delay), |_| {}).await;
        assert!(t.elapsed() < delay, "served at once while the refresh runs");
        assert_eq!(
            (r.unwrap(), o),
            (
                http::HeaderValue::from_static("Bearer t0"),
                Outcome::StaleRefresh
            )
        );
        tokio::time::sleep(delay * 2).await;
        let (r, o) = cell.get(fetcher(n.clone(), life, delay), |_| {}).await;
        assert_eq!(
            (r.unwrap(), o),
            (http::HeaderValue::from_static("Bearer t1"), Outcome::Hit)
        );
        assert_eq!(n.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failure_answers_fast_for_a_second() {
        let cell = Arc::new(Cell::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let down = |c: Arc<AtomicUsize>| {
            move || {
                c.fetch_add(1, Ordering::SeqCst);
                async { Err(Failure::Unreachable("down".into())) }.boxed()
            }
        };
        for _ in 0..5 {
            let (r, _) = cell.get(down(calls.clone()), |_| {}).await;
            assert_eq!(r.unwrap_err().status(), 503);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
