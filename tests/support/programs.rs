//! The programs outside Rust that some tests drive (redis-server, curl, h2load, node, promtool,
//! the SDK peers), and the one rule for when one is missing: the test says loudly which program
//! and the command that installs it, then skips; with `MCP_EDGE_REQUIRE_PEERS=1` (set by
//! `.ci/run`) the same absence fails the test instead. `scripts/ci-local.sh` installs them all.
//!
//! Also [`signal`]: signals sent with the shell's own `kill`, so that no test needs procps.
//! Nothing here starts a long-lived process.

use std::path::Path;

/// A program a test may need, with the command that installs it on Debian or Ubuntu.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    /// The executable's name on PATH.
    pub name: &'static str,
    /// The command that installs it.
    pub install: &'static str,
}

pub const REDIS_SERVER: Program = Program {
    name: "redis-server",
    install: "sudo apt-get install -y redis-server",
};
pub const CURL: Program = Program {
    name: "curl",
    install: "sudo apt-get install -y curl",
};
pub const H2LOAD: Program = Program {
    name: "h2load",
    install: "sudo apt-get install -y nghttp2-client",
};
pub const NODE: Program = Program {
    name: "node",
    install: "sudo apt-get install -y nodejs npm",
};
pub const PROMTOOL: Program = Program {
    name: "promtool",
    install: "sudo apt-get install -y prometheus",
};

/// Whether missing peers fail the tests (`MCP_EDGE_REQUIRE_PEERS=1`, as in CI).
pub fn required() -> bool {
    std::env::var("MCP_EDGE_REQUIRE_PEERS").as_deref() == Ok("1")
}

/// Whether `name` is an executable file in one of PATH's folders (or a path to one).
pub fn on_path(name: &str) -> bool {
    let runnable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        return runnable(Path::new(name));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| runnable(&dir.join(name)))
}

/// Whether `p` is installed. When it is not: fails the test under `MCP_EDGE_REQUIRE_PEERS=1`,
/// else prints why (loudly) and returns false, so that the test returns early.
pub fn have(p: Program) -> bool {
    on_path(p.name) || missing(&format!("`{}` is not on PATH", p.name), p.install)
}

/// A peer the test needs is absent (`what`, and `install`, the command that installs it):
/// panics under `MCP_EDGE_REQUIRE_PEERS=1`, else prints a banner and returns false.
pub fn missing(what: &str, install: &str) -> bool {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    if required() {
        panic!(
            "{test}: {what}, and MCP_EDGE_REQUIRE_PEERS=1 makes a missing peer a failure.\n\
             Install it: {install}\n\
             (or run scripts/ci-local.sh, which installs every optional peer and runs what CI runs)"
        );
    }
    // Written to the stderr handle itself: libtest captures `eprintln!` of passing tests.
    let banner = format!(
        "\n!!!!!!!! SKIPPED {test}: {what}.\n\
         !!!!!!!! Install it: {install}\n\
         !!!!!!!! (scripts/ci-local.sh installs every optional peer; MCP_EDGE_REQUIRE_PEERS=1 makes this a failure)\n"
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), banner.as_bytes());
    false
}

/// Send signal `sig` (a name: "HUP", "TERM", "STOP"...) to process `pid`, with the shell's
/// builtin `kill` (`/bin/sh` is on every machine; procps's `kill` is not). Whether it was sent.
pub fn signal(pid: u32, sig: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", r#"kill -s "$0" "$1""#, sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}
