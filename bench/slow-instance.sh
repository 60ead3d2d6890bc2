#!/usr/bin/env bash
# bench/slow-instance.sh: the tail when one instance is slow (issue 46), with a single fast tool
# so that nothing but the balancer sets the p99. Three `mcp-edge backend` instances answer
# `echo` after 2 ms; in the one-slow fleet the third is replaced by one answering after 20 ms.
# mcp-edge (one thread) balances them round_robin, least_loaded, or round_robin with latency
# outliers ejected (`outliers_rr`: `outliers: {interval: 1s, min_samples: 20}`, docs/balancing.md
# #latency-outliers: the slow instance is out from its first 1 s window); `mcp-edge loadtest --rate`
# drives `echo` open loop. Per run: p50/p99/p99.9 of the calls, and the slow instance's share
# of the calls in every 5 s window (from the gateway's mcp_edge_upstream_requests_total, scraped
# every 5 s), its worst window, and the run's p99 over the all-fast p99 of the same mode.
#
# Usage: bench/slow-instance.sh [--duration SECS] [--runs N] [--rate N] [--edge-bin PATH] [--smoke]
#   The issue's measures: --duration 30 (default), and --duration 8 --runs 10.
# Recovery (how fast a recovered instance gets its share back) is measured by the tests
# (src/gateway/balance/stages/probe_tests.rs, tests/gateway/routing/balance.rs), not here: the
# backend's delay cannot change while it runs.
# Raw outputs go to target/bench/slow-instance-<date>/. Every process started here is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION=30
RUNS=1
RATE=250
EDGE_BIN=""
SMOKE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) DURATION=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --rate) RATE=$2; shift ;;
    --edge-bin) EDGE_BIN=$2; shift ;;
    --smoke) SMOKE=1; DURATION=5; RATE=100 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
. bench/lib.sh
bench_tools curl:curl python3:python3
bench_edge_bin
OUT=$ROOT/target/bench/slow-instance-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
echo "== raw outputs in $OUT"
start_cleanup

ports_free() { # first count
  local p
  for p in $(seq "$1" $(($1 + $2 - 1))); do port_free "$p" || return 1; done
}
BASE=19600
while ! ports_free "$BASE" 8; do BASE=$((BASE + 20)); done
FAST=$BASE              # 3 fast instances: FAST, FAST+1, FAST+2
SLOW=$((BASE + 3))      # the slow stand-in for FAST+2
GW=$((BASE + 5))
ADMIN=$((BASE + 6))

"$EDGE_BIN" backend --instances 3 --base-port "$FAST" --delay 2ms >"$OUT/fast.log" 2>&1 &
PIDS+=($!)
"$EDGE_BIN" backend --listen "127.0.0.1:$SLOW" --delay 20ms >"$OUT/slow.log" 2>&1 &
PIDS+=($!)
for p in $FAST $((FAST + 1)) $((FAST + 2)) $SLOW; do wait_port "$p"; done
printf 'name: echo-only\nflows:\n  - {tool: echo, arguments: {text: hi}}\n' >"$OUT/echo.yaml"

GW_PID=""
gateway() { # instances mode
  [ -n "$GW_PID" ] && { kill "$GW_PID" 2>/dev/null || true; wait "$GW_PID" 2>/dev/null || true; }
  local balance=$2 extra=""
  if [ "$2" = outliers_rr ]; then
    balance=round_robin
    extra='    outliers: { interval: 1s, min_samples: 20 }\n'
  fi
  printf "listen:\n  mcp: 127.0.0.1:%s\n  admin: 127.0.0.1:%s\nthreads: 1\npools:\n  default:\n    instances: [%s]\n    balance: %s\n${extra}default_route: { pool: default }\n" \
    "$GW" "$ADMIN" "$1" "$balance" >"$OUT/gateway.yaml"
  "$EDGE_BIN" serve --config "$OUT/gateway.yaml" >"$OUT/gateway.log" 2>&1 &
  GW_PID=$!
  PIDS+=("$GW_PID")
  wait_port "$GW"
  wait_port "$ADMIN"
}

