#!/usr/bin/env bash
# Reproduce CI on this machine in one command: installs the optional peers the full suite needs
# (redis-server, curl, h2load, promtool, Node >= 20 and npm, Python 3 with venv: apt packages
# through sudo; the TypeScript and Python SDK peers, the conformance suite and the deploy-check
# tools into target/, which git ignores), then runs exactly what CI runs: .ci/run (cargo fmt
# --check, clippy, `cargo test` with MCP_EDGE_REQUIRE_PEERS=1 so that no peer test may skip,
# the official MCP conformance suite, the deploy checks). Arguments are passed to .ci/run.
#
#   scripts/ci-local.sh
#   CARGO_TARGET_DIR=/tmp/mcp-edge-target scripts/ci-local.sh   # a target folder of your own
set -euo pipefail
exec "$(dirname "$0")/../.ci/run" "$@"
