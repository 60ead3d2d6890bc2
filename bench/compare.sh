#!/usr/bin/env bash
# bench/compare.sh: mcp-edge side by side with nginx, haproxy and direct, on loopback.
#
# One fast upstream (nginx, 1 worker, answering a static JSON-RPC result, keep-alive), one ~480 B
# tools/call POST with the Mcp-* headers (bench/mcp-call.lua), wrk closed loop (1 thread) at 32
# and 256 connections. Targets alternate within each round:
#   direct     wrk -> upstream
#   nginx      nginx 1 worker routing on Mcp-Name (map $http_mcp_name, upstream keepalive)
#   haproxy    haproxy nbthread 1 (use_backend on req.hdr(mcp-name), http-reuse always)
#   edge-1.0   mcp-edge release build, threads 1, validation.sample 1.0 (full body check)
#   edge-0.0   the same with validation.sample 0.0 (header-only, body streamed)
#   edge-audit (with --audit) edge-1.0 with the audit trail on: file sink under the run's
#              directory, arguments: full with a redacted key (plus --audit-yaml's YAML, e.g.
#              argument_policy rules on echo), to compare with edge-1.0 in the same rounds
#   edge-seal  (with --seal) edge-1.0 with `mrtr.seal` on the echo pool (one key, one_time:
#              local): every call on a sealing pool pays the caller's and the arguments' digests
#              and the response's inspection; a retry leg's opening is `cargo bench --bench seal`
# Each proxy gets one worker. Measured: requests/s, p50 and p99 (wrk --latency), ratio to
# nginx, and the proxy's CPU time per request (utime+stime of the process and its children from
# /proc/PID/stat, before/after each run, divided by the requests wrk completed).
# Then the MRTR load tester (`mcp-edge loadtest --scenario echo`) and wrk both drive mcp-edge
# (sample 1.0) in front of the reference backend, to put the two drivers' figures side by side.
#
# TLS 1.3 and HTTP/2 (h2 by ALPN, h2c) rows against nginx: bench/compare-tls.sh.
#
# Usage: bench/compare.sh [--smoke] [--rounds N] [--duration SECS] [--no-docs]
#                         [--edge-bin PATH] [--extra NAME=PATH]... [--audit [--audit-yaml FILE]]
#                         [--seal]
#   --smoke     1 s runs, one round, no warm-up, no docs: checks that everything starts and answers
#   --extra     another mcp-edge binary measured with sample 1.0 in the same run (before/after)
#   --only "T1 T2"  measure only these targets (e.g. "nginx edge-1.0"; extras are always measured)
#   --no-docs   print the table only (default: also write the generated part of docs/benchmarks.md)
#   --audit     also measure edge-audit (see above); implies --no-docs
#   --seal      also measure edge-seal (see above); implies --no-docs
# Raw outputs go to target/bench/compare-<date>/. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SMOKE=0
ROUNDS=2
DURATION=5
WARMUP=1
WRITE_DOCS=1
EDGE_BIN=""
EXTRA=()
ONLY=""
AUDIT=0
AUDIT_YAML=""
SEAL=0
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1; ROUNDS=1; DURATION=1; WARMUP=0; WRITE_DOCS=0 ;;
    --rounds) ROUNDS=$2; shift ;;
    --duration) DURATION=$2; shift ;;
    --no-docs) WRITE_DOCS=0 ;;
    --edge-bin) EDGE_BIN=$2; shift ;;
    --extra) EXTRA+=("$2"); shift ;;
    --only) ONLY=$2; shift ;;
    --audit) AUDIT=1; WRITE_DOCS=0 ;;
    --audit-yaml) AUDIT=1; WRITE_DOCS=0; AUDIT_YAML=$2; shift ;;
    --seal) SEAL=1; WRITE_DOCS=0 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

# --- tools -------------------------------------------------------------------------------------
. bench/lib.sh
bench_tools nginx:nginx-light haproxy:haproxy wrk:wrk jq:jq curl:curl
NGINX=$(command -v nginx)
HAPROXY=$(command -v haproxy)

bench_edge_bin

STAMP=$(date -u +%Y%m%d-%H%M%S)
OUT=$ROOT/target/bench/compare-$STAMP
mkdir -p "$OUT"
echo "== raw outputs in $OUT"

