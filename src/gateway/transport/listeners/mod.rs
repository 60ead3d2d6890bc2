//! The gateway's listeners as pingora sees them: which address speaks TLS (and with what
//! material), which plain one accepts h2c, how they are attached to pingora services, the
//! certificate-expiry metric, and the reload of certificates (stage every file first, then
//! swap them all, so a bad file leaves every listener as it was).
//!
//! The set of listeners and their addresses, ALPN and h2c are fixed at start; a reload that
//! changes them warns that they need a restart. Certificates, keys, `client_ca` and
//! `min_version` are re-read on every reload.

use pingora::apps::HttpServerOptions;
use pingora::listeners::{ListenerConfig, PreTlsProcess};
use pingora::protocols::l4::stream::L4BufferSettings;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::GetSocketDigest;
use pingora::services::listening::Service;
use prometheus::{GaugeVec, Registry};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::tls::{ListenerOptions, UpstreamHttp};
use crate::config::Config;
use crate::gateway::transport::client_hello;
use crate::gateway::transport::tls::{self, Loaded, Shared};
use crate::gateway::transport::upstream_tls::PoolPeers;

mod options;
pub(crate) use options::HasServerOptions;

/// One listener.
pub(crate) struct Listener {
    /// Its key in gateway.yaml: `listen.mcp`, `listen.extra[0]`, `listen.admin`.
    pub key: String,
    pub address: SocketAddr,
    pub options: ListenerOptions,
    /// Live TLS state, for TLS listeners.
    pub tls: Option<Arc<Shared>>,
}

/// Every listener of a gateway.
pub(crate) struct Listeners {
    pub mcp: Vec<Listener>,
    pub admin: Option<Listener>,
    expiry: GaugeVec,
    /// The read and write buffers of each accepted connection (`connections:`).
    buffers: L4BufferSettings,
}

/// The listeners a config describes: (key, address, options), MCP ones first, then admin.
fn described(cfg: &Config) -> Vec<(String, SocketAddr, ListenerOptions)> {
    let l = &cfg.listen;
    let mut out = vec![("listen.mcp".to_string(), l.mcp, l.tls.mcp.clone())];
    for (i, e) in l.tls.extra.iter().enumerate() {
        out.push((format!("listen.extra[{i}]"), e.address, e.options.clone()));
    }
    if let Some(a) = l.admin {
        out.push(("listen.admin".into(), a, l.tls.admin.clone()));
    }
    out
}

/// Load the TLS files of every TLS listener of a config; the error names the listener and file.
pub(crate) fn load_all(cfg: &Config) -> Result<Vec<(String, Option<Loaded>)>, String> {
    described(cfg)
        .into_iter()
        .map(|(key, _, o)| match &o.tls {
            Some(t) => tls::load(t)
                .map(|l| (key.clone(), Some(l)))
                .map_err(|e| format!("{key}.tls: {e}")),
            None => Ok((key, None)),
        })
        .collect()
}

impl Listeners {
    /// Load every listener's TLS files (refusing the config if one is bad).
    pub(crate) fn new(cfg: &Config) -> anyhow::Result<Listeners> {
        let mut loaded = load_all(cfg).map_err(anyhow::Error::msg)?.into_iter();
        let mut mcp = Vec::new();
        let mut admin = None;
        for (key, address, options) in described(cfg) {
            let tls = loaded.next().and_then(|(_, l)| l).map(Shared::new);
            let l = Listener {
                key,
                address,
                options,
                tls,
            };
            if l.key == "listen.admin" {
                admin = Some(l);
            } else {
                mcp.push(l);
            }
        }
        let expiry = crate::gateway::telemetry::metrics::listeners::certificate_expiry()?;
        let c = &cfg.connections;
        let buffers = L4BufferSettings::new(c.read_buffer, c.write_buffer);
        let me = Listeners {
            mcp,
            admin,
            expiry,
            buffers,
        };
        me.publish();
        Ok(me)
    }

    fn all(&self) -> impl Iterator<Item = &Listener> {
        self.mcp.iter().chain(self.admin.as_ref())
    }

    /// Every listening address (MCP ones, then admin).
    pub(crate) fn addresses(&self) -> Vec<SocketAddr> {
        self.all().map(|l| l.address).collect()
    }

    /// Set the expiry metric from the current certificates.
    fn publish(&self) {
        self.expiry.reset();
        for l in self.all() {
            if let Some(s) = &l.tls {
                for c in s.load().certificates() {
                    self.expiry
                        .with_label_values(&[&l.key, &c.file])
                        .set(c.not_after as f64);
                }
            }
        }
    }

