#!/usr/bin/env bash
# bench/bridge.sh: what the protocol bridge costs the gateway (docs/bridge.md), on loopback.
#
# One gateway, two pools: `modern` (one reference backend instance, 2026-07-28) and `old` (one
# TypeScript SDK v1 server, `era: 2025-11-25`, from tests/peers_legacy). wrk (1 thread, closed
# loop, CONNS connections, DURATION s after WARMUP s) sends, in turn:
#   native      a 2026 tools/call `echo` to the modern pool            (the reference)
#   client2025  a 2025-era tools/call `echo` on a bridged session       (legacy client -> 2026 pool)
#   server2025  a 2026 tools/call `add` to the legacy pool              (2026 client -> legacy server)
# and reports requests/s and the gateway's CPU time per request (utime+stime from /proc, before
# and after each run, over the requests wrk completed). The targets of the bridge issues are in
# CPU per request against a native call: a bridged call costs the gateway at most ~20% more.
#
# CPU per request depends on the rate: at a tenth of the native rate each request pays its own
# wake-ups (epoll, futex) where at full speed many share one. The legacy server is node and
# bounds server2025 at a few thousand requests/s, so after each bridged row the native call runs
# again paced to about the same rate (`native@client2025`, `native@server2025`: a wrk delay()
# per request on each connection), and that row is the bridged row's reference. A paced call
# still finds its server quick; the legacy server takes milliseconds, and the gateway sleeps
# and wakes again for each of its answers. `slow2026` is the same 2026 call to a reference
# backend that answers SLOW later (4 ms by default, about the legacy server's time under this
# load), through a second gateway of its own at CONNS connections: the closest 2026 twin of
# server2025. `native~1ms` and `client2025~1ms` are the native call and the bridged one at
# CONNS connections that each pause 1 ms after every answer: the same connections, the same
# pacing and about the same rate, so the same wake-ups per request (the paced rows reach a fast
# row's rate only with more connections than it has).
#
# With the TypeScript SDK v2 peers (target/peers), a third gateway passes 2025-era clients
# through to a server of both eras (`legacy_clients: pass`, tests/peers/ts_dual_server.mjs):
#   pass2025    a 2025-era tools/call `whoami` on a pinned session     (passed through as it is)
#   dual2026    the same call as a 2026 request to the same server     (pass2025's reference)
#
# Usage: bench/bridge.sh [--edge-bin PATH]   (env: DURATION=10 WARMUP=2 CONNS=16 SLOW=4ms;
#        QUICK=1: only the rows of a 2025-era client's call and their native references)
# Needs node and the legacy peers (bash .ci/run installs them into target/peers-legacy) for the
# server2025 row; skips it loudly without them. Every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-16}
EDGE_BIN=${EDGE_BIN:-}
[ "${1:-}" = "--edge-bin" ] && EDGE_BIN=$2
bench_tools wrk:wrk curl:curl
bench_edge_bin
start_cleanup
OUT=target/bench/bridge-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
PEERS=${MCP_EDGE_LEGACY_PEERS_DIR:-$PWD/target/peers-legacy}

BACKEND=17301 OLD=17302 SLOWB=17303 DUAL=17304 MCP=17380 ADMIN=17390 MCP2=17381 ADMIN2=17391 MCP3=17382 ADMIN3=17392
SLOW=${SLOW:-4ms}
for p in $BACKEND $OLD $SLOWB $DUAL $MCP $ADMIN $MCP2 $ADMIN2 $MCP3 $ADMIN3; do port_free $p || { echo "port $p is in use" >&2; exit 1; }; done
MODERN_PEERS=${MCP_EDGE_PEERS_DIR:-$PWD/target/peers}
HAVE_DUAL=0
if command -v node >/dev/null && [ -f "$MODERN_PEERS/node_modules/@modelcontextprotocol/server/package.json" ]; then
  cp tests/peers/ts_dual_server.mjs "$MODERN_PEERS/"
  node "$MODERN_PEERS/ts_dual_server.mjs" $DUAL one >"$OUT/dual.log" 2>&1 &
  PIDS+=($!)
  cat >"$OUT/gateway3.yaml" <<EOF
listen: { mcp: 127.0.0.1:$MCP3, admin: 127.0.0.1:$ADMIN3 }
pools:
  dual: { instances: [127.0.0.1:$DUAL], legacy_clients: pass, health: { check: tcp } }
