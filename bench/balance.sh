#!/usr/bin/env bash
# bench/balance.sh: how each balance mode copes with a slow instance and with skewed keys, on
# loopback, through mcp-edge (release) in front of `mcp-edge backend` instances.
#
# Part 1, latency (open loop, `mcp-edge loadtest --rate`): three instances answer after 2 ms,
# and the tool mix is mixed (9 in 10 calls `echo`, 1 in 10 `charge_count`, 20 ms slower); then
# one instance is made 10x slower (20 ms). For round_robin, least_loaded and hash (on the tool
# name) the load tester reports p50/p99 and errors.
# Part 2, skew (closed loop): `deploy` flows (two MRTR legs each) whose Environment (the
# `Mcp-Param-Environment` header, the hash key) follows a Zipf(1.1) law over 50 values, against
# three instances answering after 5 ms, with and without `load_bound: 0.25`. The gateway's
# balancer load gauge is sampled every 100 ms: the busiest instance's mean in-flight over the
# pool's mean, and the share of requests that stayed on their key's home instance.
#
# Usage: bench/balance.sh [--duration SECS] [--rate N] [--edge-bin PATH] [--smoke]
# Raw outputs go to target/bench/balance-<date>/. Every process started here is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION=10
RATE=400
EDGE_BIN=""
SMOKE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) DURATION=$2; shift ;;
    --rate) RATE=$2; shift ;;
    --edge-bin) EDGE_BIN=$2; shift ;;
    --smoke) SMOKE=1; DURATION=2; RATE=100 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
. bench/lib.sh
bench_tools curl:curl python3:python3
bench_edge_bin
OUT=$ROOT/target/bench/balance-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
echo "== raw outputs in $OUT"
start_cleanup

ports_free() { # first count
  local p
  for p in $(seq "$1" $(($1 + $2 - 1))); do port_free "$p" || return 1; done
}
BASE=19500
while ! ports_free "$BASE" 10; do BASE=$((BASE + 20)); done
FAST=$BASE              # 3 fast instances: FAST, FAST+1, FAST+2
SLOW=$((BASE + 3))      # the slow stand-in for FAST+2
GW=$((BASE + 5))
ADMIN=$((BASE + 6))
SKEW=$((BASE + 7))      # 3 instances for part 2: SKEW..SKEW+2

backend() { # log args...
  local log=$1; shift
  "$EDGE_BIN" backend "$@" >"$OUT/$log.log" 2>&1 &
  PIDS+=($!)
}
backend fast --instances 3 --base-port "$FAST" --delay 2ms --tool-delay charge_count=20ms
backend slow --listen "127.0.0.1:$SLOW" --delay 20ms --tool-delay charge_count=20ms
backend skew --instances 3 --base-port "$SKEW" --delay 5ms
for p in $FAST $((FAST + 1)) $((FAST + 2)) $SLOW $SKEW $((SKEW + 1)) $((SKEW + 2)); do wait_port "$p"; done

cat >"$OUT/mix.yaml" <<'EOF'
name: mixed-latency
flows:
  - {tool: echo, arguments: {text: hi}, weight: 9}
  - {tool: charge_count, arguments: {cart_id: c1}, weight: 1}
EOF
cat >"$OUT/deploy.yaml" <<'EOF'
name: zipf-deploy
flows:
  - tool: deploy
    arguments: {service: api, environment: "$feed.env"}
    param_headers: {Environment: environment}
    answers: {confirmation: "$args.service"}
EOF
python3 - "$OUT/envs.csv" <<'EOF'
import random, sys
random.seed(7)
w = [1 / k ** 1.1 for k in range(1, 51)]
with open(sys.argv[1], "w") as f:
    f.write("env\n")
    for e in random.choices(range(50), weights=w, k=5000):
        f.write(f"env{e}\n")
EOF

GW_PID=""
gateway() { # pool-yaml: (re)start the gateway with one pool `default`
  [ -n "$GW_PID" ] && { kill "$GW_PID" 2>/dev/null || true; wait "$GW_PID" 2>/dev/null || true; }
  printf 'listen:\n  mcp: 127.0.0.1:%s\n  admin: 127.0.0.1:%s\nthreads: 1\npools:\n  default:\n%s\ndefault_route: { pool: default }\n' \
    "$GW" "$ADMIN" "$1" >"$OUT/gateway.yaml"
  "$EDGE_BIN" serve --config "$OUT/gateway.yaml" >"$OUT/gateway.log" 2>&1 &
  GW_PID=$!
  PIDS+=("$GW_PID")
  wait_port "$GW"
  wait_port "$ADMIN"
}

