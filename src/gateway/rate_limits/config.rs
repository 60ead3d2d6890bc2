//! `rate_limits:`: keyed token-bucket limits, their key parts and the `N/s` rate syntax. The
//! rate limits component's section, `crate::config::rate_limits` (included by path from
//! `src/config/mod.rs`); its [`LimitMatch`] is also the `match` of `concurrency_limits`.

use serde::{Deserialize, Deserializer};
use std::fmt;

use super::{OnStoreError, Scope};
use crate::config::Pattern;

/// One rate limit.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Names the limit in metrics, logs and the 429 message.
    pub name: String,
    /// Which requests the limit covers (all, when empty).
    #[serde(rename = "match", default)]
    pub matcher: LimitMatch,
    /// What one bucket counts: any of route, method, name, principal, client_ip, header:<name>.
    /// Empty: one bucket for every request the limit covers.
    #[serde(default)]
    pub key: Vec<KeyPart>,
    /// Sustained rate: `N/s`, `N/m` or `N/h`.
    pub rate: Rate,
    /// Requests allowed at once above the sustained rate (default: N of the rate).
    #[serde(default)]
    pub burst: Option<u32>,
    /// Count what would be limited without refusing it.
    #[serde(default)]
    pub dry_run: bool,
    /// Most keys tracked at once in this replica; a new key past it evicts the least recently
    /// used one (for a global limit: the keys of its `on_store_error: local` fallback).
    #[serde(default = "default_max_keys")]
    pub max_keys: usize,
    /// `replica` (this process's buckets) or `global` (shared in Redis).
    #[serde(default)]
    pub scope: Scope,
    /// `scope: global` only: what to do when Redis does not answer (default `local`).
    #[serde(default)]
    pub on_store_error: Option<OnStoreError>,
}

impl RateLimitConfig {
    pub fn quota(&self) -> governor::Quota {
        let n = std::num::NonZeroU32::new(self.rate.count).expect("validated: rate count > 0");
        let q = match self.rate.per {
            Per::Second => governor::Quota::per_second(n),
            Per::Minute => governor::Quota::per_minute(n),
            Per::Hour => governor::Quota::per_hour(n),
        };
        match self.burst.and_then(std::num::NonZeroU32::new) {
            Some(b) => q.allow_burst(b),
            None => q,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitMatch {
    /// A route name (see `routes[].name`; `default` for the default route).
    #[serde(default)]
    pub route: Option<String>,
    #[serde(default)]
    pub method: Option<Pattern>,
    #[serde(default)]
    pub name: Option<Pattern>,
}

/// One part of a rate-limit key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    Route,
    Method,
    Name,
    Principal,
    ClientIp,
    Header(http::HeaderName),
    /// A claim of the verified token (`claim:<name>`; needs `auth`).
    Claim(String),
}

impl<'de> Deserialize<'de> for KeyPart {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "route" => KeyPart::Route,
            "method" => KeyPart::Method,
            "name" => KeyPart::Name,
            "principal" => KeyPart::Principal,
            "client_ip" => KeyPart::ClientIp,
            other if other.starts_with("claim:") && other.len() > 6 => {
                KeyPart::Claim(other[6..].trim().to_string())
            }
            other => match other.strip_prefix("header:") {
                Some(h) => KeyPart::Header(http::HeaderName::from_bytes(h.trim().as_bytes()).map_err(|_| {
                    serde::de::Error::custom(format!("key: {h:?} is not a valid header name"))
                })?),
                None => {
                    return Err(serde::de::Error::custom(format!(
                        "key: unknown part {other:?}; use route, method, name, principal, client_ip, header:<name> or claim:<name>"
                    )))
                }
            },
        })
    }
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            KeyPart::Route => f.write_str("route"),
            KeyPart::Method => f.write_str("method"),
            KeyPart::Name => f.write_str("name"),
            KeyPart::Principal => f.write_str("principal"),
            KeyPart::ClientIp => f.write_str("client_ip"),
            KeyPart::Header(h) => write!(f, "header:{h}"),
            KeyPart::Claim(c) => write!(f, "claim:{c}"),
        }
    }
}

/// A sustained rate, `N/s`, `N/m` or `N/h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub per: Per,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    Second,
    Minute,
    Hour,
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let per = match self.per {
            Per::Second => "s",
            Per::Minute => "m",
            Per::Hour => "h",
        };
        write!(f, "{}/{per}", self.count)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let bad = || {
            serde::de::Error::custom(format!(
                "rate: {s:?} is not a rate; write N/s, N/m or N/h, e.g. 100/s"
            ))
        };
        let (n, per) = s.split_once('/').ok_or_else(bad)?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 {
            return Err(serde::de::Error::custom(
                "rate: the count must be at least 1",
            ));
        }
        let per = match per.trim() {
            "s" | "sec" | "second" => Per::Second,
            "m" | "min" | "minute" => Per::Minute,
            "h" | "hour" => Per::Hour,
            _ => return Err(bad()),
        };
        Ok(Rate { count, per })
    }
}

fn default_max_keys() -> usize {
    100_000
}
