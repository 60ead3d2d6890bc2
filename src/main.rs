//! The `mcp-edge` command: parse arguments, call into the library.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "mcp-edge",
    version,
    about = "An edge gateway for fleets of stateless MCP (2026-07-28) servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the reference stateless MRTR backend as a pool of instances.
    Backend(mcp_edge::backend::BackendArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Backend(args) => mcp_edge::backend::run(args),
    }
}
