#!/usr/bin/env bash
# bench/limits.sh: what a `scope: global` rate limit (Redis on loopback) costs per request
# against a `scope: replica` one and no limit at all.
#
# One reference backend instance (`mcp-edge backend`, the echo tool), one redis-server
# (loopback, no persistence), and three gateways from the same binary, threads: 1, full check:
#   none      no rate limit
#   replica   one limit keyed on the tool name, scope: replica, never refusing (1000000/s)
#   global    the same limit with scope: global (one EVALSHA per request; timeout 5ms)
# Driver: wrk -t1, closed loop, with tests/bench/echo.lua, at 1 connection (the latency a
# request pays) and 32 connections (throughput and CPU per request), targets alternated each
# round. CPU per request: utime+stime from /proc/PID/stat over the requests wrk completed, for
# the gateway and for redis-server. Every process started here is stopped on exit.
#
# Usage: bench/limits.sh [--edge-bin PATH] [--rounds N] [--duration SECS] [--timeout 5ms] [--smoke]
#   --timeout   redis.timeout of the global gateway (raise it on a loaded machine, or decisions
#               time out, the circuit opens and the figures measure the local fallback)
#   (default binary target/release/mcp-edge; a debug binary gives figures that mean nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
EDGE_BIN=target/release/mcp-edge
ROUNDS=2
DURATION=5
WARMUP=1
TIMEOUT=5ms
while [ $# -gt 0 ]; do
  case "$1" in
    --edge-bin) EDGE_BIN=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --duration) DURATION=$2; shift ;;
    --timeout) TIMEOUT=$2; shift ;;
    --smoke) ROUNDS=1; DURATION=1; WARMUP=0 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
need=()
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
[ -x "$EDGE_BIN" ] || { echo "no binary at $EDGE_BIN (cargo build --release)" >&2; exit 1; }
EDGE_BIN=$(realpath "$EDGE_BIN")

OUT=target/bench/limits-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

free_ports() { python3 -c 'import socket
s=[socket.socket() for _ in range('"$1"')]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])'; }
read -r BACKEND REDIS P_NONE P_REPLICA P_GLOBAL A1 A2 A3 < <(free_ports 8)

start() { local name=$1; shift; "$@" >"$OUT/$name.log" 2>&1 & PIDS+=($!); eval "PID_$name=$!"; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 did not open" >&2; exit 1; }

start redis redis-server --port "$REDIS" --bind 127.0.0.1 --save '' --appendonly no
export MCP_EDGE_STATE_KEY=$(printf '7f%.0s' $(seq 32))
start backend "$EDGE_BIN" backend --listen "127.0.0.1:$BACKEND"
conf() { # port admin-port limit-yaml
  cat <<YAML
listen: { mcp: 127.0.0.1:$1, admin: 127.0.0.1:$2 }
threads: 1
pools:
  default: { instances: [127.0.0.1:$BACKEND] }
default_route: { pool: default }
redis: { url: "redis://127.0.0.1:$REDIS", timeout: $TIMEOUT, replicas: 1 }
$3
YAML
}
conf "$P_NONE" "$A1" "" >"$OUT/none.yaml"
conf "$P_REPLICA" "$A2" "rate_limits: [{name: l, key: [name], rate: 1000000/s}]" >"$OUT/replica.yaml"
conf "$P_GLOBAL" "$A3" "rate_limits: [{name: l, key: [name], rate: 1000000/s, scope: global}]" >"$OUT/global.yaml"
for t in none replica global; do start "$t" "$EDGE_BIN" serve --config "$OUT/$t.yaml"; done
declare -A PORT=([none]=$P_NONE [replica]=$P_REPLICA [global]=$P_GLOBAL)
for p in "$REDIS" "$BACKEND" "$P_NONE" "$P_REPLICA" "$P_GLOBAL"; do wait_port "$p"; done

body=$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p" tests/bench/echo.lua)
for t in none replica global; do
  r=$(curl -s -w ' HTTP%{http_code}' -X POST "http://127.0.0.1:${PORT[$t]}/mcp" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' --data-binary "$body")
  case "$r" in *'"resultType":"complete"'*HTTP200) ;; *) echo "$t answered wrongly: $r" >&2; exit 1 ;; esac
