//! The `mcp-edge` command: parse arguments, call into the library.

fn main() {}
