#!/usr/bin/env bash
# What an edge-cache hit costs against a proxied request (a miss), in gateway CPU µs per request
# and requests/s: the same `tools/list` through two gateways in front of one reference backend,
# one with the cache on (every request after the first is a hit) and one with it off (every
# request is proxied). CPU is the gateway process's utime+stime from /proc over the run.
#
#   bench/cache-hit-cost.sh [path/to/mcp-edge] [flows] [concurrency]
#
# Uses whatever binary it is given (default target/debug/mcp-edge): with a debug build the
# absolute figures are meaningless, only the hit/miss ratio says something. Loopback only.
set -euo pipefail
BIN="${1:-target/debug/mcp-edge}"
FLOWS="${2:-20000}"
CONC="${3:-16}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; exit 1; }

BPORT="$(free_port)"
"$BIN" backend --listen "127.0.0.1:$BPORT" > "$WORK/backend.out" 2>&1 &
PIDS+=($!)
wait_port "$BPORT"
cat > "$WORK/lists.yaml" <<YAML
name: tools-list
flows: [{method: tools/list}]
YAML

run() { # name, cache enabled
  local mcp admin; mcp="$(free_port)"; admin="$(free_port)"
  cat > "$WORK/$1.yaml" <<YAML
listen: {mcp: 127.0.0.1:$mcp, admin: 127.0.0.1:$admin}
pools: {b: {instances: [127.0.0.1:$BPORT], health: {check: off}}}
default_route: {pool: b, cache: {enabled: $2}}
YAML
  "$BIN" serve --config "$WORK/$1.yaml" > "$WORK/$1.out" 2>&1 &
  local pid=$!; PIDS+=($pid)
  wait_port "$mcp"
  "$BIN" loadtest --target "http://127.0.0.1:$mcp/mcp" --scenario "$WORK/lists.yaml" --flows 500 --concurrency "$CONC" --quiet > /dev/null
  local t0 t1 s0 s1
  t0="$(awk '{print $14+$15}' /proc/$pid/stat)"; s0="$(date +%s.%N)"
  "$BIN" loadtest --target "http://127.0.0.1:$mcp/mcp" --scenario "$WORK/lists.yaml" --flows "$FLOWS" --concurrency "$CONC" --quiet --json "$WORK/$1.json" > /dev/null
  t1="$(awk '{print $14+$15}' /proc/$pid/stat)"; s1="$(date +%s.%N)"
  python3 - "$1" "$t0" "$t1" "$s0" "$s1" "$FLOWS" "$(getconf CLK_TCK)" <<'PY'
import sys
name, t0, t1, s0, s1, n, tck = sys.argv[1], *map(float, sys.argv[2:])
print(f"{name:6} {n/(s1-s0):10.0f} req/s {((t1-t0)/tck)*1e6/n:8.1f} gateway CPU µs/req")
PY
}
echo "binary: $BIN, $FLOWS requests of tools/list, $CONC connections"
run miss false
run hit true
