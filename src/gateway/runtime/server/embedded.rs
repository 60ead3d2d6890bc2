//! A gateway running on its own thread inside another program (the demo, tests): started with
//! a config, reloaded, stopped by a trigger instead of a signal (fast, or draining like
//! SIGTERM), and stopped when dropped.

use async_trait::async_trait;
use pingora::server::{RunArgs, ShutdownSignal, ShutdownSignalWatch};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{build_server, Live, StartOptions};
use crate::config::Config;
use crate::gateway::journey::state::Gateway;

/// A shutdown trigger for an embedded gateway; `graceful` drains like SIGTERM.
struct Trigger {
    notify: Arc<tokio::sync::Notify>,
    graceful: bool,
}

#[async_trait]
impl ShutdownSignalWatch for Trigger {
    async fn recv(&self) -> ShutdownSignal {
        self.notify.notified().await;
        if self.graceful {
            ShutdownSignal::GracefulTerminate
        } else {
            ShutdownSignal::FastShutdown
        }
    }
}

/// A gateway running on its own thread (for the demo and tests).
pub struct RunningGateway {
    stop: Arc<tokio::sync::Notify>,
    thread: Option<std::thread::JoinHandle<()>>,
    live: Arc<Live>,
    pub mcp_addr: std::net::SocketAddr,
    pub admin_addr: Option<std::net::SocketAddr>,
}

impl RunningGateway {
    /// Start a gateway and wait until its MCP and admin listeners accept connections.
    pub fn start(config: Config) -> anyhow::Result<RunningGateway> {
        Self::start_with(config, false)
    }

    /// Like [`RunningGateway::start`]; with `graceful`, stopping drains like SIGTERM (the
    /// listener closes, requests in flight finish within `shutdown.grace_period`).
    pub fn start_with(config: Config, graceful: bool) -> anyhow::Result<RunningGateway> {
        let (mcp_addr, admin_addr) = (config.listen.mcp, config.listen.admin);
        let (server, live) = build_server(config, StartOptions::default())?;
        let stop = Arc::new(tokio::sync::Notify::new());
        let trigger = Trigger {
            notify: stop.clone(),
            graceful,
        };
        let thread = std::thread::Builder::new()
            .name("mcp-edge-gateway".into())
            .spawn(move || {
                server.run(RunArgs {
                    shutdown_signal: Box::new(trigger),
                });
            })?;
        // The listeners start on their own runtimes: wait for each (TLS and h2c ones too).
        let deadline = Instant::now() + Duration::from_secs(10);
        let addrs = live.listeners.as_ref().map(|l| l.addresses());
        for addr in addrs.unwrap_or_else(|| std::iter::once(mcp_addr).chain(admin_addr).collect()) {
            while std::net::TcpStream::connect(addr).is_err() {
                if Instant::now() > deadline {
                    anyhow::bail!("the gateway did not start listening on {addr} within 10 s");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(RunningGateway {
            stop,
            thread: Some(thread),
            live,
            mcp_addr,
            admin_addr,
        })
    }

    /// Apply a new config, as a reload does.
    pub fn reload(&self, config: Config) -> anyhow::Result<()> {
        self.live.replace(config)
    }

    /// The gateway new requests use.
    pub fn current(&self) -> Arc<Gateway> {
        self.live.load()
    }

    /// Ask the gateway to stop without waiting for it.
    pub fn begin_shutdown(&self) {
        self.stop.notify_one();
    }

    /// Stop the gateway and wait for its thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.notify_one();
            let _ = t.join();
        }
    }
}

impl Drop for RunningGateway {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}
