//! The console and explain: `POST /-/explain` for each stage's refusal and each balance mode,
//! without spending a limit token or reaching an upstream ([`explain`]); the console's files
//! and headers, its snapshot against `/metrics`, and no secret in any admin answer ([`admin`]);
//! the console in a real browser, headless Chromium driven by puppeteer-core ([`page`]).

mod admin;
mod explain;
mod history;
mod page;
