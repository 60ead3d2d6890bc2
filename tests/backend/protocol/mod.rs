//! The spec's conformance cases for a stateless MRTR server, against a real backend pool over
//! HTTP on 127.0.0.1.

mod discovery;
mod mrtr;
mod streams;
mod validation;

use crate::support::http::*;

use mcp_edge::backend::{Pool, PoolOptions};
use serde_json::{json, Value};
use std::time::Duration;

pub fn pool() -> Pool {
    Pool::start(PoolOptions::local(1)).expect("start pool")
}

pub const META_OK: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
