//! Property tests at volume for the readers of untrusted bytes: the upstream
//! HTTP/1.1 response head and body framing (`gateway::transport::upstream_h1::wire`), the ClientHello
//! reader (`gateway::transport::client_hello`), the h2 → HTTP/1.1 rules (`gateway::transport::h2_to_h1`) and the
//! envelope (`mcp::envelope`; `differential` checks what it reads, this only what it
//! survives).
//!
//! Each property runs `FUZZ_CASES` cases (default: a budget that keeps the whole binary at a
//! few seconds in a debug build, for CI); a long run sets it high under the bench profile
//! (docs/fuzzing.md).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

mod client_hello;
mod envelope;
mod h2_to_h1;
mod wire;

/// Run `test` over `strategy` for `FUZZ_CASES` cases (or `default`), failing the test with the
/// shrunk counterexample; prints the count so a long run records its executions, and returns
/// it.
pub fn check<S: Strategy>(
    name: &str,
    default: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> u32 {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    let started = std::time::Instant::now();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 10_000,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{name}: {e}");
    }
    eprintln!("{name}: {cases} cases in {:.1?}", started.elapsed());
    cases
}

/// Bytes made of pieces from `dictionary` (tokens the reader looks for) and arbitrary bytes,
/// so that arbitrary input reaches past the first check.
pub fn tokens(dictionary: &'static [&'static [u8]], max: usize) -> BoxedStrategy<Vec<u8>> {
    let piece = prop_oneof![
        3 => proptest::sample::select(dictionary).prop_map(<[u8]>::to_vec),
        1 => proptest::collection::vec(any::<u8>(), 1..8),
    ];
    proptest::collection::vec(piece, 0..max)
        .prop_map(|p| p.concat())
        .boxed()
}