ROWS=$OUT/runs.tsv
printf 'fleet\tbalance\trun\tp50\tp99\tp999\terrors\trequests\tslow_share_per_5s\n' >"$ROWS"
for fleet in all-fast one-slow; do
  third=$((FAST + 2)); [ "$fleet" = one-slow ] && third=$SLOW
  for mode in round_robin least_loaded outliers_rr; do
    for run in $(seq 1 "$RUNS"); do
      # A fresh gateway per run: every run starts from what the balancer knows at start.
      gateway "127.0.0.1:$FAST, 127.0.0.1:$((FAST + 1)), 127.0.0.1:$third" "$mode"
      name=$fleet-$mode-$run
      : >"$OUT/$name.scrapes"
      (
        for _ in $(seq 0 $((DURATION / 5 + 1))); do
          { echo "T $(date +%s.%N)"; curl -s "http://127.0.0.1:$ADMIN/metrics" | grep '^mcp_edge_upstream_requests_total{' || true; } >>"$OUT/$name.scrapes"
          sleep 5
        done
      ) &
      sampler=$!
      "$EDGE_BIN" loadtest --target "http://127.0.0.1:$GW/mcp" --quiet --json "$OUT/$name.json" \
        --max-error-rate 1 --scenario "$OUT/echo.yaml" --rate "$RATE" --duration "${DURATION}s" \
        >"$OUT/$name.txt" 2>&1 || true
      sleep 0.2
      curl -s "http://127.0.0.1:$ADMIN/metrics" | { echo "T $(date +%s.%N)"; grep '^mcp_edge_upstream_requests_total{' || true; } >>"$OUT/$name.scrapes"
      kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true
      python3 - "$OUT/$name" "$fleet" "$mode" "$run" "127.0.0.1:$third" >>"$ROWS" <<'EOF'
import json, re, sys
base, fleet, mode, run, third = sys.argv[1:]
r = json.load(open(base + ".json"))
l = r["latency_ms"]["first"]
# Cumulative requests per upstream at each scrape; the third instance's share per window.
snaps, cur = [], None
for line in open(base + ".scrapes"):
    if line.startswith("T "):
        cur = {}
        snaps.append(cur)
    elif cur is not None:
        m = re.search(r'upstream="([^"]+)"\} (\S+)', line)
        if m:
            cur[m.group(1)] = float(m.group(2))
shares = []
for a, b in zip(snaps, snaps[1:]):
    total = sum(b.values()) - sum(a.values())
    if total > 0:
        shares.append((b.get(third, 0) - a.get(third, 0)) / total)
print(f'{fleet}\t{mode}\t{run}\t{l["p50"]:.2f}\t{l["p99"]:.2f}\t{l["p999"]:.2f}\t'
      f'{r["requests"]["errors"]}\t{r["requests"]["total"]}\t'
      + ",".join(f"{s * 100:.2f}%" for s in shares))
EOF
      tail -1 "$ROWS"
    done
  done
done

echo
echo "== summary (p99 over the all-fast p99 of the same mode; worst 5 s window of the third instance)"
python3 - "$ROWS" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
for mode in ("round_robin", "least_loaded", "outliers_rr"):
    fast = [float(r["p99"]) for r in rows if r["balance"] == mode and r["fleet"] == "all-fast"]
    ref = statistics.median(fast) if fast else float("nan")
    for r in rows:
        if r["balance"] != mode or r["fleet"] != "one-slow":
            continue
        windows = [float(s.rstrip("%")) for s in r["slow_share_per_5s"].split(",") if s]
        worst = max(windows) if windows else float("nan")
        print(f'{mode:13} run {r["run"]:>2}: p50 {r["p50"]} p99 {r["p99"]} ({float(r["p99"]) / ref:.2f}x all-fast {ref:.2f})'
              f' p99.9 {r["p999"]}  slow share worst 5 s window {worst:.2f}%  errors {r["errors"]}/{r["requests"]}')
EOF
