#!/usr/bin/env bash
# bench/overload.sh: a fleet offered twice what it can take, through mcp-edge, without a pool
# limit and with the adaptive one (pools.<name>.concurrency, docs/overload.md). On loopback.
#
# The fleet: `mcp-edge backend --instances 2 --max-concurrent SLOTS --delay DELAY`: each instance
# works on SLOTS requests at once and queues the rest, so its latency rises with load as a real
# server's does; capacity = 2 x SLOTS / DELAY calls a second (2 x 4 / 20 ms = 400/s by default).
# The load: `echo` calls, open loop at 2x capacity (`mcp-edge loadtest --rate`, latency counted
# from each call's intended start), and beside it MRTR flows (`deploy`, two legs with an answer)
# at 5 a second, started before the flood and running through it.
# Reported per mode: goodput (calls answered 200 a second, and as a share of capacity), p50/p99
# of the echo calls (shed calls answer in about a millisecond, so with the limit the p99 is
# about the p98 of admitted calls), calls shed (503 / -31018), and flows: completed, refused at
# their first leg (a new call, shed), and retry legs that failed (a flow already started).
#
# Usage: bench/overload.sh [--duration SECS] [--slots N] [--delay DURATION] [--edge-bin PATH] [--smoke]
# Raw outputs go to target/bench/overload-<date>/. Every process started here is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION=10
SLOTS=4
DELAY_MS=20
EDGE_BIN=""
SMOKE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) DURATION=$2; shift ;;
    --slots) SLOTS=$2; shift ;;
    --delay) DELAY_MS=${2%ms}; shift ;;
    --edge-bin) EDGE_BIN=$2; shift ;;
    --smoke) SMOKE=1; DURATION=3 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
. bench/lib.sh
bench_tools curl:curl python3:python3
bench_edge_bin
OUT=$ROOT/target/bench/overload-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
echo "== raw outputs in $OUT"
start_cleanup

CAPACITY=$((2 * SLOTS * 1000 / DELAY_MS))
OFFERED=$((2 * CAPACITY))
echo "== fleet capacity ${CAPACITY}/s (2 instances x $SLOTS at once x ${DELAY_MS} ms); offered ${OFFERED}/s for ${DURATION}s"

ports_free() { # first count
  local p
  for p in $(seq "$1" $(($1 + $2 - 1))); do port_free "$p" || return 1; done
}
BASE=19600
while ! ports_free "$BASE" 4; do BASE=$((BASE + 20)); done
FLEET=$BASE           # 2 instances: FLEET, FLEET+1
GW=$((BASE + 2))
ADMIN=$((BASE + 3))

"$EDGE_BIN" backend --instances 2 --base-port "$FLEET" --delay "${DELAY_MS}ms" \
  --max-concurrent "$SLOTS" >"$OUT/backend.log" 2>&1 &
PIDS+=($!)
wait_port "$FLEET"; wait_port $((FLEET + 1))

cat >"$OUT/echo.yaml" <<'EOF'
name: echo
flows:
  - {tool: echo, arguments: {text: hi}}
EOF
cat >"$OUT/deploy.yaml" <<'EOF'
name: deploy-flows
flows:
  - tool: deploy
    arguments: {service: api, environment: prod}
    param_headers: {Environment: environment}
    answers: {confirmation: "$args.service"}
EOF

GW_PID=""
gateway() { # concurrency-yaml (empty: none)
  [ -n "$GW_PID" ] && { kill "$GW_PID" 2>/dev/null || true; wait "$GW_PID" 2>/dev/null || true; }
  printf 'listen:\n  mcp: 127.0.0.1:%s\n  admin: 127.0.0.1:%s\nthreads: 1\npools:\n  fleet:\n    instances: [127.0.0.1:%s, 127.0.0.1:%s]\n    balance: least_loaded\n%s\ndefault_route: { pool: fleet }\n' \
    "$GW" "$ADMIN" "$FLEET" $((FLEET + 1)) "$1" >"$OUT/gateway.yaml"
  "$EDGE_BIN" serve --config "$OUT/gateway.yaml" >"$OUT/gateway.log" 2>&1 &
  GW_PID=$!
  PIDS+=("$GW_PID")
  wait_port "$GW"
  wait_port "$ADMIN"
}

RUNS=$OUT/overload.tsv
printf 'mode\toffered_per_s\tgoodput_per_s\tgoodput_share\tp50_ms\tp99_ms\tshed\tother_errors\tflows_completed\tflows_first_leg_refused\tretry_leg_errors\tlimit_at_end\n' >"$RUNS"
for mode in none adaptive; do
  conc=""
  [ "$mode" = adaptive ] && conc="    concurrency: {adaptive: true, min: 2, max: 1000}"
  gateway "$conc"
  # The flows start first and run through the flood.
  "$EDGE_BIN" loadtest --target "http://127.0.0.1:$GW/mcp" --quiet --json "$OUT/$mode-flows.json" \
    --scenario "$OUT/deploy.yaml" --rate 5 --duration "$((DURATION + 2))s" --max-error-rate 1 \
    >"$OUT/$mode-flows.txt" 2>&1 &
  flows=$!
  PIDS+=("$flows")
  sleep 1
  "$EDGE_BIN" loadtest --target "http://127.0.0.1:$GW/mcp" --quiet --json "$OUT/$mode-echo.json" \
    --scenario "$OUT/echo.yaml" --rate "$OFFERED" --duration "${DURATION}s" --max-error-rate 1 \
    >"$OUT/$mode-echo.txt" 2>&1 || true
  wait "$flows" || true
  curl -s "http://127.0.0.1:$ADMIN/metrics" >"$OUT/$mode.metrics"
  python3 - "$OUT/$mode" "$mode" "$OFFERED" "$CAPACITY" >>"$RUNS" <<'EOF'
import json, sys
base, mode, offered, capacity = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
e = json.load(open(base + "-echo.json"))
f = json.load(open(base + "-flows.json"))
ok = e["requests"]["total"] - e["requests"]["errors"]
goodput = ok / e["elapsed_s"]
shed = e["errors"]["by_code"].get("-31018", 0)
l = e["latency_ms"]["first"]
limit = "-"
for line in open(base + ".metrics"):
    if line.startswith('mcp_edge_pool_concurrency_limit{pool="fleet"}'):
        limit = line.split()[-1]
print(f'{mode}\t{offered:.0f}\t{goodput:.0f}\t{goodput / capacity:.2f}\t{l["p50"]:.1f}\t{l["p99"]:.1f}\t{shed}\t'
      f'{e["requests"]["errors"] - shed}\t{f["flows"]["completed"]}\t{f["errors"]["by_leg"]["first"]}\t{f["errors"]["by_leg"]["retry"]}\t{limit}')
EOF
  tail -1 "$RUNS"
done

echo
echo "| pool limit | offered / s | goodput / s (share of capacity $CAPACITY) | p50 ms | p99 ms | shed | other errors | flows completed | new flows refused | retry legs failed | limit at end |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
awk -F'\t' 'NR > 1 { printf "| %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' "$RUNS"
