//! The `requestState` seal stage (`pools.<name>.mrtr.seal`): a pool's key ring, TTL and bound,
//! its one-time record, and what one request carries from its check to its response (who is
//! calling, the arguments' digest, how its response is being rewritten). The envelope itself is
//! [`crate::mcp::state_seal`]; the journey's glue (reading the request, editing the bodies) is
//! `gateway::journey::seal`. No I/O but reading the key file when a gateway is built.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use crate::config::mrtr::{OneTime, SealConfig};
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
    /// The states redeemed on this replica (with `one_time: local`).
    used: Option<Arc<Used>>,
}

impl PoolSeal {
    /// The pool's sealing from its config: the key file is read now (an error names the key
    /// and the file). A reload that keeps `one_time: local` keeps the record of used states.
    pub fn build(
        pool: &str,
        cfg: &SealConfig,
        previous: Option<&PoolSeal>,
    ) -> anyhow::Result<PoolSeal> {
        let at = format!("pools.{pool}.mrtr.seal.key_file");
        let path = cfg.key_file.display();
        let text = std::fs::read_to_string(&cfg.key_file)
            .map_err(|e| anyhow::anyhow!("{at}: cannot read {path}: {e}"))?;
        let keys =
            StateKeys::parse_ring(&text).map_err(|e| anyhow::anyhow!("{at}: {path}: {e:#}"))?;
        let used = match cfg.one_time {
            OneTime::Off => None,
            OneTime::Local => Some(previous.and_then(|p| p.used.clone()).unwrap_or_default()),
        };
        Ok(PoolSeal {
            config: cfg.clone(),
            sealer: Sealer::new(keys),
            used,
        })
    }

    /// The envelope for a server's `state`, bound to `to`.
    pub fn seal(&self, to: &Binding, state: &str) -> String {
        let ttl = self.config.ttl.as_millis() as u64;
        state_seal::seal(&self.sealer, to, state, now_ms(), ttl)
    }

    /// The server's state inside `token`, if it is bound to `to`, unexpired, and (one-time
    /// use) not redeemed before on this replica; it counts as redeemed from now.
    pub fn open(&self, token: &str, to: &Binding) -> Result<String, Refused> {
        let now = now_ms();
        let opened = state_seal::open(&self.sealer, token, to, now, self.config.max_bytes)?;
        if let Some(used) = &self.used {
            if !used.claim(token, opened.expires_ms, now) {
                return Err(Refused::Used);
            }
        }
        Ok(opened.state)
    }
}

/// Each pool's sealing, indexed like the route table's pools (`None`: the pool does not seal).
pub type Seals = Vec<Option<Arc<PoolSeal>>>;

/// Each pool's sealing (`pools` in the route table's order), the record of used states
/// carried over from the `previous` gateway's (its pool names and seals).
pub fn build_all(
    config: &crate::config::Config,
    pools: &[String],
    previous: Option<(&[String], &Seals)>,
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
        use sha2::Digest;
        let digest = sha2::Sha256::digest(token.as_bytes());
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest[..16]);
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
}

/// What a request on a sealing pool carries from its check to its response.
#[derive(Debug)]
pub struct Leg {
    /// [`state_seal::caller`] of who is calling.
    pub caller: String,
    /// [`state_seal::arguments_digest`] of the request.
    pub arguments: String,
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
        };
        let e = PoolSeal::build("p", &cfg("/nonexistent/keys"), None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("pools.p.mrtr.seal.key_file: cannot read /nonexistent/keys"),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("seal-keys-{}", std::process::id()));
        std::fs::write(&dir, "# no key yet\n").unwrap();
        let e = PoolSeal::build("p", &cfg(dir.to_str().unwrap()), None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no key in it"), "{e}");
        std::fs::remove_file(&dir).unwrap();
    }
}
