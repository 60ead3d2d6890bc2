//! `routes[].cache` / `default_route.cache`: the edge cache of one route (see
//! `src/gateway/cache/`). On by default; bounded in bytes and entries.

use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// The cache settings of one route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Serve cacheable results (`server/discover`, the five lists, `resources/read`) from the
    /// gateway while their `ttlMs` lasts.
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// Upper bound on the bytes of stored response bodies of this route.
    #[serde(default = "default_max_bytes", deserialize_with = "de_max_bytes")]
    pub max_bytes: u64,
    /// Upper bound on the number of stored responses of this route.
    #[serde(default = "default_max_entries", deserialize_with = "de_max_entries")]
    pub max_entries: u64,
    /// A response body larger than this is passed through and not stored.
    #[serde(default = "default_max_entry_bytes", deserialize_with = "de_max_bytes")]
    pub max_entry_bytes: u64,
    /// How long past its `ttlMs` an entry may still answer when the refetch fails (the
    /// upstream cannot be reached, times out, or answers 5xx). `0s` (the default) turns it off.
    #[serde(default, with = "super::humantime_serde_compat")]
    pub stale_if_error: Duration,
    /// How long past its `ttlMs` an entry may answer while another request for the same key is
    /// refetching it (instead of waiting for that request). `0s` (the default) turns it off.
    #[serde(default, with = "super::humantime_serde_compat")]
    pub stale_while_revalidate: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: default_enabled(),
            max_bytes: default_max_bytes(),
            max_entries: default_max_entries(),
            max_entry_bytes: default_max_entry_bytes(),
            stale_if_error: Duration::ZERO,
            stale_while_revalidate: Duration::ZERO,
        }
    }
}

/// The largest `stale_if_error` accepted (the spec allows stale data when a refetch fails, but
/// not forever).
pub(crate) const MAX_STALE: Duration = Duration::from_secs(24 * 3600);

impl CacheConfig {
    /// Checks across fields; `at` names the route (`routes[2]`, `default_route`). Returns the
    /// key and value to locate the error's line, and the message.
    pub(super) fn check(&self, at: &str) -> Result<(), (&'static str, String, String)> {
        if self.max_entry_bytes > self.max_bytes {
            return Err((
                "max_entry_bytes",
                self.max_entry_bytes.to_string(),
                format!(
                    "{at}.cache.max_entry_bytes: {} is larger than max_bytes {}; an entry must fit the cache (lower max_entry_bytes or raise max_bytes)",
                    self.max_entry_bytes, self.max_bytes
                ),
            ));
        }
        for (key, d) in [
            ("stale_if_error", self.stale_if_error),
            ("stale_while_revalidate", self.stale_while_revalidate),
        ] {
            if d > MAX_STALE {
                return Err((
                    key,
                    String::new(),
                    format!(
                        "{at}.cache.{key}: {d:?} is longer than the 24h this gateway allows; use a shorter duration"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// One line of `mcp-edge check` for a route's cache.
pub(super) fn describe(route: &str, c: &CacheConfig) -> String {
    if !c.enabled {
        return format!("cache     route {route}: off");
    }
    let mut line = format!(
        "cache     route {route}: up to {} KiB in {} entries (each up to {} KiB)",
        c.max_bytes / 1024,
        c.max_entries,
        c.max_entry_bytes / 1024
    );
    for (k, d) in [
        ("stale_if_error", c.stale_if_error),
        ("stale_while_revalidate", c.stale_while_revalidate),
    ] {
        if !d.is_zero() {
            line.push_str(&format!(", {k} {d:?}"));
        }
    }
    line
}

fn default_enabled() -> bool {
    true
}
fn default_max_bytes() -> u64 {
    64 << 20
}
fn default_max_entries() -> u64 {
    10_000
}
fn default_max_entry_bytes() -> u64 {
    1 << 20
}

fn de_max_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if !(1024..=(1 << 40)).contains(&v) {
        return Err(serde::de::Error::custom(format!(
            "cache sizes are bytes between 1024 and 2^40, got {v} (write e.g. max_bytes: 67108864 for 64 MiB)"
        )));
    }
    Ok(v)
}

fn de_max_entries<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if !(1..=100_000_000).contains(&v) {
        return Err(serde::de::Error::custom(format!(
            "cache.max_entries must be between 1 and 100000000, got {v}"
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const MIN: &str = "pools:\n  p:\n    instances: [127.0.0.1:7001]\n";

    #[test]
    fn routes_cache_by_default() {
        let c = Config::parse(&format!("{MIN}default_route: {{pool: p}}\n"), "g.yaml").unwrap();
        assert!(c.describe().contains(
            "cache     route default: up to 65536 KiB in 10000 entries (each up to 1024 KiB)"
        ));
        let d = c.default_route.unwrap();
        assert!(d.cache.unwrap_or_default().enabled);
    }

    #[test]
    fn a_bad_size_names_the_file_line_and_key() {
        let y = format!("{MIN}routes:\n  - pool: p\n    cache:\n      max_bytes: 12\n");
        let e = Config::parse(&y, "g.yaml").unwrap_err();
        assert_eq!(e.line, Some(7), "{e}");
        assert!(e.to_string().starts_with("g.yaml:7:"), "{e}");
        assert!(e.message.contains("between 1024"), "{e}");
        let y = format!("{MIN}routes:\n  - pool: p\n    cache:\n      max_size: 12\n");
        let e = Config::parse(&y, "g.yaml").unwrap_err();
        assert!(e.message.contains("max_size"), "{e}");
    }

    #[test]
    fn an_entry_larger_than_the_cache_is_refused_with_its_line() {
        let y = format!(
            "{MIN}routes:\n  - pool: p\n    cache:\n      max_bytes: 2048\n      max_entry_bytes: 4096\n"
        );
        let e = Config::parse(&y, "g.yaml").unwrap_err();
        assert_eq!(e.line, Some(8), "{e}");
        assert!(e.message.contains("routes[0].cache.max_entry_bytes"), "{e}");
        let y =
            format!("{MIN}default_route:\n  pool: p\n  cache:\n    stale_while_revalidate: 2d\n");
        let e = Config::parse(&y, "g.yaml").unwrap_err();
        assert_eq!(e.line, Some(7), "{e}");
        assert!(
            e.message
                .contains("default_route.cache.stale_while_revalidate"),
            "{e}"
        );
    }
}
