#!/usr/bin/env bash
# bench/bridge-callgrind.sh: what a bridged 2025-era call costs the gateway against a native 2026
# call, counted in user-space instructions per request (callgrind), not in wall-clock time: on a
# shared VM the wall clock cannot tell 20% from 25% (docs/benchmarks.md), an instruction count
# repeats within a few tenths of a percent.
#
# One reference backend instance and one gateway (pool `modern`, the default route) on loopback;
# the gateway runs under callgrind with instrumentation off. After WARM unmeasured requests of
# each kind, it counts N sequential requests on one kept connection (bench/bridge_drive.py), in
# the order native, legacy, native, legacy (each kind twice: the runs of one build differ by a
# few hundred instructions), and prints instructions per request and the ratio. `native` sends
# the same `_meta` as the bridged leg carries (with `clientInfo`); PLAIN=1 adds rows for a
# native request without it.
#
# Usage: bench/bridge-callgrind.sh [--edge-bin PATH]   (env: N=2000 WARM=300 PLAIN=0)
# Needs valgrind (installed with apt-get when missing) and python3. A release build with line
# tables (CARGO_PROFILE_RELEASE_DEBUG=line-tables-only) lets callgrind_annotate name the
# functions of each dump (kept in target/bench/bridge-callgrind-*/). Every process it starts is
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${N:-2000}
WARM=${WARM:-300}
PLAIN=${PLAIN:-0}
EDGE_BIN=${EDGE_BIN:-}
[ "${1:-}" = "--edge-bin" ] && EDGE_BIN=$2
bench_tools valgrind:valgrind python3:python3 curl:curl
bench_edge_bin
start_cleanup
OUT=$PWD/target/bench/bridge-callgrind-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
BACKEND=17311 MCP=17385 ADMIN=17395
for p in $BACKEND $MCP $ADMIN; do port_free $p || { echo "port $p is in use" >&2; exit 1; }; done
cat >"$OUT/gateway.yaml" <<YAML
listen: { mcp: 127.0.0.1:$MCP, admin: 127.0.0.1:$ADMIN }
pools:
  modern: { instances: [127.0.0.1:$BACKEND] }
default_route: { pool: modern }
YAML
"$EDGE_BIN" backend --instances 1 --base-port $BACKEND >"$OUT/backend.log" 2>&1 &
PIDS+=($!)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/cg.out.%p" \
  "$EDGE_BIN" serve --config "$OUT/gateway.yaml" >"$OUT/gateway.log" 2>&1 &
G=$!
PIDS+=($G)
wait_port $BACKEND 10
wait_port $MCP 120
kinds=(native legacy native legacy)
[ "$PLAIN" = 1 ] && kinds+=(plain plain)
for k in native legacy plain; do python3 bench/bridge_drive.py $MCP $k "$WARM"; done
declare -A sum
for k in "${kinds[@]}"; do
  callgrind_control -z $G >/dev/null 2>&1
  callgrind_control -i on $G >/dev/null 2>&1
  python3 bench/bridge_drive.py $MCP $k "$N"
  callgrind_control -i off $G >/dev/null 2>&1
  callgrind_control -d "$k" $G >/dev/null 2>&1
  sleep 1
  f=$(ls -t "$OUT"/cg.out.$G.* | head -1)
  per=$(( $(grep -m1 '^totals:' "$f" | awk '{print $2}') / N ))
  printf '%-7s %8d instructions/request  (%s)\n' "$k" "$per" "$(basename "$f")"
  sum[$k]=$(( ${sum[$k]:-0} + per ))
done
awk -v n="${sum[native]}" -v l="${sum[legacy]}" \
  'BEGIN { printf "bridged/native: %.3fx (means of two runs: %d against %d)\n", l / n, l / 2, n / 2 }'
[ "$PLAIN" = 1 ] && awk -v n="${sum[plain]}" -v l="${sum[legacy]}" \
  'BEGIN { printf "bridged/plain:  %.3fx (plain: a native request without clientInfo, %d)\n", l / n, n / 2 }'
echo "dumps: $OUT"