default_route: { pool: dual }
EOF
  "$EDGE_BIN" serve --config "$OUT/gateway3.yaml" >"$OUT/gateway3.log" 2>&1 &
  GW3=$!
  PIDS+=($GW3)
  HAVE_DUAL=1
else
  echo "!!!!!!!! SKIPPING the pass2025 rows: no node or no TypeScript SDK v2 in $MODERN_PEERS (bash .ci/run installs it)"
fi
"$EDGE_BIN" backend --instances 1 --base-port $BACKEND >"$OUT/backend.log" 2>&1 &
PIDS+=($!)
HAVE_OLD=0
if command -v node >/dev/null && [ -f "$PEERS/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
  cp tests/peers_legacy/legacy_ts_server.mjs "$PEERS/"
  node "$PEERS/legacy_ts_server.mjs" $OLD >"$OUT/old.log" 2>&1 &
  PIDS+=($!)
  HAVE_OLD=1
else
  echo "!!!!!!!! SKIPPING the server2025 row: no node or no TypeScript SDK v1 in $PEERS (bash .ci/run installs it)"
fi
"$EDGE_BIN" backend --instances 1 --base-port $SLOWB --delay "$SLOW" >"$OUT/slow-backend.log" 2>&1 &
PIDS+=($!)
cat >"$OUT/gateway2.yaml" <<EOF
listen: { mcp: 127.0.0.1:$MCP2, admin: 127.0.0.1:$ADMIN2 }
pools:
  slow: { instances: [127.0.0.1:$SLOWB] }
default_route: { pool: slow }
EOF
"$EDGE_BIN" serve --config "$OUT/gateway2.yaml" >"$OUT/gateway2.log" 2>&1 &
GW2=$!
PIDS+=($GW2)
cat >"$OUT/gateway.yaml" <<EOF
listen: { mcp: 127.0.0.1:$MCP, admin: 127.0.0.1:$ADMIN }
pools:
  modern: { instances: [127.0.0.1:$BACKEND] }
  old: { instances: [127.0.0.1:$OLD], era: 2025-11-25, health: { check: off } }
routes:
  - { match: { method: tools/call, name: add }, pool: old }
default_route: { pool: modern }
EOF
"$EDGE_BIN" serve --config "$OUT/gateway.yaml" >"$OUT/gateway.log" 2>&1 &
GW=$!
PIDS+=($GW)
wait_port $BACKEND && wait_port $MCP && { [ $HAVE_OLD = 0 ] || wait_port $OLD; }
wait_port $SLOWB && wait_port $MCP2
[ $HAVE_DUAL = 0 ] || { wait_port $DUAL && wait_port $MCP3; }

# A bridged session for the 2025-era client.
SID=$(curl -s -D - -o /dev/null -X POST "http://127.0.0.1:$MCP/mcp" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' |
  tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
[ -n "$SID" ] || { echo "the bridge opened no session" >&2; exit 1; }
BRIDGED=$SID
if [ $HAVE_DUAL = 1 ]; then
  # A session passed through to the server of both eras (the gateway seals its id).
  PASSED=$(curl -s -D - -o /dev/null -X POST "http://127.0.0.1:$MCP3/mcp" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' |
    tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
  [ -n "$PASSED" ] || { echo "the pass-through opened no session" >&2; exit 1; }
fi

lua() { # name method mcp-name body [legacy]
  local f="$OUT/$1.lua"
  {
    echo 'wrk.method = "POST"'
    echo 'wrk.path = "/mcp"'
    echo 'wrk.headers["Content-Type"] = "application/json"'
    echo 'wrk.headers["Accept"] = "application/json, text/event-stream"'
    if [ "${5:-}" = legacy ]; then
      echo 'wrk.headers["MCP-Protocol-Version"] = "2025-11-25"'
      echo "wrk.headers[\"Mcp-Session-Id\"] = \"$SID\""
    else
      echo 'wrk.headers["MCP-Protocol-Version"] = "2026-07-28"'
      echo "wrk.headers[\"Mcp-Method\"] = \"$2\""
      echo "wrk.headers[\"Mcp-Name\"] = \"$3\""
    fi
    echo "wrk.body = '$4'"
  } >"$f"
  echo "$f"
}
# The `_meta` a 2026 client sends on each request (clientInfo: the spec's SHOULD), and the very
# members the bridge writes for the session opened above: the native and the bridged call ask
# the fleet the same bytes, so their rows compare the gateway's work and nothing else.
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}'
ROWS=(native client2025)
LUA_native=$(lua native tools/call echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"},$META}}")
LUA_client2025=$(lua client2025 tools/call echo '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}' legacy)
SID=${PASSED:-}
LUA_pass2025=$(lua pass2025 tools/call whoami '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}' legacy)
LUA_dual2026=$(lua dual2026 tools/call whoami "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"whoami\",\"arguments\":{},$META}}")
SID=$BRIDGED
if [ $HAVE_OLD = 1 ] && [ -z "${QUICK:-}" ]; then
  ROWS+=(server2025)
  LUA_server2025=$(lua server2025 tools/call add "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2},$META}}")
fi

hz=$(getconf CLK_TCK)
# run NAME LUA [CONNS [GATEWAY_PID PORT]]: one timed row; prints it and leaves its requests/s in $RPS.
run() {
  local row=$1 script=$2 conns=${3:-$CONNS} gw=${4:-$GW} port=${5:-$MCP}
  wrk -t1 -c"$conns" -d"${WARMUP}s" -s "$script" "http://127.0.0.1:$port/mcp" >/dev/null
  local before after n bad us
  before=$(cpu_ticks $gw)
  wrk -t1 -c"$conns" -d"${DURATION}s" -s "$script" "http://127.0.0.1:$port/mcp" >"$OUT/$row.txt"
  after=$(cpu_ticks $gw)
  n=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$OUT/$row.txt")
  bad=$(sed -n 's/^ *Non-2xx or 3xx responses: *//p' "$OUT/$row.txt")
  RPS=$(sed -n 's/^Requests\/sec: *//p' "$OUT/$row.txt")
  us=$(awk -v t=$((after - before)) -v n="$n" -v hz="$hz" 'BEGIN { printf "%.1f", n ? t * 1e6 / hz / n : 0 }')
  printf '%-18s %10s %10s %14s\n' "$row" "$RPS" "${bad:-0}" "$us" | tee -a "$OUT/summary.txt"
  [ "${bad:-0}" = 0 ] || echo "!!!!!!!! $row: $bad answers were not 2xx: not the call meant (see $OUT)" >&2
}
# paced NAME RATE: the native call at about RATE requests/s (wrk's delay() is in whole ms, so
# the connections are as many as RATE needs with a 2 ms pause after each answer: a cycle of
# about 3.1 ms, measured here).
paced() {
  local conns
  conns=$(awk -v r="$2" 'BEGIN { c = int(r * 0.0031 + 0.5); print (c < 1 ? 1 : c) }')
  cp "$LUA_native" "$OUT/paced.lua"
  echo 'function delay() return 2 end' >>"$OUT/paced.lua"
  run "$1" "$OUT/paced.lua" "$conns"
}
: >"$OUT/summary.txt"
printf '%-18s %10s %10s %14s\n' row "req/s" "non-2xx" "gateway us/req"
# evenly NAME LUA: the row at CONNS connections, each pausing 1 ms after each answer: the
# bridged call and its native twin at the same connections and the same pacing (so at about
# the same rate, with the same wake-ups per request).
evenly() {
  cp "$2" "$OUT/$1.lua"
  echo 'function delay() return 1 end' >>"$OUT/$1.lua"
  run "$1" "$OUT/$1.lua" "$CONNS"
}
for row in "${ROWS[@]}"; do
  var="LUA_$row"
  run "$row" "${!var}"
  [ "$row" = native ] || paced "native@$row" "$RPS"
done
evenly "native~1ms" "$LUA_native"
evenly "client2025~1ms" "$LUA_client2025"
[ -n "${QUICK:-}" ] && { echo "raw outputs: $OUT"; exit 0; }
run "slow2026" "$LUA_native" "$CONNS" "$GW2" "$MCP2"
if [ $HAVE_DUAL = 1 ]; then
  run "pass2025" "$LUA_pass2025" "$CONNS" "$GW3" "$MCP3"
  run "dual2026" "$LUA_dual2026" "$CONNS" "$GW3" "$MCP3"
fi
echo "raw outputs: $OUT"
