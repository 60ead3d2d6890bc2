//! Validate stage: decide whether this request is checked (sampling), and check its headers
//! against its envelope with the shared [`crate::mcp::check`] rules.

use crate::mcp::{check_request, Claims, Envelope, Rejection, VersionPolicy, PROTOCOL_VERSION};

/// A gateway serves this revision and later ones; older (or missing) versions are refused,
/// because routing and limits trust the mirrored headers only from 2026-07-28 on (the
/// spec's rule for intermediaries: never route on headers a legacy client did not validate).
pub(crate) const POLICY: VersionPolicy = VersionPolicy::AtLeast(PROTOCOL_VERSION);

/// Whether a request on a route with this sample rate is checked against its body.
pub(crate) fn sampled(rate: f64) -> bool {
    if rate >= 1.0 {
        true
    } else if rate <= 0.0 {
        false
    } else {
        rand::random::<f64>() < rate
    }
}

/// Check the request headers against the parsed body.
pub fn validate(headers: &http::HeaderMap, env: &Envelope) -> Result<(), Rejection> {
    check_request(&Claims::read(headers), env, POLICY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_extremes_are_exact_and_the_middle_is_a_share() {
        assert!((0..1000).all(|_| sampled(1.0)));
        assert!((0..1000).all(|_| !sampled(0.0)));
        let n = (0..10_000).filter(|_| sampled(0.25)).count();
        assert!((2000..3000).contains(&n), "{n}");
    }
}
