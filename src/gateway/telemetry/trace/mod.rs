//! Trace stage: W3C trace context in, one span per request out (OpenTelemetry, OTLP over
//! HTTP/protobuf), the legs of an MRTR flow linked, and the context sent on upstream.
//!
//! Off by default, and then nothing here runs: the request carries no trace state at all.
//! When on, a request's ids are chosen once ([`begin`]) from the `traceparent` header, else the
//! body's `_meta.traceparent`, else a new trace (sampled by `tracing.sample_ratio`; an incoming
//! context's sampled flag is followed). The span itself is made when the request is finished,
//! with its real start time, every MCP attribute and a link to the previous leg of its flow, so
//! the request path pays for nothing but the ids. The SDK's id generator is handed the ids
//! chosen here, since the upstream has already been told them.

mod export;
pub use export::{SpanInfo, Tracing};

use crate::gateway::telemetry::flows::SpanRef;

/// A W3C `traceparent`: trace id, parent span id, the sampled flag; the same span reference
/// a flow keeps of its previous leg.
pub(crate) type Parent = SpanRef;

/// Parse a `traceparent` value (W3C Trace Context level 1): `00-<32 hex>-<16 hex>-<2 hex>`,
/// lowercase, ids not all zero, version `ff` invalid; later versions may append `-…` fields.
pub(crate) fn parse_traceparent(v: &str) -> Option<Parent> {
    let b = v.trim().as_bytes();
    if b.len() < 55 || (b.len() > 55 && (b[..2] == *b"00" || b[55] != b'-')) {
        return None;
    }
    if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' || b[..2] == *b"ff" {
        return None;
    }
    hex_bits(&b[..2])?; // the version: any two hex digits but ff
    let trace_id = hex_bits(&b[3..35])?;
    let span_id = hex_bits(&b[36..52])? as u64;
    let flags = hex_bits(&b[53..55])?;
    (trace_id != 0 && span_id != 0).then_some(Parent {
        trace_id,
        span_id,
        sampled: flags & 1 == 1,
    })
}

/// Lowercase hex digits (at most 32) as a number.
fn hex_bits(s: &[u8]) -> Option<u128> {
    s.iter().try_fold(0u128, |acc, &c| {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        Some(acc << 4 | u128::from(d))
    })
}

/// The `traceparent` naming a span.
pub(crate) fn format_traceparent(trace_id: u128, span_id: u64, sampled: bool) -> String {
    let mut out = *b"00-00000000000000000000000000000000-0000000000000000-00";
    for i in 0..32 {
        out[3 + i] = crate::mcp::hex::digit((trace_id >> (124 - 4 * i)) as u8);
    }
    for i in 0..16 {
        out[36 + i] = crate::mcp::hex::digit((span_id >> (60 - 4 * i)) as u8);
    }
    out[54] = if sampled { b'1' } else { b'0' };
    // Only ASCII was written.
    String::from_utf8(out.to_vec()).expect("ascii")
}

/// One request's trace identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLeg {
    pub trace_id: u128,
    pub span_id: u64,
    pub parent: Option<Parent>,
    pub sampled: bool,
    pub tracestate: Option<String>,
}

impl TraceLeg {
    pub fn span_ref(&self) -> SpanRef {
        SpanRef {
            trace_id: self.trace_id,
            span_id: self.span_id,
            sampled: self.sampled,
        }
    }

    /// The `traceparent` to send upstream: this request's span as the parent.
    pub fn traceparent(&self) -> String {
        format_traceparent(self.trace_id, self.span_id, self.sampled)
    }
}

/// Choose a request's trace ids: continue the first valid context (header, then `_meta`), or
/// start a trace, sampled with probability `ratio` (decided on the trace id, so every
/// replica decides alike).
pub fn begin(
    header: Option<(&str, Option<&str>)>,
    meta: Option<(&str, Option<&str>)>,
    ratio: f64,
) -> TraceLeg {
    let from = |c: Option<(&str, Option<&str>)>| {
        let (tp, ts) = c?;
        Some((parse_traceparent(tp)?, ts.map(str::to_owned)))
    };
    let span_id = random_nonzero_u64();
    match from(header).or_else(|| from(meta)) {
        Some((p, tracestate)) => TraceLeg {
            trace_id: p.trace_id,
            span_id,
            parent: Some(p),
            sampled: p.sampled,
            tracestate,
        },
        None => {
            let trace_id = loop {
                let t: u128 = rand::random();
                if t != 0 {
                    break t;
                }
            };
            TraceLeg {
                trace_id,
                span_id,
                parent: None,
                sampled: sampled_by_ratio(trace_id, ratio),
                tracestate: None,
            }
        }
    }
}

fn random_nonzero_u64() -> u64 {
    loop {
        let s: u64 = rand::random();
        if s != 0 {
            return s;
        }
    }
}

/// [`begin`] on a request: its `traceparent`/`tracestate` headers, then its body's `_meta`.
pub(crate) fn begin_request(
    headers: &http::HeaderMap,
    envelope: Option<&crate::mcp::Envelope>,
    ratio: f64,
) -> TraceLeg {
    use crate::mcp::header::{TRACEPARENT, TRACESTATE};
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let header = h(TRACEPARENT).map(|tp| (tp, h(TRACESTATE)));
    let meta = envelope.and_then(|e| Some((e.traceparent.as_deref()?, e.tracestate.as_deref())));
    begin(header, meta, ratio)
}

/// The ratio rule of OpenTelemetry's `TraceIdRatioBased`: the low 63 bits against the ratio.
pub(crate) fn sampled_by_ratio(trace_id: u128, ratio: f64) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    let x = (trace_id as u64) >> 1;
    (x as f64) < ratio * (1u64 << 63) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparent_round_trips_and_bad_ones_are_ignored() {
        let p = parse_traceparent(TP).unwrap();
        assert_eq!(p.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!((p.span_id, p.sampled), (0x00f067aa0ba902b7, true));
        assert_eq!(format_traceparent(p.trace_id, p.span_id, true), TP);
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
        // A later version may carry more fields.
        assert!(parse_traceparent(&format!("01{}-abc", &TP[2..])).is_some());
    }

    #[test]
    fn begin_continues_the_header_then_meta_else_samples_by_ratio() {
        let meta = "00-11111111111111111111111111111111-2222222222222222-00";
        let l = begin(Some((TP, Some("k=v"))), Some((meta, None)), 0.0);
        assert_eq!(l.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert!(l.sampled, "the incoming sampled flag wins over the ratio");
        assert_eq!(l.tracestate.as_deref(), Some("k=v"));
        assert_ne!(l.span_id, l.parent.unwrap().span_id);
        let l = begin(Some(("junk", None)), Some((meta, None)), 1.0);
        assert_eq!(l.trace_id, 0x11111111111111111111111111111111);
        assert!(!l.sampled, "an unsampled parent stays unsampled");
        let l = begin(None, None, 1.0);
        assert!(l.parent.is_none() && l.sampled);
        assert!(!begin(None, None, 0.0).sampled);
        let share = (0..2000)
            .filter(|_| begin(None, None, 0.25).sampled)
            .count();
        assert!((300..700).contains(&share), "{share}");
        let up = parse_traceparent(&l.traceparent()).unwrap();
        assert_eq!((up.trace_id, up.span_id), (l.trace_id, l.span_id));
    }
}
