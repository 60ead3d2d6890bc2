//! One run split over several load generators (`--shard I/N`, `--start-at`): which part of the
//! run shard I of N takes, so that the N parts together are the whole run with no overlap, and
//! when they all begin.
//!
//! Shard I takes the flows whose sequence number (`$seq`, the principal rotation) is ≡ I mod N,
//! the workers whose number is ≡ I mod N (closed loop), its slots of the open loop's schedule
//! (flow `seq` is due at `seq / rate` in every shard, so the N schedules interleave into the
//! whole rate), the share of `--flows` with those numbers, and the data-feed rows ≡ I mod N
//! (taken in turn by its own flows). Stages are shared: every shard follows the same clock from
//! the same `--start-at`. Either value may be `$NAME`, read from the environment (a Kubernetes
//! Indexed Job's `$JOB_COMPLETION_INDEX`). Pure, apart from reading the environment.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// The farthest ahead `--start-at` may be.
pub(crate) const MAX_START_AHEAD: Duration = Duration::from_secs(600);
/// How late a shard may begin after `--start-at` (a pod that started late joins, a stale time
/// is refused).
pub(crate) const MAX_START_LATE: Duration = Duration::from_secs(5);

/// Shard `index` of `count` (`index` from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

/// `$NAME` or `${NAME}`: the variable's value; anything else as it is.
fn from_env(s: &str, flag: &str) -> Result<String, String> {
    let name = match s.strip_prefix('$') {
        Some(n) => n.trim_start_matches('{').trim_end_matches('}'),
        None => return Ok(s.to_string()),
    };
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().to_string()),
        _ => Err(format!(
            "{flag} {s}: the environment variable {name} is not set"
        )),
    }
}

/// Parse `--shard I/N` (I from 0 to N-1); I or the whole value may be `$NAME`.
pub(crate) fn parse_shard(s: &str) -> Result<Shard, String> {
    let (i, n) = match s.rsplit_once('/') {
        Some((i, n)) => (from_env(i.trim(), "--shard")?, n.trim().to_string()),
        None => {
            let v = from_env(s.trim(), "--shard")?;
            match v.split_once('/') {
                Some((i, n)) => (i.trim().to_string(), n.trim().to_string()),
                None => return Err(format!("--shard {s:?}: write INDEX/COUNT, e.g. 0/4")),
            }
        }
    };
    let num = |x: &str, what: &str| {
        x.parse::<u64>()
            .map_err(|_| format!("--shard {s:?}: the {what} {x:?} is not a whole number"))
    };
    let (index, count) = (num(&i, "index")?, num(&n, "count")?);
    if count == 0 || index >= count {
        return Err(format!(
            "--shard {s:?}: the index must be from 0 to COUNT-1 (0/{count} .. {}/{count})",
            count.max(1) - 1
        ));
    }
    Ok(Shard { index, count })
}

/// Parse `--start-at`: an RFC 3339 time in UTC (`2026-05-01T12:00:00Z`), or `$NAME`.
pub(crate) fn parse_start_at(s: &str) -> Result<SystemTime, String> {
    let v = from_env(s.trim(), "--start-at")?;
    humantime::parse_rfc3339_weak(v.trim_end_matches(['Z', 'z'])).map_err(|e| {
        format!("--start-at {v:?}: {e}; write a UTC time such as 2026-05-01T12:00:00Z")
    })
}

/// How long to wait from `now` until `at`, or why `at` cannot be a common start.
pub(crate) fn wait_until(at: SystemTime, now: SystemTime) -> anyhow::Result<Duration> {
    let show = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    match at.duration_since(now) {
        Ok(ahead) if ahead > MAX_START_AHEAD => anyhow::bail!(
            "--start-at {} is {}s away, more than the {}s a shard waits; pick a closer time",
            show(at),
            ahead.as_secs(),
            MAX_START_AHEAD.as_secs()
        ),
        Ok(ahead) => Ok(ahead),
        Err(e) if e.duration() > MAX_START_LATE => anyhow::bail!(
            "--start-at {} was {:.1}s ago (it is {}): this shard would start late and miss the \
             common clock; pick a later time for every shard",
            show(at),
            e.duration().as_secs_f64(),
            show(now)
        ),
        Err(_) => Ok(Duration::ZERO),
    }
}

impl Shard {
    /// The whole run: one shard.
    pub(crate) const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// How many of the numbers `0..total` are this shard's (≡ index mod count).
    pub(crate) fn part(&self, total: u64) -> u64 {
        (total + self.count - 1 - self.index) / self.count
    }

