//! How a gateway process stops and hands over: where the upgrade socket lives (a directory
//! only this user can enter), and the shutdown signals, with a SIGTERM drain that exits as
//! soon as nothing is in flight.

use async_trait::async_trait;
use pingora::server::{ShutdownSignal, ShutdownSignalWatch};
use std::path::PathBuf;
use std::time::Duration;

use crate::config::Config;

/// The socket an old and a new gateway process hand the listeners over on: one per MCP port,
/// so gateways on different ports of one machine never meet. It lives in a directory only this
/// user can enter (`$XDG_RUNTIME_DIR`, else `/tmp/mcp-edge-<uid>`, created mode 0700): in a
/// shared `/tmp`, another local user could bind the path first and be handed the listeners.
/// `shutdown.upgrade_socket` sets the path instead.
pub fn upgrade_socket(config: &Config) -> String {
    if let Some(p) = &config.shutdown.upgrade_socket {
        return p.display().to_string();
    }
    let dir = private_runtime_dir();
    format!(
        "{}/mcp-edge-{}.upgrade.sock",
        dir.display(),
        config.listen.mcp.port()
    )
}

/// A directory for runtime files that only the current user can use.
fn private_runtime_dir() -> PathBuf {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        if d.is_dir() {
            return d;
        }
    }
    // The owner of /proc/self is this process's user (no unsafe getuid call needed).
    let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
    let dir = PathBuf::from(format!("/tmp/mcp-edge-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() && m.uid() == uid && m.permissions().mode() & 0o077 == 0 => dir,
        _ => {
            tracing::error!(
                "{} is not a private directory of this user; set shutdown.upgrade_socket to a \
                 path only this user can write",
                dir.display()
            );
            dir
        }
    }
}

/// pingora's signals (SIGTERM drains, SIGINT stops, SIGQUIT hands over), except that a process
/// draining on SIGTERM exits as soon as no request is in flight (after half a second) instead of
/// sleeping out the whole `shutdown.grace_period` (which stays the upper bound).
pub(super) struct StopWhenDrained;

#[async_trait]
impl ShutdownSignalWatch for StopWhenDrained {
    async fn recv(&self) -> ShutdownSignal {
        let signal = pingora::server::UnixShutdownSignalWatch.recv().await;
        // Only a terminating process: an upgrading one hands its listeners over and keeps
        // serving the connections it has (TLS handshakes among them, before any request exists)
        // for the whole grace period, as pingora does.
        if matches!(signal, ShutdownSignal::GracefulTerminate) {
            std::thread::spawn(exit_when_drained);
        }
        signal
    }
}

/// Exit once no request has been in flight for a few consecutive looks (the listeners close
/// as soon as the signal is returned; a connection accepted just before gets its request read).
fn exit_when_drained() {
    // Connections accepted just before the listener closed get time to send their request.
    std::thread::sleep(Duration::from_millis(500));
    let mut idle = 0;
    while idle < 5 {
        std::thread::sleep(Duration::from_millis(50));
        idle = if crate::gateway::journey::request::in_flight() == 0 {
            idle + 1
        } else {
            0
        };
    }
    tracing::info!("drained: no request in flight; exiting");
    std::process::exit(0);
}