    /// Add the expiry metric to a registry (the gateway's, which outlives reloads).
    pub(crate) fn register(&self, registry: &Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.expiry.clone()))
    }

    /// Re-read the certificates of a new config; nothing changes unless every file loads.
    /// Returns the swap to apply once the rest of the new config is accepted too.
    pub(crate) fn stage(&self, cfg: &Config) -> Result<Staged<'_>, String> {
        let loaded = load_all(cfg)?;
        let described = described(cfg);
        let mut swaps = Vec::new();
        let same_set = described.len() == self.all().count();
        for ((key, address, options), (_, new)) in described.into_iter().zip(loaded) {
            let Some(old) = self.all().find(|l| l.key == key) else {
                continue;
            };
            let shape_changed = old.address != address
                || old.options.h2c != options.h2c
                || old.options.tls.is_some() != options.tls.is_some()
                || old.options.tls.as_ref().map(|t| &t.alpn)
                    != options.tls.as_ref().map(|t| &t.alpn);
            if shape_changed {
                tracing::warn!("reload: {key}: the address, TLS on/off, alpn and h2c keep their old values until a restart");
            }
            if let (Some(shared), Some(new)) = (&old.tls, new) {
                swaps.push((shared.clone(), new));
            }
        }
        if !same_set {
            tracing::warn!("reload: adding or removing listeners needs a restart");
        }
        Ok(Staged { owner: self, swaps })
    }

    /// Attach the MCP listeners to proxy services: one service per h2c setting (pingora sets
    /// h2c per service). `make` builds an empty proxy service.
    pub(crate) fn attach_mcp<A, F>(&self, mut make: F) -> anyhow::Result<Vec<Service<A>>>
    where
        F: FnMut() -> Service<A>,
        A: HasServerOptions,
    {
        let mut services = Vec::new();
        for h2c in [false, true] {
            let group: Vec<&Listener> = self.mcp.iter().filter(|l| l.options.h2c == h2c).collect();
            if group.is_empty() {
                continue;
            }
            let mut svc = make();
            if h2c {
                let mut opts = HttpServerOptions::default();
                opts.h2c = true;
                svc.app_logic_mut()
                    .expect("a new service has its app")
                    .set_server_options(opts);
            }
            for l in &group {
                attach(&mut svc, l, self.buffers)?;
            }
            gate(&mut svc, &group);
            services.push(svc);
        }
        Ok(services)
    }

    /// Attach the admin listener (TLS or plain) to its service.
    pub(crate) fn attach_admin<A>(&self, svc: &mut Service<A>) -> anyhow::Result<()> {
        if let Some(l) = &self.admin {
            attach(svc, l, self.buffers)?;
            gate(svc, &[l]);
        }
        Ok(())
    }
}

/// Refuses, before the handshake, TLS clients below a listener's `min_version` (see
/// [`crate::gateway::transport::client_hello`]): a `protocol_version` alert, then the connection is closed. On such
/// a listener only a ClientHello read whole that offers TLS 1.3 reaches rustls.
struct VersionGate {
    listeners: Vec<(SocketAddr, Arc<Shared>)>,
}

#[async_trait::async_trait]
impl PreTlsProcess for VersionGate {
    async fn process(&self, stream: &mut L4Stream) -> pingora::Result<()> {
        use pingora::protocols::Peek;
        let local = stream
            .get_socket_digest()
            .and_then(|d| d.local_addr().and_then(|a| a.as_inet()).copied());
        let Some(local) = local else { return Ok(()) };
        let strict = self.listeners.iter().any(|(a, s)| {
            a.port() == local.port()
                && (a.ip() == local.ip() || a.ip().is_unspecified())
                && s.requires_tls13()
        });
        if !strict {
            return Ok(());
        }
        // Peek (read, then put back) as many records as carry the ClientHello.
        let peek = async {
            let mut seen = Vec::new();
            while let Some(n) = client_hello::wanted(&seen) {
                seen.resize(n, 0);
                stream.try_peek(&mut seen).await.ok()?;
            }
            Some(client_hello::offer(&seen))
        };
        let offer = tokio::time::timeout(Duration::from_secs(10), peek).await;
        // Only an offer read whole goes on: a ClientHello the gate cannot read (malformed, cut
        // short, fragmented past its bounds, too slow) is one it cannot vouch for.
        if !matches!(offer, Ok(Some(client_hello::Offer::Tls13))) {
            use tokio::io::AsyncWriteExt;
            let _ = stream
                .write_all(&client_hello::PROTOCOL_VERSION_ALERT)
                .await;
            let _ = stream.flush().await;
            tracing::debug!("TLS handshake refused on {local}: no TLS 1.3 offer in the client's ClientHello (tls.min_version)");
            return pingora::Error::e_explain(
                pingora::ErrorType::HandshakeError,
                "the client does not offer TLS 1.3 (tls.min_version)",
            );
        }
        Ok(())
    }
}