    /// The run-wide number of this shard's `local`-th item (flow, worker).
    pub(crate) fn global(&self, local: u64) -> u64 {
        local * self.count + self.index
    }

    /// Whether run-wide item `n` is this shard's.
    pub(crate) fn owns(&self, n: u64) -> bool {
        n % self.count == self.index
    }

    /// `I/N` as the user writes it.
    pub(crate) fn label(&self) -> String {
        format!("{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_from_the_command_line_and_the_environment() {
        assert_eq!(parse_shard("1/4"), Ok(Shard { index: 1, count: 4 }));
        std::env::set_var("MCP_EDGE_TEST_SHARD_INDEX", "3");
        std::env::set_var("MCP_EDGE_TEST_SHARD", "2/5");
        assert_eq!(
            parse_shard("$MCP_EDGE_TEST_SHARD_INDEX/4"),
            Ok(Shard { index: 3, count: 4 })
        );
        assert_eq!(
            parse_shard("${MCP_EDGE_TEST_SHARD}"),
            Ok(Shard { index: 2, count: 5 })
        );
        let unset = parse_shard("$MCP_EDGE_TEST_UNSET/4").unwrap_err();
        assert!(unset.contains("MCP_EDGE_TEST_UNSET is not set"), "{unset}");
        for bad in ["4/4", "1/0", "x/4", "1", "-1/4", "1/4/"] {
            assert!(parse_shard(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_parts_of_a_run_cover_it_once() {
        for count in 1..=7u64 {
            for total in [0u64, 1, 6, 7, 16, 100, 101] {
                let shards: Vec<Shard> = (0..count).map(|index| Shard { index, count }).collect();
                assert_eq!(shards.iter().map(|s| s.part(total)).sum::<u64>(), total);
                // Every number below total belongs to exactly one shard, as its global().
                let mut seen = vec![0u32; total as usize];
                for s in &shards {
                    for local in 0..s.part(total) {
                        let g = s.global(local);
                        assert!(s.owns(g));
                        seen[g as usize] += 1;
                    }
                }
                assert!(seen.iter().all(|&n| n == 1), "count {count} total {total}");
            }
        }
    }

    #[test]
    fn a_common_start_is_bounded() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let at = parse_start_at("2027-01-15T08:00:10Z").unwrap();
        assert_eq!(
            humantime::format_rfc3339_seconds(at).to_string(),
            "2027-01-15T08:00:10Z"
        );
        let s = Duration::from_secs;
        assert_eq!(wait_until(now + s(30), now).unwrap(), s(30));
        assert_eq!(wait_until(now - s(2), now).unwrap(), Duration::ZERO);
        let late = wait_until(now - s(60), now).unwrap_err().to_string();
        assert!(late.contains("60.0s ago"), "{late}");
        let far = wait_until(now + s(3600), now).unwrap_err().to_string();
        assert!(far.contains("3600s away"), "{far}");
        assert!(parse_start_at("tomorrow").is_err());
    }

    #[test]
    fn shards_split_the_rows_without_overlap() {
        use crate::loadtest::feed::Feed;
        use rand::rngs::StdRng;
        use rand::SeedableRng;
        let lines: Vec<String> = std::iter::once("n".into())
            .chain((0..12).map(|i| i.to_string()))
            .collect();
        let whole = Feed::parse_csv(&lines.join("\n")).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        for count in [2u64, 3, 4, 5] {
            let mut owner = std::collections::BTreeMap::new();
            for index in 0..count {
                let s = Shard { index, count };
                let f = whole.clone().shard(s).unwrap();
                for local in 0..40 {
                    let seq = s.global(local);
                    let row = f.row(seq, &mut rng).clone();
                    if 12 % count == 0 {
                        // The very row one process gives flow `seq`.
                        assert_eq!(&row, whole.row(seq, &mut rng));
                    }
                    let prev = owner.insert(row["n"].to_string(), index);
                    assert!(
                        prev.is_none_or(|p| p == index),
                        "row {} in two shards",
                        row["n"]
                    );
                }
            }
            assert_eq!(owner.len(), 12, "every row is used by {count} shards");
        }
        let e = whole
            .shard(Shard {
                index: 0,
                count: 13,
            })
            .unwrap_err();
        assert!(
            e.to_string().contains("12 rows, fewer than the 13 shards"),
            "{e}"
        );
    }
}