# --- processes ---------------------------------------------------------------------------------
start_cleanup

BASE=18800
while ! { port_free $BASE && port_free $((BASE + 1)) && port_free $((BASE + 9)); }; do
  BASE=$((BASE + 20))
done
UP=$BASE
NGX=$((BASE + 1))
HAP=$((BASE + 2))
EDGE1=$((BASE + 3))
EDGE0=$((BASE + 4))
BACKEND=$((BASE + 5))
EDGEB=$((BASE + 6))
EDGEA=$((BASE + 7))
EDGES=$((BASE + 8))
EXTRA_PORT0=$((BASE + 10))


RESULT='{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello from the mcp-edge peer benchmark, 480 B"}],"resultType":"complete"}}'

mkdir -p "$OUT/up" "$OUT/ngx" "$OUT/hap"
cat >"$OUT/up/nginx.conf" <<EOF
worker_processes 1;
pid $OUT/up/nginx.pid;
error_log $OUT/up/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $OUT/up;
  keepalive_requests 10000000;
  keepalive_timeout 60s;
  server {
    listen 127.0.0.1:$UP backlog=4096;
    location / {
      default_type application/json;
      return 200 '$RESULT';
    }
  }
}
EOF
cat >"$OUT/ngx/nginx.conf" <<EOF
worker_processes 1;
pid $OUT/ngx/nginx.pid;
error_log $OUT/ngx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $OUT/ngx;
  proxy_temp_path $OUT/ngx;
  keepalive_requests 10000000;
  keepalive_timeout 60s;
  map \$http_mcp_name \$mcp_pool {
    default pool_default;
    echo    pool_echo;
  }
  upstream pool_echo    { server 127.0.0.1:$UP; keepalive 512; keepalive_requests 10000000; }
  upstream pool_default { server 127.0.0.1:$UP; keepalive 512; keepalive_requests 10000000; }
  server {
    listen 127.0.0.1:$NGX backlog=4096;
    location /mcp {
      proxy_pass http://\$mcp_pool;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
cat >"$OUT/hap/haproxy.cfg" <<EOF
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  option http-keep-alive
  http-reuse always
frontend mcp
  bind 127.0.0.1:$HAP
  use_backend pool_echo if { req.hdr(mcp-name) -m str echo }
  default_backend pool_default
backend pool_echo
  server up 127.0.0.1:$UP
backend pool_default
  server up 127.0.0.1:$UP
EOF

edge_conf() { # port upstream-port sample [more settings of the echo pool]
  cat <<EOF
listen:
  mcp: 127.0.0.1:$1
  admin: null
endpoint: /mcp
threads: 1
pools:
  echo: { instances: [127.0.0.1:$2]${4:-} }
  default: { instances: [127.0.0.1:$2] }
routes:
  - name: echo
    match: { method: tools/call, name: echo }
    pool: echo
default_route: { pool: default }
validation: { sample: $3 }
EOF
}

start() { # name command...
  local name=$1; shift
  "$@" >"$OUT/$name.stdout" 2>"$OUT/$name.stderr" &
  PIDS+=($!)
  eval "PID_${name//[-.]/_}=$!"
}

start upstream "$NGINX" -p "$OUT/up" -e "$OUT/up/error.log" -c "$OUT/up/nginx.conf" -g 'daemon off;'
start nginx "$NGINX" -p "$OUT/ngx" -e "$OUT/ngx/error.log" -c "$OUT/ngx/nginx.conf" -g 'daemon off;'
start haproxy "$HAPROXY" -db -f "$OUT/hap/haproxy.cfg"
edge_conf $EDGE1 $UP 1.0 >"$OUT/edge-1.0.yaml"
edge_conf $EDGE0 $UP 0.0 >"$OUT/edge-0.0.yaml"
start edge-1.0 "$EDGE_BIN" serve --config "$OUT/edge-1.0.yaml"
start edge-0.0 "$EDGE_BIN" serve --config "$OUT/edge-0.0.yaml"

TARGETS=(direct nginx haproxy edge-1.0 edge-0.0)
if [ -n "$ONLY" ]; then read -r -a TARGETS <<<"$ONLY"; fi
declare -A PORT=([direct]=$UP [nginx]=$NGX [haproxy]=$HAP [edge-1.0]=$EDGE1 [edge-0.0]=$EDGE0)
declare -A PROC=([direct]=upstream [nginx]=nginx [haproxy]=haproxy [edge-1.0]=edge-1.0 [edge-0.0]=edge-0.0)
i=0
if [ "$AUDIT" = 1 ]; then
  {
    edge_conf $EDGEA $UP 1.0
    printf 'audit:\n  sink: file\n  file: {path: %s, max_bytes: 104857600, keep: 1}\n  arguments: full\n  redact: {keys: [password]}\n' "$OUT/audit.jsonl"
    if [ -n "$AUDIT_YAML" ]; then cat "$AUDIT_YAML"; fi
  } >"$OUT/edge-audit.yaml"
  start edge-audit "$EDGE_BIN" serve --config "$OUT/edge-audit.yaml"
  TARGETS+=(edge-audit)
  PORT[edge-audit]=$EDGEA
  PROC[edge-audit]=edge-audit
fi
if [ "$SEAL" = 1 ]; then
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$OUT/state.keys"
  edge_conf $EDGES $UP 1.0 ", mrtr: {seal: {key_file: $OUT/state.keys, one_time: local}}" >"$OUT/edge-seal.yaml"
  start edge-seal "$EDGE_BIN" serve --config "$OUT/edge-seal.yaml"
  TARGETS+=(edge-seal)
  PORT[edge-seal]=$EDGES
  PROC[edge-seal]=edge-seal
fi
for e in "${EXTRA[@]}"; do
  name=${e%%=*}
  bin=$(realpath "${e#*=}")
  port=$((EXTRA_PORT0 + i))
  edge_conf $port $UP 1.0 >"$OUT/$name.yaml"
  start "$name" "$bin" serve --config "$OUT/$name.yaml"
  TARGETS+=("$name")
  PORT[$name]=$port
  PROC[$name]=$name
  i=$((i + 1))
done
for t in "${TARGETS[@]}"; do wait_port "${PORT[$t]}"; done

pid_of() { local v="PID_${1//[-.]/_}"; echo "${!v}"; }


# Check every target answers the call correctly before measuring.
for t in "${TARGETS[@]}"; do
  body=$(curl -s -o - -w ' HTTP%{http_code}' -X POST "http://127.0.0.1:${PORT[$t]}/mcp" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' \
    --data-binary "$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p" bench/mcp-call.lua)")
  case "$body" in
    *'"resultType":"complete"'*HTTP200) ;;
    *) echo "target $t answered wrongly: $body" >&2; exit 1 ;;
  esac
done

to_us() { # wrk latency such as 512.00us, 1.23ms, 2.00s
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") print n; else if (u == "ms") print n * 1000; else if (u == "s") print n * 1000000; else print n }'
}

RUNS=$OUT/runs.tsv
printf 'round\tconns\ttarget\trps\tp50_us\tp99_us\trequests\tproxy_ticks\tupstream_ticks\tnon2xx\tsockerr\n' >"$RUNS"
CONNS=(32 256)
CLK=$(getconf CLK_TCK)

run_wrk() { # round conns target
  local r=$1 c=$2 t=$3 url="http://127.0.0.1:${PORT[$3]}/mcp" f="$OUT/wrk-r$1-c$2-$3.txt"
  local ppid upid a0 u0 a1 u1
  ppid=$(pid_of "${PROC[$t]}")
  upid=$(pid_of upstream)
  if [ "$WARMUP" -gt 0 ]; then
    wrk -t1 -c"$c" -d"${WARMUP}s" -s bench/mcp-call.lua "$url" >/dev/null
  fi
  a0=$(cpu_ticks "$ppid"); u0=$(cpu_ticks "$upid")
  wrk -t1 -c"$c" -d"${DURATION}s" --latency -s bench/mcp-call.lua "$url" >"$f"
  a1=$(cpu_ticks "$ppid"); u1=$(cpu_ticks "$upid")
  local rps reqs p50 p99 non2xx sockerr
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$f")
  reqs=$(awk '/requests in/ {print $1}' "$f")
  p50=$(to_us "$(awk '$1 == "50%" {print $2}' "$f")")
  p99=$(to_us "$(awk '$1 == "99%" {print $2}' "$f")")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$f"); non2xx=${non2xx:-0}
  sockerr=$(awk '/Socket errors/ {s = 0; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) s += $i; print s}' "$f"); sockerr=${sockerr:-0}
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$t" "$rps" "$p50" "$p99" "$reqs" \
    "$((a1 - a0))" "$((u1 - u0))" "$non2xx" "$sockerr" >>"$RUNS"
  printf '  round %s  c=%-3s %-12s %9s req/s  p50 %7s us  p99 %7s us  non-2xx %s\n' \
    "$r" "$c" "$t" "$rps" "$p50" "$p99" "$non2xx"
}

n=${#TARGETS[@]}
for r in $(seq 1 "$ROUNDS"); do
  for c in "${CONNS[@]}"; do
    # Rotate the order each round so no target always runs first or last.
    for k in $(seq 0 $((n - 1))); do
      run_wrk "$r" "$c" "${TARGETS[$(((k + r - 1) % n))]}"
    done
  done
done

# --- the MRTR load tester as the driver ---------------------------------------------------------
DRIVERS=$OUT/drivers.tsv
if [ -z "$ONLY" ]; then
  start backend "$EDGE_BIN" backend --instances 1 --base-port $BACKEND
  edge_conf $EDGEB $BACKEND 1.0 >"$OUT/edge-backend.yaml"
  start edge-backend "$EDGE_BIN" serve --config "$OUT/edge-backend.yaml"
  wait_port $BACKEND
  wait_port $EDGEB
  printf 'driver\trps\tp50_us\tp99_us\terrors\tproxy_us_per_req\n' >"$DRIVERS"
  bpid=$(pid_of edge-backend)
  url="http://127.0.0.1:$EDGEB/mcp"
  [ "$WARMUP" -gt 0 ] && wrk -t1 -c32 -d"${WARMUP}s" -s tests/bench/echo.lua "$url" >/dev/null
  a0=$(cpu_ticks "$bpid")
  wrk -t1 -c32 -d"${DURATION}s" --latency -s tests/bench/echo.lua "$url" >"$OUT/driver-wrk.txt"
  a1=$(cpu_ticks "$bpid")
  f=$OUT/driver-wrk.txt
  reqs=$(awk '/requests in/ {print $1}' "$f")
  printf 'wrk -t1 -c32 (tests/bench/echo.lua)\t%s\t%s\t%s\t%s\t%s\n' \
    "$(awk '/^Requests\/sec:/ {print $2}' "$f")" \
    "$(to_us "$(awk '$1 == "50%" {print $2}' "$f")")" "$(to_us "$(awk '$1 == "99%" {print $2}' "$f")")" \
    "$(awk '/non-200 or incomplete/ {print $NF}' "$f")" \
    "$(awk -v t=$((a1 - a0)) -v n="$reqs" -v k="$CLK" 'BEGIN {printf "%.1f", t / k * 1e6 / n}')" >>"$DRIVERS"
  a0=$(cpu_ticks "$bpid")
  "$EDGE_BIN" loadtest --target "$url" --scenario echo --concurrency 32 --duration "${DURATION}s" \
    --quiet --json "$OUT/driver-loadtest.json" >"$OUT/driver-loadtest.txt" 2>&1 || true
  a1=$(cpu_ticks "$bpid")
  j=$OUT/driver-loadtest.json
  reqs=$(jq '.requests.total' "$j")
  printf 'mcp-edge loadtest --scenario echo --concurrency 32\t%s\t%s\t%s\t%s\t%s\n' \
    "$(jq '.requests.rate_per_s | floor' "$j")" \
    "$(jq '.latency_ms.first.p50 * 1000 | floor' "$j")" "$(jq '.latency_ms.first.p99 * 1000 | floor' "$j")" \
    "$(jq '.requests.errors' "$j")" \
    "$(awk -v t=$((a1 - a0)) -v n="$reqs" -v k="$CLK" 'BEGIN {printf "%.1f", t / k * 1e6 / n}')" >>"$DRIVERS"
fi

# --- the table ---------------------------------------------------------------------------------
TABLE=$OUT/table.md
{
  echo "| conns | target | req/s | p50 | p99 | x nginx | proxy CPU us/req | upstream CPU us/req | non-2xx |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' -v clk="$CLK" -v order="${TARGETS[*]}" '
    NR == 1 { next }
    { k = $2 SUBSEP $3; n[k]++; rps[k] += $4; p50[k] += $5; p99[k] += $6; req[k] += $7
      pt[k] += $8; ut[k] += $9; bad[k] += $10 + $11; conns[$2] = 1 }
    END {
      nt = split(order, t, " ")
      nc = 0; for (c in conns) cs[++nc] = c + 0
      for (i = 1; i <= nc; i++) for (j = i + 1; j <= nc; j++) if (cs[j] < cs[i]) { x = cs[i]; cs[i] = cs[j]; cs[j] = x }
      for (ci = 1; ci <= nc; ci++) {
        c = cs[ci]; base = rps[c SUBSEP "nginx"] / n[c SUBSEP "nginx"]
        for (ti = 1; ti <= nt; ti++) {
          k = c SUBSEP t[ti]; if (!(k in n)) continue
          r = rps[k] / n[k]
          cpu = (t[ti] == "direct") ? "-" : sprintf("%.1f", pt[k] / clk * 1e6 / req[k])
          printf "| %d | %s | %.0f | %.0f us | %.0f us | %.2f | %s | %.1f | %d |\n",
            c, t[ti], r, p50[k] / n[k], p99[k] / n[k], r / base, cpu, ut[k] / clk * 1e6 / req[k], bad[k]
        }
      }
    }' "$RUNS"
  if [ -f "$DRIVERS" ]; then
    echo
    echo "| driver (mcp-edge sample 1.0 -> reference backend, 1 instance) | req/s | p50 | p99 | errors | mcp-edge CPU us/req |"
    echo "|---|---:|---:|---:|---:|---:|"
    awk -F'\t' 'NR > 1 { printf "| %s | %s | %s us | %s us | %s | %s |\n", $1, $2, $3, $4, $5, $6 }' "$DRIVERS"
  fi
} >"$TABLE"
echo
cat "$TABLE"

# --- docs ----------------------------------------------------------------------------------------
if [ "$WRITE_DOCS" = 1 ]; then
  GEN=$OUT/generated.md
  {
    echo "<!-- generated by bench/compare.sh: everything up to the end marker is replaced on each run -->"
    echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'): $ROUNDS rounds x ${DURATION} s per target and connection"
    echo "count (after a ${WARMUP} s warm-up), targets alternated, figures averaged over rounds; CPU per"
    echo "request is the process's utime+stime over the requests wrk completed."
    echo
    echo "- machine: $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr)"
    echo "- versions: $("$NGINX" -v 2>&1 | sed 's/^nginx version: //'), $("$HAPROXY" -v | head -1 | awk '{print "HAProxy " $3}'), $(wrk -v 2>&1 | head -1 | awk '{print "wrk " $2}'), mcp-edge $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src Cargo.toml || echo '+dirty') ($("$EDGE_BIN" --version)), $(rustc --version | awk '{print "rustc " $2}')"
    echo "- reproduce: \`bench/compare.sh\` (raw wrk outputs: \`target/bench/compare-<date>/\`)"
    echo
    cat "$TABLE"
    echo "<!-- end generated -->"
  } >"$GEN"
  DOC=docs/benchmarks.md
  if [ -f "$DOC" ] && grep -q '<!-- generated by bench/compare.sh' "$DOC"; then
    awk -v gen="$GEN" '
      /<!-- generated by bench\/compare.sh/ { while ((getline l < gen) > 0) print l; skip = 1; next }
      /<!-- end generated -->/ { skip = 0; next }
      !skip { print }' "$DOC" >"$DOC.tmp" && mv "$DOC.tmp" "$DOC"
  else
    { [ -f "$DOC" ] && cat "$DOC"; echo; echo "## Latest run"; echo; cat "$GEN"; } >"$DOC.tmp" && mv "$DOC.tmp" "$DOC"
  fi
  echo "== wrote $DOC"
fi
