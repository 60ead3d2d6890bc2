//! The live gateway: the current [`Gateway`], swapped whole on reload. Each request takes the
//! current one when it starts and keeps it to the end, so a reload applies to new requests while
//! requests in flight finish on the config they started with. A config that fails to load is
//! refused with a log line naming the error, and the old one keeps serving.

use arc_swap::ArcSwap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::gateway::journey::state::Gateway;
use crate::gateway::telemetry::metrics::Outcome;
use crate::gateway::transport::head_deadline;
use crate::gateway::transport::listeners::Listeners;

/// The live gateway, swapped whole on reload.
pub struct Live {
    current: ArcSwap<Gateway>,
    /// The file a reload reads, when the gateway was started from one.
    source: Option<PathBuf>,
    /// One reload at a time: SIGHUP, `POST /-/reload` and a DNS refresh never interleave, so
    /// the file read last is the one that wins.
    reloading: std::sync::Mutex<()>,
    /// The listeners, whose certificates a reload re-reads ([`listeners`]).
    pub(crate) listeners: Option<Arc<Listeners>>,
    /// The last reload from the file: when, and its error if it was refused (the console).
    last_reload: std::sync::Mutex<Option<(std::time::SystemTime, Result<(), String>)>>,
}

impl Live {
    pub fn new(gateway: Gateway, source: Option<PathBuf>) -> Live {
        Live {
            current: ArcSwap::from_pointee(gateway),
            source,
            reloading: std::sync::Mutex::new(()),
            listeners: None,
            last_reload: std::sync::Mutex::new(None),
        }
    }

    /// Reload from the file on a blocking thread (file reads and DNS must not stall the
    /// runtime that serves `/healthz`, `/metrics` and requests).
    pub(crate) async fn reload_in_background(self: &Arc<Self>) -> Result<(), String> {
        let live = self.clone();
        tokio::task::spawn_blocking(move || live.reload_from_file())
            .await
            .unwrap_or_else(|e| Err(format!("reload task failed: {e}")))
    }

    /// Re-read these listeners' certificates on every reload.
    pub(crate) fn with_listeners(mut self, listeners: Arc<Listeners>) -> Live {
        self.listeners = Some(listeners);
        self
    }

    /// The gateway new requests use.
    pub fn load(&self) -> Arc<Gateway> {
        self.current.load_full()
    }

    /// Apply a new config: build the new gateway (carrying state over), then swap it in.
    pub(crate) fn replace(&self, config: Config) -> anyhow::Result<()> {
        let _one = self.reloading.lock().unwrap_or_else(|p| p.into_inner());
        self.replace_locked(config)
    }

    fn replace_locked(&self, config: Config) -> anyhow::Result<()> {
        let old = self.load();
        let (a, b) = (&old.config, &config);
        if a.listen.mcp != b.listen.mcp
            || a.listen.admin != b.listen.admin
            || a.threads != b.threads
            || a.work_stealing != b.work_stealing
        {
            tracing::warn!("reload: listen addresses, threads and work_stealing keep their old values until a restart");
        }
        // `connections.upstream_leg` is read per request: it applies with the reload.
        let (ca, cb) = (&a.connections, &b.connections);
        if (ca.read_buffer, ca.write_buffer, ca.park_idle)
            != (cb.read_buffer, cb.write_buffer, cb.park_idle)
        {
            tracing::warn!(
                "reload: connections (buffers, park_idle) keep their old values until a restart"
            );
        }
        // Certificates are read and checked first; they are swapped in only with the config.
        let staged = match &self.listeners {
            Some(l) => Some(l.stage(&config).map_err(anyhow::Error::msg)?),
            None => None,
        };
        let new = Gateway::new(config, Some(&old))?;
        self.current.store(Arc::new(new));
        if let Some(staged) = staged {
            staged.commit();
        }
        Ok(())
    }

    /// Reload from the config file; on error the old config keeps serving.
    pub fn reload_from_file(&self) -> Result<(), String> {
        let Some(path) = &self.source else {
            return Err(
                "this gateway was not started from a config file; nothing to reload".into(),
            );
        };
        let _one = self.reloading.lock().unwrap_or_else(|p| p.into_inner());
        let result = Config::load(path)
            .map_err(|e| e.to_string())
            .and_then(|c| self.replace_locked(c).map_err(|e| format!("{e:#}")));
        match &result {
            Ok(()) => tracing::info!("reloaded {}", path.display()),
            Err(e) => tracing::error!("reload refused, the previous config keeps serving: {e}"),
        }
        let mut last = self.last_reload.lock().unwrap_or_else(|p| p.into_inner());
        *last = Some((std::time::SystemTime::now(), result.clone()));
        result
    }

    /// The last reload from the file (`None`: none since start): when, and its error.
    pub(crate) fn last_reload(&self) -> Option<(std::time::SystemTime, Result<(), String>)> {
        self.last_reload
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The head deadline reads the live config at each connection (a reload's timeouts apply to
/// the next one) and counts its 408s in the live metrics.
impl head_deadline::Settings for Live {
    fn request_head(&self) -> Duration {
        self.load().config.timeouts.request_head
    }

    fn close_idle_after(&self) -> Duration {
        let shutdown = &self.load().config.shutdown;
        shutdown.close_idle_after.min(shutdown.grace_period)
    }

    fn record(&self, outcome: &Outcome) {
        self.load().metrics.record(outcome);
    }
}
