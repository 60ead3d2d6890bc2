//! The lossless form of what a run measured, for merging the reports of a sharded run: serde
//! helpers that carry every latency histogram in HdrHistogram's own encoding (V2 with deflate,
//! the format of HdrHistogram log files, base64 in JSON), error kinds (`&'static str` in
//! memory) by name, error groups as `[key, count]` pairs, and durations as seconds.
//! [`super::measure::Measures`] and what it holds derive `Serialize`/`Deserialize` with these.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use base64::prelude::{Engine as _, BASE64_STANDARD};
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Serialize, Serializer};

/// What the JSON report says of the encoding.
pub(crate) const ENCODING: &str = "HdrHistogram V2 deflate, base64";

/// `h` in HdrHistogram's compressed V2 encoding, base64.
pub(crate) fn encode(h: &Histogram<u64>) -> Result<String, String> {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .map_err(|e| format!("encoding a histogram: {e:?}"))?;
    Ok(BASE64_STANDARD.encode(buf))
}

/// The histogram [`encode`] wrote (auto-resizing, like the run's own).
pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = BASE64_STANDARD
        .decode(text)
        .map_err(|e| format!("a histogram is not valid base64: {e}"))?;
    let mut h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("a histogram is not in HdrHistogram's V2 encoding: {e:?}"))?;
    h.auto(true);
    Ok(h)
}

/// `#[serde(with = "wire::hist")]` for a `Histogram<u64>`.
pub(crate) mod hist {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(h).map_err(S::Error::custom)?)
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Histogram<u64>, D::Error> {
        decode(&String::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// The one `&'static str` for `s`: the error kinds are a handful of names, leaked once each.
pub(crate) fn intern(s: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .expect("names lock");
    match names.get(s) {
        Some(n) => n,
        None => {
            let n: &'static str = Box::leak(s.to_owned().into_boxed_str());
            names.insert(n);
            n
        }
    }
}

#[cfg(test)]
/// `#[serde(deserialize_with = "wire::static_str")]`.
pub(crate) fn static_str<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    Ok(intern(&String::deserialize(d)?))
}

/// `#[serde(deserialize_with = "wire::static_keys")]` for a map keyed by error kind.
pub(crate) fn static_keys<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<&'static str, u64>, D::Error> {
    let m = BTreeMap::<String, u64>::deserialize(d)?;
    Ok(m.into_iter().map(|(k, v)| (intern(&k), v)).collect())
}

/// `#[serde(with = "wire::pairs")]`: a map whose keys are not strings, as `[[key, value], ...]`.
pub(crate) mod pairs {
    use super::*;

    pub(crate) fn serialize<K: Serialize, V: Serialize, S: Serializer>(
        m: &BTreeMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub(crate) fn deserialize<'de, K, V, D>(d: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
        D: serde::Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

/// `#[serde(serialize_with = "wire::ser_secs", deserialize_with = "wire::de_secs")]`.
pub(crate) fn ser_secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub(crate) fn de_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let v = f64::deserialize(d)?;
    Duration::try_from_secs_f64(v).map_err(|_| D::Error::custom(format!("{v} is not a duration")))
}

pub(crate) fn ser_opt_secs<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

pub(crate) fn de_opt_secs<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    match Option::<f64>::deserialize(d)? {
        None => Ok(None),
        Some(v) => Duration::try_from_secs_f64(v)
            .map(Some)
            .map_err(|_| D::Error::custom(format!("{v} is not a duration"))),
    }
}

/// A wall-clock time as RFC 3339 (UTC, to the millisecond).
pub(crate) fn ser_opt_time<S: Serializer>(
    t: &Option<std::time::SystemTime>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&humantime::format_rfc3339_millis(*t).to_string()),
        None => s.serialize_none(),
    }
}

pub(crate) fn de_opt_time<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::time::SystemTime>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(v) => humantime::parse_rfc3339_weak(&v)
            .map(Some)
            .map_err(|e| D::Error::custom(format!("{v:?}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// The promise of a sharded run: the histograms of N shards, each written to its report and
    /// read back, add up to exactly the histogram one process would have filled with every
    /// sample, so every percentile is the same.
    #[test]
    fn merged_histograms_give_the_percentiles_of_one_histogram_of_every_sample() {
        let mut rng = StdRng::seed_from_u64(35);
        let mut whole = crate::loadtest::measure::new_hist();
        let mut shards: Vec<Histogram<u64>> = (0..4)
            .map(|_| crate::loadtest::measure::new_hist())
            .collect();
        for i in 0..200_000u64 {
            // A long-tailed latency in µs: mostly ~1 ms, some up to seconds.
            let v = if rng.gen_bool(0.01) {
                rng.gen_range(10_000..5_000_000)
            } else {
                rng.gen_range(200..3_000)
            };
            whole.record(v).unwrap();
            shards[(i % 4) as usize].record(v).unwrap();
        }
        let mut merged = crate::loadtest::measure::new_hist();
        for s in &shards {
            let text = serde_json::to_string(&encode(s).unwrap()).unwrap();
            let back = decode(&serde_json::from_str::<String>(&text).unwrap()).unwrap();
            assert_eq!(&back, s, "a histogram survives its report");
            merged.add(&back).unwrap();
        }
        assert_eq!(merged.len(), whole.len());
        assert_eq!((merged.min(), merged.max()), (whole.min(), whole.max()));
        assert_eq!(merged.mean(), whole.mean());
        for q in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999, 1.0] {
            assert_eq!(
                merged.value_at_quantile(q),
                whole.value_at_quantile(q),
                "quantile {q}"
            );
        }
        assert_eq!(merged, whole);
        assert!(decode("not base64!").is_err());
        assert!(decode(&BASE64_STANDARD.encode(b"not a histogram")).is_err());
    }

    #[test]
    fn error_kinds_come_back_as_the_same_names() {
        let a = intern("jsonrpc_error");
        let b = static_str(serde_json::json!("jsonrpc_error")).unwrap();
        assert!(std::ptr::eq(a, b));
        let m = static_keys(serde_json::json!({"timeout": 3})).unwrap();
        assert_eq!(m["timeout"], 3);
    }
}
