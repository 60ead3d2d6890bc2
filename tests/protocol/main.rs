//! The readers of untrusted bytes, with no socket and no peer: the JSON-RPC envelope reader's
//! rules (`envelope`), its fast scan against the full walk (`envelope_fast`), every reader
//! behind the gateway seeing what the gateway saw (`differential`), and property tests at
//! volume for the HTTP/1.1, ClientHello, h2 → HTTP/1.1 and envelope readers (`fuzz`).
//! `DIFF_CASES` and `FUZZ_CASES` set the case counts of a long run (docs/fuzzing.md).

mod differential;
mod envelope;
mod envelope_fast;
mod fuzz;