done

cpu_ticks() { local f; f=$(sed 's/^.*) //' "/proc/$1/stat"); set -- $f; echo $((${12} + ${13})); }
to_us() { awk -v v="$1" 'BEGIN { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
  if (u == "us") print n; else if (u == "ms") print n * 1000; else if (u == "s") print n * 1000000; else print n }'; }
CLK=$(getconf CLK_TCK)
RUNS=$OUT/runs.tsv
printf 'round\tconns\ttarget\trps\tp50_us\tp99_us\trequests\tedge_ticks\tredis_ticks\terrors\n' >"$RUNS"
TARGETS=(none replica global)
for r in $(seq "$ROUNDS"); do
  for c in 1 32; do
    for k in 0 1 2; do
      t=${TARGETS[$(((k + r - 1) % 3))]}
      url="http://127.0.0.1:${PORT[$t]}/mcp"
      pid_var="PID_$t"; epid=${!pid_var}
      [ "$WARMUP" -gt 0 ] && wrk -t1 -c"$c" -d"${WARMUP}s" -s tests/bench/echo.lua "$url" >/dev/null
      e0=$(cpu_ticks "$epid"); r0=$(cpu_ticks "$PID_redis")
      f="$OUT/wrk-r$r-c$c-$t.txt"
      wrk -t1 -c"$c" -d"${DURATION}s" --latency -s tests/bench/echo.lua "$url" >"$f"
      e1=$(cpu_ticks "$epid"); r1=$(cpu_ticks "$PID_redis")
      rps=$(awk '/^Requests\/sec:/ {print $2}' "$f")
      reqs=$(awk '/requests in/ {print $1}' "$f")
      p50=$(to_us "$(awk '$1 == "50%" {print $2}' "$f")")
      p99=$(to_us "$(awk '$1 == "99%" {print $2}' "$f")")
      errs=$(awk '/non-200 or incomplete/ {print $NF}' "$f")
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$t" "$rps" "$p50" "$p99" "$reqs" \
        "$((e1 - e0))" "$((r1 - r0))" "${errs:-?}" >>"$RUNS"
      printf '  round %s c=%-2s %-8s %9s req/s  p50 %7s us  p99 %7s us  errors %s\n' "$r" "$c" "$t" "$rps" "$p50" "$p99" "${errs:-?}"
    done
  done
done

echo
echo "| conns | limit | req/s | p50 | p99 | gateway CPU us/req | redis CPU us/req | errors |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for c in 1 32; do
  for t in none replica global; do
    awk -F'\t' -v c="$c" -v t="$t" -v clk="$CLK" '$2 == c && $3 == t {
        n++; rps += $4; p50 += $5; p99 += $6; req += $7; et += $8; rt += $9; err += $10 }
      END { printf "| %s | %s | %.0f | %.0f us | %.0f us | %.1f | %.1f | %d |\n",
        c, t, rps / n, p50 / n, p99 / n, et / clk * 1e6 / req, rt / clk * 1e6 / req, err }' "$RUNS"
  done
done
echo
echo "global gateway's store metrics (errors or fallbacks mean some decisions were not Redis's):"
curl -s "http://127.0.0.1:$A3/metrics" | grep '^mcp_edge_limit_store' | grep -v _bucket | tee "$OUT/global-store-metrics.txt"
awk '/^mcp_edge_limit_store_seconds_sum/ {s = $2} /^mcp_edge_limit_store_seconds_count/ {n = $2}
  END { if (n) printf "mean Redis decision time seen by the gateway: %.0f us over %d decisions\n", s / n * 1e6, n }' "$OUT/global-store-metrics.txt"
echo "redis-server command stats:"
redis-cli -p "$REDIS" info commandstats 2>/dev/null | grep -E 'evalsha|script' || echo "  (redis-cli not installed)"
echo
echo "raw: $OUT"
