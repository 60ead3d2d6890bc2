//! The charge ledger: charges per cart and the one-time use of each confirmed state.
//!
//! This stands in for the payment system's own idempotency store. A sealed `requestState` can
//! be presented again until it expires, so the ledger remembers each redeemed state nonce until
//! that expiry (after which the state itself is refused, so the record can go).
//!
//! - [`Ledger::Memory`] (default): shared by the instances of one process only; a replay on
//!   another process charges again.
//! - [`Ledger::Redis`] (`--store redis://…`): one atomic script per charge, `SET redeemed:<nonce>
//!   NX PXAT <state expiry>` and, only when that set the key, `INCR charges:<cart>`; so a replay
//!   is refused on every process that shares the Redis.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::state::now_ms;

/// Redis keys start with this.
pub(crate) const REDIS_PREFIX: &str = "mcp-edge:backend:";
/// How long one Redis call may take before the request is answered with an error.
pub(crate) const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// SET NX with the state's expiry, and INCR only when the set happened. Returns
/// `{charged_now (0|1), total}`.
const CHARGE_ONCE: &str = r#"
if redis.call('SET', KEYS[1], '1', 'NX', 'PXAT', ARGV[1]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, tonumber(redis.call('GET', KEYS[2]) or '0')}
"#;

/// Where charges and redeemed nonces are kept.
pub enum Ledger {
    Memory(MemoryLedger),
    Redis(RedisLedger),
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::Memory(MemoryLedger::default())
    }
}

impl Ledger {
    /// Connect to the store named by `url`: `memory`, or `redis://host:port[/db]`. Needs a
    /// tokio runtime; fails when Redis does not answer a PING.
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Ledger> {
        if url == "memory" {
            return Ok(Ledger::default());
        }
        anyhow::ensure!(
            url.starts_with("redis://"),
            "--store {url:?} is not a store this backend knows: use memory (the default) or redis://host:port[/db]"
        );
        let client = redis::Client::open(url)
            .map_err(|e| anyhow::anyhow!("--store {url:?} is not a usable Redis URL: {e}"))?;
        let cfg = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(REDIS_TIMEOUT)
            .set_response_timeout(REDIS_TIMEOUT)
            // At most two reconnect attempts, at most 500 ms apart (the default backs off for
            // minutes): a request fails fast when Redis is down, and start-up stops quickly.
            .set_factor(2)
            .set_max_delay(500)
            .set_number_of_retries(2);
        let mut conn = client
            .get_connection_manager_with_config(cfg)
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach the Redis store {url}: {e}"))?;
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(|e| anyhow::anyhow!("the Redis store {url} does not answer PING: {e}"))?;
        Ok(Ledger::Redis(RedisLedger {
            conn,
            script: redis::Script::new(CHARGE_ONCE),
        }))
    }

    /// Charge `cart` once for the state with `nonce` (valid until `expires_at_ms`). Returns
    /// (charged now, total charges), or why the store could not say.
    pub(crate) async fn charge(
        &self,
        cart: &str,
        nonce: &str,
        expires_at_ms: u64,
    ) -> Result<(bool, u64), String> {
        match self {
            Ledger::Memory(m) => Ok(m.charge(cart, nonce, expires_at_ms)),
            Ledger::Redis(r) => r.charge(cart, nonce, expires_at_ms).await,
        }
    }

    /// How many times `cart` was charged.
    pub(crate) async fn count(&self, cart: &str) -> Result<u64, String> {
        match self {
            Ledger::Memory(m) => Ok(m.count(cart)),
            Ledger::Redis(r) => r.count(cart).await,
        }
    }
}

/// The ledger in one process's memory.
#[derive(Default)]
pub struct MemoryLedger {
    carts: Mutex<HashMap<String, Cart>>,
}

#[derive(Default)]
struct Cart {
    charges: u64,
    redeemed: HashMap<String, u64>,
}

impl MemoryLedger {
    /// Charge `cart` once for the state with `nonce`. Returns (charged now, total charges).
    pub(crate) fn charge(&self, cart: &str, nonce: &str, expires_at_ms: u64) -> (bool, u64) {
        let mut carts = self.carts.lock().unwrap_or_else(|e| e.into_inner());
        let c = carts.entry(cart.to_owned()).or_default();
        if c.redeemed.contains_key(nonce) {
            return (false, c.charges);
        }
        if c.redeemed.len() >= 4096 {
            let now = now_ms();
            c.redeemed.retain(|_, exp| *exp > now);
        }
        c.redeemed.insert(nonce.to_owned(), expires_at_ms);
        c.charges += 1;
        (true, c.charges)
    }

    pub(crate) fn count(&self, cart: &str) -> u64 {
        self.carts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(cart)
            .map_or(0, |c| c.charges)
    }
}

/// The ledger in Redis, shared by every process pointed at it.
pub struct RedisLedger {
    conn: redis::aio::ConnectionManager,
    script: redis::Script,
}

fn store_error(e: redis::RedisError) -> String {
    format!("the shared store (Redis) did not answer ({e}); nothing was charged, retry the same request later")
}

impl RedisLedger {
    async fn charge(
        &self,
        cart: &str,
        nonce: &str,
        expires_at_ms: u64,
    ) -> Result<(bool, u64), String> {
        let mut conn = self.conn.clone();
        let (now, total): (i64, i64) = self
            .script
            .key(format!("{REDIS_PREFIX}redeemed:{nonce}"))
            .key(format!("{REDIS_PREFIX}charges:{cart}"))
            .arg(expires_at_ms)
            .invoke_async(&mut conn)
            .await
            .map_err(store_error)?;
        Ok((now == 1, total.max(0) as u64))
    }

    async fn count(&self, cart: &str) -> Result<u64, String> {
        let mut conn = self.conn.clone();
        let n: Option<u64> = redis::cmd("GET")
            .arg(format!("{REDIS_PREFIX}charges:{cart}"))
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("the shared store (Redis) did not answer ({e}); retry later"))?;
        Ok(n.unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_charges_once_per_nonce() {
        let l = MemoryLedger::default();
        assert_eq!(l.charge("c1", "n1", u64::MAX), (true, 1));
        assert_eq!(l.charge("c1", "n1", u64::MAX), (false, 1));
        assert_eq!(l.charge("c1", "n2", u64::MAX), (true, 2));
        assert_eq!(l.count("c1"), 2);
        assert_eq!(l.count("other"), 0);
    }

    #[tokio::test]
    async fn unknown_stores_are_named() {
        let e = Ledger::connect("postgres://x").await.err().unwrap();
        assert!(format!("{e}").contains("redis://"), "{e}");
    }
}