/// Install the version gate on a service whose listeners include TLS ones.
fn gate<A>(svc: &mut Service<A>, group: &[&Listener]) {
    let listeners: Vec<_> = group
        .iter()
        .filter_map(|l| l.tls.clone().map(|s| (l.address, s)))
        .collect();
    if !listeners.is_empty() {
        svc.endpoints()
            .set_pre_tls_callback(Arc::new(VersionGate { listeners }));
    }
}

fn attach<A>(svc: &mut Service<A>, l: &Listener, buffers: L4BufferSettings) -> anyhow::Result<()> {
    let mut endpoint = ListenerConfig::tcp(l.address.to_string()).l4_buffer(buffers);
    if let Some(s) = &l.tls {
        endpoint = endpoint.tls(s.settings()?);
    }
    svc.add_listener(endpoint);
    Ok(())
}

/// Certificates read and checked, waiting to be swapped in.
pub(crate) struct Staged<'a> {
    owner: &'a Listeners,
    swaps: Vec<(Arc<Shared>, Loaded)>,
}

impl Staged<'_> {
    /// New handshakes use the new certificates from now on.
    pub(crate) fn commit(self) {
        for (shared, new) in self.swaps {
            shared.replace(new);
        }
        self.owner.publish();
    }
}

/// Every listener with its protocols and certificates, for `mcp-edge check`; warns about
/// certificates that expire within `warn_days`. Returns the text and the warnings.
pub fn describe(cfg: &Config, now: i64, warn_days: i64) -> Result<(String, Vec<String>), String> {
    let loaded = load_all(cfg)?;
    let mut out = String::from("listeners\n");
    let mut warnings = Vec::new();
    for ((key, addr, o), (_, l)) in described(cfg).into_iter().zip(loaded) {
        let _ = writeln!(out, "  {key:<16} {addr:<22} {}", tls::protocols(&o));
        for c in l.iter().flat_map(|l| l.certificates()) {
            let days = (c.not_after - now).div_euclid(86_400);
            let when = format_utc(c.not_after);
            let names = if c.names.is_empty() {
                "-".to_string()
            } else {
                c.names.join(" ")
            };
            let _ = writeln!(
                out,
                "  {:<16} cert {} ({}): subject {}, expires {when} ({days} days), SNI {names}",
                "", c.file, key, c.subject
            );
            if c.not_after <= now {
                warnings.push(format!("{key}: certificate {} EXPIRED on {when}", c.file));
            } else if c.not_after - now < warn_days * 86_400 {
                warnings.push(format!(
                    "{key}: certificate {} expires in {days} days ({when}); renew it",
                    c.file
                ));
            }
        }
    }
    // Upstream TLS: the files are read and checked as `serve` would.
    for (name, p) in &cfg.pools {
        let http = match p.http {
            UpstreamHttp::H1 => "HTTP/1.1",
            UpstreamHttp::H2 if p.tls.is_some() => "h2 (ALPN)",
            UpstreamHttp::H2 => "h2c (prior knowledge)",
            UpstreamHttp::Auto => "h2 or HTTP/1.1 by ALPN",
        };
        let Some(t) = &p.tls else {
            if p.http != UpstreamHttp::H1 {
                let _ = writeln!(out, "  pool {name:<11} plain, {http}");
            }
            continue;
        };
        PoolPeers::build(name, p).map_err(|e| format!("{e:#}"))?;
        let ca = t
            .ca_file
            .as_ref()
            .map_or("the system's CAs".to_string(), |f| f.display().to_string());
        let verify = if t.verify {
            "verified"
        } else {
            "NOT verified (verify: false)"
        };
        let client = t.client_cert.as_ref().map_or(String::new(), |c| {
            format!(", client certificate {}", c.display())
        });
        let sni = t.sni.as_deref().unwrap_or("each instance's host");
        let _ = writeln!(
            out,
            "  pool {name:<11} TLS to instances, {verify} against {ca}, SNI {sni}{client}; {http}"
        );
    }
    Ok((out, warnings))
}

/// `2026-12-01 08:00 UTC` from Unix seconds.
pub(crate) fn format_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests;
