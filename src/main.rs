//! The `mcp-edge` command: parse arguments, call into the library.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mcp-edge",
    version,
    about = "An edge gateway for fleets of stateless MCP servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Drive MRTR flows through a gateway and check that retry legs land on any instance.
    Loadtest(mcp_edge::loadtest::LoadTestArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Loadtest(args) => match mcp_edge::loadtest::run(args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}
