//! The issuer's signing keys (JWKS): loaded from a file or fetched over HTTP(S), used for as long
//! as `Cache-Control: max-age` says (clamped to `[min_refresh, 24h]`, `refresh` without it),
//! refreshed in the background, and re-fetched when a token names an unknown `kid` (at most once
//! per `unknown_kid_interval`, so invented key ids cannot flood the issuer). A failed refresh
//! keeps the keys in use; failures and the age of the set are metrics.
//!
//! Fetches are single-flight: at most one is under way, and every caller that asks while it
//! runs waits for it and uses its outcome, success or failure (the first requests on a cold
//! gateway all wait on the one first fetch instead of being refused). An outcome is never
//! reused after it was delivered: a request that arrives after a failed fetch starts the next one.

use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use super::jwt::KeySet;
use super::metrics::AuthMetrics;
use crate::config::auth::JwksConfig;
use crate::fetch;

/// The longest a fetched key set is used without asking again.
const MAX_AGE_CAP: Duration = Duration::from_secs(24 * 3600);

/// A key set and when it was obtained.
pub(crate) struct Loaded {
    pub set: KeySet,
    pub at: Instant,
    /// The file's modification time (file sources).
    mtime: Option<SystemTime>,
}

struct Schedule {
    /// When the set is due for a scheduled refresh.
    due: Instant,
    /// The last fetch started because of an unknown `kid`.
    last_unknown_kid: Option<Instant>,
    /// Whether the background task runs.
    refresher: bool,
}

/// The keys of one `auth.jwks` source.
pub struct KeyStore {
    pub config: JwksConfig,
    current: ArcSwap<Loaded>,
    schedule: Mutex<Schedule>,
    /// Held for the length of a fetch: one at a time; the others queue on it.
    fetching: tokio::sync::Mutex<()>,
    /// Fetches finished (whatever their outcome): a caller that sees it change while it queued
    /// uses that outcome rather than fetching again.
    finished: AtomicU64,
    metrics: Arc<AuthMetrics>,
    /// TLS settings for an https URL.
    tls: Arc<rustls::ClientConfig>,
}

/// `max-age` of a `Cache-Control` value, `Some(0)` for `no-cache`/`no-store`.
pub(crate) fn max_age(cache_control: &str) -> Option<Duration> {
    let mut found = None;
    for d in cache_control.split(',').map(str::trim) {
        let lower = d.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(Duration::ZERO);
        }
        if let Some(v) = lower.strip_prefix("max-age=") {
            found = v
                .trim_matches('"')
                .parse::<u64>()
                .ok()
                .map(Duration::from_secs);
        }
    }
    found
}

/// How long to use a set fetched with this `Cache-Control`.
pub(crate) fn lifetime(cfg: &JwksConfig, cache_control: Option<&str>) -> Duration {
    cache_control
        .and_then(max_age)
        .unwrap_or(cfg.refresh)
        .clamp(cfg.min_refresh, MAX_AGE_CAP.max(cfg.min_refresh))
}

impl KeyStore {
    /// A store; a file source is read now (an unreadable or invalid file is a config error), a
    /// URL source starts empty and is fetched on first use.
    pub(crate) fn new(config: JwksConfig, metrics: Arc<AuthMetrics>) -> anyhow::Result<KeyStore> {
        let now = Instant::now();
        let loaded = match &config.file {
            Some(path) => read_file(path)?,
            None => Loaded {
                set: KeySet::default(),
                at: now,
                mtime: None,
            },
        };
        let due = if config.file.is_some() {
            now + config.refresh
        } else {
            now
        };
        let tls = fetch::tls_config(config.ca_file.as_deref())?;
        Ok(KeyStore {
            tls,
            config,
            current: ArcSwap::from_pointee(loaded),
            schedule: Mutex::new(Schedule {
                due,
                last_unknown_kid: None,
                refresher: false,
            }),
            fetching: tokio::sync::Mutex::new(()),
            finished: AtomicU64::new(0),
            metrics,
        })
    }

    pub(crate) fn current(&self) -> Arc<Loaded> {
        self.current.load_full()
    }