loadtest() { # name args...: one run, its JSON report kept
  local name=$1; shift
  "$EDGE_BIN" loadtest --target "http://127.0.0.1:$GW/mcp" --quiet --json "$OUT/$name.json" \
    --max-error-rate 1 "$@" >"$OUT/$name.txt" 2>&1 || true
}

echo
echo "== part 1: latency, open loop at $RATE flows/s for ${DURATION}s"
RUNS=$OUT/latency.tsv
printf 'fleet\tbalance\tp50\tp99\terrors\trequests\n' >"$RUNS"
for fleet in all-fast one-slow; do
  third=$((FAST + 2)); [ "$fleet" = one-slow ] && third=$SLOW
  for mode in round_robin least_loaded hash; do
    gateway "    instances: [127.0.0.1:$FAST, 127.0.0.1:$((FAST + 1)), 127.0.0.1:$third]
    balance: $mode"
    loadtest "$fleet-$mode" --scenario "$OUT/mix.yaml" --rate "$RATE" --duration "${DURATION}s"
    python3 - "$OUT/$fleet-$mode.json" "$fleet" "$mode" >>"$RUNS" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency_ms"]["first"]
print(f'{sys.argv[2]}\t{sys.argv[3]}\t{l["p50"]:.2f}\t{l["p99"]:.2f}\t{r["requests"]["errors"]}\t{r["requests"]["total"]}')
EOF
    tail -1 "$RUNS"
  done
done

echo
echo "== part 2: Zipf keys, closed loop (32 flows at once) for ${DURATION}s"
SKEWRUNS=$OUT/skew.tsv
printf 'bound\tbusiest_over_mean\tstayed_home\trequests\terrors\n' >"$SKEWRUNS"
for bound in none 0.25; do
  extra=""; [ "$bound" != none ] && extra="
    load_bound: $bound"
  gateway "    instances: [127.0.0.1:$SKEW, 127.0.0.1:$((SKEW + 1)), 127.0.0.1:$((SKEW + 2))]
    balance: hash
    hash_key: param:Environment$extra"
  : >"$OUT/skew-$bound.samples"
  (
    end=$((SECONDS + DURATION))
    while [ $SECONDS -lt $end ]; do
      curl -s "http://127.0.0.1:$ADMIN/metrics" | grep '^mcp_edge_upstream_balancer_load{' >>"$OUT/skew-$bound.samples" || true
      sleep 0.1
    done
  ) &
  sampler=$!
  loadtest "skew-$bound" --scenario "$OUT/deploy.yaml" --feed "$OUT/envs.csv" --concurrency 32 --duration "${DURATION}s"
  wait "$sampler" || true
  curl -s "http://127.0.0.1:$ADMIN/metrics" >"$OUT/skew-$bound.metrics"
  python3 - "$OUT/skew-$bound" "$bound" >>"$SKEWRUNS" <<'EOF'
import json, re, sys
base, bound = sys.argv[1], sys.argv[2]
loads = {}
for line in open(base + ".samples"):
    m = re.search(r'upstream="([^"]+)"\} (\S+)', line)
    if m:
        loads.setdefault(m.group(1), []).append(float(m.group(2)))
means = [sum(v) / len(v) for v in loads.values()] or [0]
pool_mean = sum(means) / len(means)
text = open(base + ".metrics").read()
def total(name):
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name + "{") or l.startswith(name + " "))
sent, moved = total("mcp_edge_upstream_requests_total"), total("mcp_edge_balance_hash_moved_total")
r = json.load(open(base + ".json"))
ratio = max(means) / pool_mean if pool_mean else 0
print(f'{bound}\t{ratio:.2f}\t{(1 - moved / sent) if sent else 0:.3f}\t{r["requests"]["total"]}\t{r["requests"]["errors"]}')
EOF
  tail -1 "$SKEWRUNS"
done

echo
echo "| fleet | balance | p50 ms | p99 ms | errors / requests |"
echo "|---|---|---:|---:|---:|"
awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s | %s / %s |\n", $1, $2, $3, $4, $5, $6 }' "$RUNS"
echo
echo "| hash | busiest instance's in-flight / mean | requests on their key's home | errors / requests |"
echo "|---|---:|---:|---:|"
awk -F'\t' 'NR > 1 { printf "| load_bound %s | %s | %s | %s / %s |\n", $1, $2, $3, $5, $4 }' "$SKEWRUNS"
