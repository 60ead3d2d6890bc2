#!/usr/bin/env bash
# bench/legacy-memory.sh: what a pool of 2025-era servers costs the gateway in memory (issue
# 43), on loopback. One TypeScript SDK v1 server (tests/peers_legacy, `era: 2025-11-25`) behind
# mcp-edge (release, one thread); measured on the gateway process only (VmRSS):
#   sessions  N callers (a distinct `Authorization` each) call `add` once: the gateway opens and
#             keeps one session per caller with the server (its standalone stream read in the
#             background), idle afterwards;
#   paused    N calls of `confirm_deploy` that the server pauses to ask the client: the gateway
#             answers each `input_required` and holds the paused call (its stream to the server
#             open) until the retry or `legacy.answer_timeout`.
# KiB per item = (RSS after - RSS before) / N, after 2 s of settling.
#
# Usage: bench/legacy-memory.sh [--n N] [--edge-bin PATH]   (default N=500)
# Needs node and the legacy peers (bash .ci/run installs them into target/peers-legacy).
# Raw outputs go to target/bench/legacy-memory-<date>/. Every process started here is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

N=500
EDGE_BIN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --n) N=$2; shift ;;
    --edge-bin) EDGE_BIN=$2; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$N" -ge 1 ] && [ "$N" -le 5000 ] || { echo "--n must be in 1..5000" >&2; exit 2; }

. bench/lib.sh
PEERS=${MCP_EDGE_LEGACY_PEERS_DIR:-$ROOT/target/peers-legacy}
[ -f "$PEERS/node_modules/@modelcontextprotocol/sdk/package.json" ] ||
  { echo "the legacy peers are not in $PEERS: run bash .ci/run once" >&2; exit 1; }
command -v node >/dev/null || { echo "node is needed" >&2; exit 1; }
bench_edge_bin

OUT=$ROOT/target/bench/legacy-memory-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
echo "== raw outputs in $OUT"
start_cleanup

BASE=19800
while ! { port_free $BASE && port_free $((BASE + 1)); }; do BASE=$((BASE + 10)); done
SERVER=$BASE
EDGE=$((BASE + 1))

cp tests/peers_legacy/legacy_ts_server.mjs "$PEERS/"
node "$PEERS/legacy_ts_server.mjs" "$SERVER" >"$OUT/server.log" 2>&1 &
PIDS+=($!)
wait_port "$SERVER" 30
cat >"$OUT/gateway.yaml" <<EOF
listen: { mcp: 127.0.0.1:$EDGE, admin: null }
threads: 1
pools:
  ts: { instances: [127.0.0.1:$SERVER], era: 2025-11-25 }
default_route: { pool: ts }
legacy: { server_sessions: $((N + 100)), max_waiting: $((N + 100)) }
EOF
"$EDGE_BIN" serve --config "$OUT/gateway.yaml" >"$OUT/gateway.log" 2>&1 &
EPID=$!
PIDS+=($EPID)
wait_port "$EDGE"

rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# The client: N calls, one at a time (Python's http.client), each with its own caller or id.
calls() { # count tool arguments-json caller-prefix
  python3 - "$EDGE" "$1" "$2" "$3" "$4" <<'PY'
import http.client, json, sys
port, n, tool, args, who = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
ok = 0
for i in range(n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": tool, "arguments": json.loads(args), "_meta": meta}})
    auth = f"Bearer {who}-{i}" if who != "same" else "Bearer one-caller"
    c.request("POST", "/mcp", body, {"Content-Type": "application/json",
              "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
              "Mcp-Method": "tools/call", "Mcp-Name": tool, "Authorization": auth})
    r = c.getresponse()
    text = r.read().decode()
    ok += r.status == 200 and '"result"' in text
    c.close()
print(ok)
PY
}

# Warm up: one session and one call, so "before" holds what the first ones allocate.
calls 1 add '{"a": 1, "b": 2}' warm >/dev/null
sleep 1
before=$(rss $EPID)
ok=$(calls "$N" add '{"a": 1, "b": 2}' caller)
sleep 2
sessions=$(rss $EPID)
ok2=$(calls "$N" confirm_deploy '{"service": "api", "environment": "prod"}' same)
sleep 2
paused=$(rss $EPID)

per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (n > 0) printf "%.1f", (a - b) / n; else print "-" }'; }
{
  echo "| item | count | RSS before | RSS after | KiB each |"
  echo "|---|---:|---:|---:|---:|"
  printf '| idle session with a 2025-era server | %s of %s | %.1f MiB | %.1f MiB | %s |\n' \
    "$ok" "$N" "$(echo "$before / 1024" | bc -l)" "$(echo "$sessions / 1024" | bc -l)" "$(per "$sessions" "$before" "$ok")"
  printf '| paused call (a question out to the client) | %s of %s | %.1f MiB | %.1f MiB | %s |\n' \
    "$ok2" "$N" "$(echo "$sessions / 1024" | bc -l)" "$(echo "$paused / 1024" | bc -l)" "$(per "$paused" "$sessions" "$ok2")"
} | tee "$OUT/table.md"