    fn schedule(&self) -> std::sync::MutexGuard<'_, Schedule> {
        self.schedule.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start the background refresher once (on the runtime of the first request that needs it).
    pub(crate) fn ensure_refresher(self: &Arc<Self>) {
        {
            let mut s = self.schedule();
            if s.refresher {
                return;
            }
            s.refresher = true;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(refresh_loop(weak));
    }

    /// Keys to check a token against: the current set, re-fetched first when it is empty (every
    /// caller waits on the one fetch under way) or does not know `kid` (rate-limited; a caller
    /// over the rate still waits for a fetch already under way).
    pub(crate) async fn keys_for(&self, kid: Option<&str>) -> Arc<Loaded> {
        let cur = self.current();
        if cur.set.keys.is_empty() {
            // Never loaded (a URL source before its first successful fetch).
            self.single_flight(true).await;
            return self.current();
        }
        if kid.is_none_or(|k| cur.set.has_kid(k)) {
            return cur;
        }
        let allowed = {
            let mut s = self.schedule();
            let now = Instant::now();
            let ok = s
                .last_unknown_kid
                .is_none_or(|t| now.duration_since(t) >= self.config.unknown_kid_interval);
            if ok {
                s.last_unknown_kid = Some(now);
            }
            ok
        };
        self.single_flight(allowed).await;
        self.current()
    }

    /// Fetch (or re-read) the set now, or share the fetch already under way.
    pub(crate) async fn refresh(&self) {
        self.single_flight(true).await;
    }

    /// Wait for the fetch under way and use its outcome; with none under way, fetch when
    /// `may_start`. The outcome is shared only with the callers that queued while it ran.
    async fn single_flight(&self, may_start: bool) {
        let seen = self.finished.load(Ordering::Acquire);
        let _one = self.fetching.lock().await;
        if !may_start || self.finished.load(Ordering::Acquire) != seen {
            return;
        }
        self.fetch_now().await;
        self.finished.fetch_add(1, Ordering::Release);
    }

    /// Fetch (or re-read) the set; on failure keep the old one and count it. Only under
    /// `fetching`.
    async fn fetch_now(&self) {
        let result = match (&self.config.url, &self.config.file) {
            (Some(url), _) => fetch::get(url, self.config.timeout, &self.tls)
                .await
                .and_then(|(body, cc)| {
                    let set = KeySet::parse(&body).map_err(|e| format!("{url}: {e}"))?;
                    Ok((set, lifetime(&self.config, cc.as_deref()), None))
                }),
            (None, Some(path)) => {
                let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
                if mtime.is_some() && mtime == self.current().mtime {
                    self.schedule().due = Instant::now() + self.config.refresh;
                    return;
                }
                read_file(path)
                    .map(|l| (l.set, self.config.refresh, l.mtime))
                    .map_err(|e| format!("{e:#}"))
            }
            (None, None) => Err("no JWKS source".into()),
        };
        let now = Instant::now();
        match result {
            Ok((set, life, mtime)) => {
                if set.keys.is_empty() {
                    self.metrics.jwks_failures.inc();
                    tracing::warn!(
                        "auth: the JWKS has no usable public key ({} skipped); keeping the previous keys",
                        set.skipped
                    );
                    self.schedule().due = now + self.config.min_refresh;
                    return;
                }
                self.current.store(Arc::new(Loaded {
                    set,
                    at: now,
                    mtime,
                }));
                self.schedule().due = now + life;
                self.metrics.jwks_age.set(0);
            }
            Err(e) => {
                self.metrics.jwks_failures.inc();
                tracing::warn!("auth: JWKS refresh failed, keeping the keys in use: {e}");
                self.schedule().due = now + self.config.min_refresh;
            }
        }
    }

    /// Time until the next scheduled refresh.
    fn until_due(&self) -> Duration {
        self.schedule()
            .due
            .saturating_duration_since(Instant::now())
    }
}

fn read_file(path: &std::path::Path) -> anyhow::Result<Loaded> {
    let body = std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("auth.jwks.file: cannot read {}: {e}", path.display()))?;
    let set = KeySet::parse(&body)
        .map_err(|e| anyhow::anyhow!("auth.jwks.file: {}: {e}", path.display()))?;
    if set.keys.is_empty() {
        anyhow::bail!(
            "auth.jwks.file: {} has no usable public key (RSA, EC or OKP; {} skipped)",
            path.display(),
            set.skipped
        );
    }
    let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    Ok(Loaded {
        set,
        at: Instant::now(),
        mtime,
    })
}

/// Refresh when due and keep the age gauge current, until the store is dropped (a reload that
/// changed `auth.jwks`, or shutdown).
async fn refresh_loop(store: Weak<KeyStore>) {
    loop {
        let wait = {
            let Some(s) = store.upgrade() else { return };
            if s.until_due().is_zero() {
                s.refresh().await;
            }
            let age = s.current().at.elapsed().as_secs();
            s.metrics.jwks_age.set(age as i64);
            s.until_due().min(Duration::from_secs(1))
        };
        tokio::time::sleep(wait.max(Duration::from_millis(50))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> JwksConfig {
        JwksConfig {
            file: None,
            url: Some("http://127.0.0.1:1/jwks".into()),
            refresh: Duration::from_secs(300),
            min_refresh: Duration::from_secs(30),
            unknown_kid_interval: Duration::from_secs(10),
            timeout: Duration::from_secs(1),
            ca_file: None,
        }
    }

    #[test]
    fn cache_control() {
        assert_eq!(
            max_age("public, max-age=600"),
            Some(Duration::from_secs(600))
        );
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
        let c = cfg();
        assert_eq!(lifetime(&c, Some("max-age=600")), Duration::from_secs(600));
        assert_eq!(
            lifetime(&c, Some("max-age=1")),
            Duration::from_secs(30),
            "floored"
        );
        assert_eq!(
            lifetime(&c, Some("max-age=99999999")),
            MAX_AGE_CAP,
            "capped"
        );
        assert_eq!(lifetime(&c, None), Duration::from_secs(300));
        assert_eq!(lifetime(&c, Some("no-cache")), Duration::from_secs(30));
    }
}
