//! The `requestState` seal stage (`pools.<name>.mrtr.seal`): a pool's key ring, TTL and bound,
//! its one-time record (this replica's, or Redis's with `one_time: global`), and what one
//! request carries from its check to its response (who is calling, its body for the arguments'
//! digest, how its response is being rewritten). The envelope itself is
//! [`crate::mcp::state_seal`]; the journey's glue (reading the request, editing the bodies) is
//! `gateway::journey::seal`. No I/O but reading the key file when a gateway is built, and the
//! Redis record of `one_time: global`.

use std::collections::{HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::config::mrtr::{OneTime, SealConfig};
use crate::config::OnStoreError;
use crate::gateway::rate_limits::stages::store::GlobalStore;
use crate::mcp::seal::{now_ms, Sealer, StateKeys};
use crate::mcp::state_seal::{self, rewrite::SseSealer, Binding, Refused};

/// The most redeemed states a replica remembers (one-time use); past it the oldest is
/// forgotten, and counted.
const USED_MAX: usize = 200_000;

/// The largest JSON response held to find its state; a larger one goes on unsealed (counted).
pub(crate) const JSON_HOLD_MAX: usize = 1024 * 1024;

/// One pool's sealing.
pub struct PoolSeal {
    pub(crate) config: SealConfig,
    sealer: Sealer,
    /// The record of redeemed states (`one_time`).
    once: Once,
}

/// Where a pool records the states it redeemed.
enum Once {
    /// Nowhere: a state may be presented until it expires.
    Off,
    /// This replica's record.
    Local(Arc<Used>),
    /// Redis, shared by every replica; `local` decides when Redis cannot answer and the
    /// policy says so.
    Global {
        store: Arc<GlobalStore>,
        policy: OnStoreError,
        local: Arc<Used>,
        /// The `limit` label of the store's fallback counter: `mrtr.seal:<pool>`.
        label: String,
    },
}

/// Why a retry's state was not opened.
#[derive(Debug)]
pub enum NotOpened {
    /// The state itself is refused (the client's fault): -32602 in band.
    Refused(Refused),
    /// Redis could not say whether it was used, and the pool's policy is `deny` (503, -31019):
    /// the state was not spent.
    RecordUnavailable,
}

impl PoolSeal {
    /// The pool's sealing from its config: the key file is read now (an error names the key
    /// and the file). A reload that keeps `one_time` keeps the record of used states;
    /// `store`: the gateway's Redis client (`one_time: global`).
    pub fn build(
        pool: &str,
        cfg: &SealConfig,
        previous: Option<&PoolSeal>,
        store: Option<Arc<GlobalStore>>,
    ) -> anyhow::Result<PoolSeal> {
        let at = format!("pools.{pool}.mrtr.seal.key_file");
        let path = cfg.key_file.display();
        let text = std::fs::read_to_string(&cfg.key_file)
            .map_err(|e| anyhow::anyhow!("{at}: cannot read {path}: {e}"))?;
        let keys =
            StateKeys::parse_ring(&text).map_err(|e| anyhow::anyhow!("{at}: {path}: {e:#}"))?;
        let kept = || previous.and_then(PoolSeal::record).unwrap_or_default();
        let once = match (cfg.one_time, store) {
            (OneTime::Off, _) => Once::Off,
            (OneTime::Local, _) => Once::Local(kept()),
            (OneTime::Global, Some(store)) => Once::Global {
                store,
                policy: cfg.on_store_error.unwrap_or_default(),
                local: kept(),
                label: format!("mrtr.seal:{pool}"),
            },
            (OneTime::Global, None) => anyhow::bail!(
                "pools.{pool}.mrtr.seal.one_time: global needs the top-level `redis:`"
            ),
        };
        Ok(PoolSeal {
            config: cfg.clone(),
            sealer: Sealer::new(keys),
            once,
        })
    }

    /// This replica's record of redeemed states, if the pool keeps one.
    fn record(&self) -> Option<Arc<Used>> {
        match &self.once {
            Once::Off => None,
            Once::Local(used) | Once::Global { local: used, .. } => Some(used.clone()),
        }
    }

    /// The envelope for a server's `state`, bound to `to`.
    pub fn seal(&self, to: &Binding, state: &str) -> String {
        let ttl = self.config.ttl.as_millis() as u64;
        state_seal::seal(&self.sealer, to, state, now_ms(), ttl)
    }

    /// The server's state inside `token` if it is bound to `to` and unexpired (nothing is
    /// recorded: explain asks this), and when it expires.
    pub fn verify(&self, token: &str, to: &Binding) -> Result<(String, u64), Refused> {
        let opened = state_seal::open(&self.sealer, token, to, now_ms(), self.config.max_bytes)?;
        Ok((opened.state, opened.expires_ms))
    }

    /// Whether this replica's record holds `token` as redeemed (explain; Redis is not asked).
    pub fn used_here(&self, token: &str) -> bool {
        self.record().is_some_and(|u| u.holds(token))
    }

    /// The server's state inside `token`, if it is bound to `to`, unexpired, and (one-time
    /// use) not redeemed before; it counts as redeemed from now.
    pub async fn open(&self, token: &str, to: &Binding<'_>) -> Result<String, NotOpened> {
        let (state, expires_ms) = self.verify(token, to).map_err(NotOpened::Refused)?;
        let now = now_ms();
        let fresh = match &self.once {
            Once::Off => true,
            Once::Local(used) => used.claim(token, expires_ms, now),
            Once::Global {
                store,
                policy,
                local,
                label,
            } => match store
                .claim_once(
                    &record_key(&store.config.key_prefix, token),
                    expires_ms.saturating_sub(now),
                )
                .await
            {
                Ok(fresh) => fresh,
                Err(_) => {
                    store.fallback(label, *policy);
                    match policy {
                        OnStoreError::Local => local.claim(token, expires_ms, now),
                        OnStoreError::Allow => true,
                        OnStoreError::Deny => return Err(NotOpened::RecordUnavailable),
                    }
                }
            },
        };
        match fresh {
            true => Ok(state),
            false => Err(NotOpened::Refused(Refused::Used)),
        }
    }
}

/// Who is calling, as a state is bound to it: the verified `subject` when auth admitted a
/// token; else a digest of the `Authorization` header as sent; else the client's address
/// (the 2025-era client's on a bridge hop). The journey and explain both ask this.
pub fn caller(subject: Option<&str>, authorization: Option<&[u8]>, ip: Option<IpAddr>) -> String {
    if let Some(sub) = subject {
        return state_seal::caller("sub", sub.as_bytes());
    }
    if let Some(a) = authorization {
        return state_seal::caller("auth", a);
    }
    let ip = ip.map(|a| a.to_string()).unwrap_or_default();
    state_seal::caller("ip", ip.as_bytes())
}

/// The Redis key recording `token` as redeemed: `redis.key_prefix`, `state-used:` and a digest
/// of the token, never the state (the limits' keys are the prefix and hex digits alone).
fn record_key(prefix: &str, token: &str) -> String {
    use std::fmt::Write;
    let mut key = String::with_capacity(prefix.len() + 44);
    key.push_str(prefix);
    key.push_str("state-used:");
    for b in &digest16(token) {
        let _ = write!(key, "{b:02x}");
    }
    key
}

/// The first 16 bytes of the SHA-256 of `token`.
fn digest16(token: &str) -> [u8; 16] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(token.as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// Each pool's sealing, indexed like the route table's pools (`None`: the pool does not seal).
pub type Seals = Vec<Option<Arc<PoolSeal>>>;

/// Each pool's sealing (`pools` in the route table's order), the record of used states
/// carried over from the `previous` gateway's (its pool names and seals).
pub fn build_all(
    config: &crate::config::Config,
    pools: &[String],
    previous: Option<(&[String], &Seals)>,
    store: Option<Arc<GlobalStore>>,
) -> anyhow::Result<Seals> {
    let old = |name: &String| {
        let (names, seals) = previous?;
        let i = names.iter().position(|n| n == name)?;
        seals.get(i)?.clone()
    };
    let build = |name: &String| -> anyhow::Result<_> {
        let Some(cfg) = config.pools[name].mrtr.seal.as_ref() else {
            return Ok(None);
        };
        Ok(Some(Arc::new(PoolSeal::build(
            name,
            cfg,
            old(name).as_deref(),
            store.clone(),
        )?)))
    };
    pools.iter().map(build).collect()
}

/// States redeemed on this replica, until they expire: a set, and the order they came in.
#[derive(Default)]
struct Used {
    inner: Mutex<UsedInner>,
}

#[derive(Default)]
struct UsedInner {
    seen: HashSet<[u8; 16]>,
    order: VecDeque<(u64, [u8; 16])>,
}

impl Used {
    /// Record `token` as redeemed; `false` when it already was.
    fn claim(&self, token: &str, expires_ms: u64, now: u64) -> bool {
        let key = digest16(token);
        let mut u = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        // Forget what expired (roughly in order: every state lives one TTL), and the oldest
        // past the bound.
        while let Some(&(exp, k)) = u.order.front() {
            if exp > now && u.order.len() < USED_MAX {
                break;
            }
            u.order.pop_front();
            u.seen.remove(&k);
        }
        if !u.seen.insert(key) {
            return false;
        }
        u.order.push_back((expires_ms, key));
        true
    }

    /// Whether `token` is recorded as redeemed (nothing changes; the record may still hold a
    /// state that expired since, which its expiry refuses first).
    fn holds(&self, token: &str) -> bool {
        let key = digest16(token);
        let u = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        u.seen.contains(&key)
    }
}

/// What a request on a sealing pool carries from its check to its response.
#[derive(Debug)]
pub struct Leg {
    /// [`state_seal::caller`] of who is calling.
    pub caller: String,
    /// [`state_seal::arguments_digest`] of the request: worked out on a retry (to open its
    /// state), else only once a response holds a state to seal (most answers hold none).
    pub arguments: Option<String>,
    /// The request's body as it went upstream (a reference, not a copy): what the digest is
    /// worked out from.
    pub body: bytes::Bytes,
    /// How the response is being read.
    pub out: Out,
}

/// How a response on a sealing pool is read.
#[derive(Debug, Default)]
pub enum Out {
    /// Not started, or not JSON nor SSE: passed as it is.
    #[default]
    Passing,
    /// JSON: held until complete (up to [`JSON_HOLD_MAX`]).
    Json(Vec<u8>),
    /// An event stream: rewritten event by event.
    Sse(SseSealer),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_is_redeemed_once_until_it_expires() {
        let u = Used::default();
        assert!(u.claim("t1", 100, 10));
        assert!(!u.claim("t1", 100, 20));
        assert!(u.claim("t2", 100, 20));
        // After t1 expired it is forgotten (and would be refused as expired anyway).
        assert!(u.claim("t1", 200, 150));
    }

    #[test]
    fn a_key_file_that_is_missing_or_empty_is_named() {
        let cfg = |path: &str| SealConfig {
            key_file: path.into(),
            ttl: std::time::Duration::from_secs(60),
            max_bytes: 4096,
            one_time: OneTime::Off,
            on_store_error: None,
        };
        let e = PoolSeal::build("p", &cfg("/nonexistent/keys"), None, None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("pools.p.mrtr.seal.key_file: cannot read /nonexistent/keys"),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("seal-keys-{}", std::process::id()));
        std::fs::write(&dir, "# no key yet\n").unwrap();
        let e = PoolSeal::build("p", &cfg(dir.to_str().unwrap()), None, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no key in it"), "{e}");
        std::fs::remove_file(&dir).unwrap();
    }
}
