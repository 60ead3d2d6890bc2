#!/usr/bin/env bash
# bench/conns.sh: memory per connection of mcp-edge, beside nginx's, on loopback.
#
# Two cases, each against freshly started proxies:
#   idle  N client keep-alive connections, each having sent one tools/call and read its answer,
#         then silent. mcp-edge and nginx (1 worker, routing on Mcp-Name as in compare.sh) both
#         proxy to one static nginx upstream.
#   sse   N open subscriptions/listen SSE streams through the proxy to the reference backend
#         (`mcp-edge backend`); each stream also holds one upstream connection, which is the
#         proxy's too (the backend's memory is not counted).
#   legacy (mcp-edge only) N 2025-era clients' sessions through the protocol bridge, each with
#         its standalone GET stream open (the bridge holds it as a subscriptions/listen into its
#         own pipeline: the client's connection, the hop's two ends and the upstream's), to the
#         reference backend. Capped at (ulimit -n - 1000) / 4 sessions.
# The client is bench/conns_client.py (python asyncio, bounded: at most 200 connection setups
# at a time, a hold of at most --hold seconds, loopback only). Measured per proxy process:
# VmRSS from /proc/PID/status (nginx: master + worker) after one warm-up request, after the N
# connections are set up (and 2 s of settling), and after the client closed them all.
# KiB per connection = (RSS with N open - RSS before) / N established.
#
# A stream costs the proxy two descriptors (client + upstream); the SSE case is capped at
# (hard `ulimit -n` - 1000) / 2 streams (nginx needs the slack) when the hard limit is lower than that (the table says so).
#
# Usage: bench/conns.sh [--n N] [--sse-n N] [--only "idle sse legacy"] [--edge-bin PATH]
#                       [--edge-yaml 'extra top-level yaml'] [--no-nginx] [--hold SECS]
#   --edge-yaml  extra lines appended to mcp-edge's gateway.yaml (e.g. a buffer setting)
#   Environment variables (e.g. MIMALLOC_*) reach mcp-edge unchanged.
# Raw outputs go to target/bench/conns-<date>/. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

N=10000
SSE_N=""
ONLY="idle sse"
EDGE_BIN=""
EDGE_YAML=""
NGINX_ON=1
HOLD=300
while [ $# -gt 0 ]; do
  case "$1" in
    --n) N=$2; shift ;;
    --sse-n) SSE_N=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --edge-bin) EDGE_BIN=$2; shift ;;
    --edge-yaml) EDGE_YAML=$2; shift ;;
    --no-nginx) NGINX_ON=0 ;;
    --hold) HOLD=$2; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

export PATH=$PATH:/usr/sbin
NGINX=$(command -v nginx) || { echo "nginx is needed (apt-get install nginx-light)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 1; }
if [ -z "$EDGE_BIN" ]; then
  if [ -x target/release/mcp-edge ]; then EDGE_BIN=target/release/mcp-edge
  else echo "no target/release/mcp-edge: build it or pass --edge-bin" >&2; exit 1; fi
fi
EDGE_BIN=$(realpath "$EDGE_BIN")

ulimit -n "$(ulimit -Hn)"
FDS=$(ulimit -n)
MAX_SSE=$(((FDS - 1000) / 2))
[ -z "$SSE_N" ] && SSE_N=$N
SSE_CAPPED=""
if [ "$SSE_N" -gt "$MAX_SSE" ]; then
  SSE_CAPPED=" (capped from $SSE_N by ulimit -n $FDS)"
  SSE_N=$MAX_SSE
fi
MAX_LEGACY=$(((FDS - 1000) / 4))
LEGACY_N=$SSE_N
LEGACY_CAPPED=""
if [ "$LEGACY_N" -gt "$MAX_LEGACY" ]; then
  LEGACY_CAPPED=" (capped from $LEGACY_N by ulimit -n $FDS)"
  LEGACY_N=$MAX_LEGACY
fi
[ "$N" -le $((FDS - 200)) ] || { echo "--n $N needs ulimit -n above $((N + 200)) (have $FDS)" >&2; exit 1; }

STAMP=$(date -u +%Y%m%d-%H%M%S)
OUT=$ROOT/target/bench/conns-$STAMP
mkdir -p "$OUT/up" "$OUT/ngx"
echo "== raw outputs in $OUT (ulimit -n $FDS)"

. bench/lib.sh
start_cleanup

BASE=19300
while ! { port_free $BASE && port_free $((BASE + 1)) && port_free $((BASE + 2)) && port_free $((BASE + 3)) && port_free $((BASE + 4)); }; do
  BASE=$((BASE + 20))
done
UP=$BASE; NGX=$((BASE + 1)); EDGE=$((BASE + 2)); BACKEND=$((BASE + 3)); NGX_SSE=$((BASE + 4))

start() { # name command...  (sets LAST_PID)
  local name=$1; shift
  "$@" >"$OUT/$name.stdout" 2>"$OUT/$name.stderr" &
  LAST_PID=$!
  PIDS+=("$LAST_PID")
}
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# RSS in KiB of a process and its direct children (nginx's worker).
rss_kib() {
  local p total=0 v
  for p in "$1" $(pgrep -P "$1" 2>/dev/null || true); do
    v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null) || continue
    total=$((total + ${v:-0}))
  done
  echo $total
}

RESULT='{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"resultType":"complete"}}'
cat >"$OUT/up/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $FDS;
pid $OUT/up/nginx.pid;
error_log $OUT/up/error.log warn;
events { worker_connections $((FDS - 100)); }
http {
  access_log off;
  client_body_temp_path $OUT/up;
  keepalive_requests 10000000;
  keepalive_timeout 600s;
  server {
    listen 127.0.0.1:$UP backlog=4096;
    location / { default_type application/json; return 200 '$RESULT'; }
  }
}
EOF
cat >"$OUT/ngx/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $FDS;
pid $OUT/ngx/nginx.pid;
error_log $OUT/ngx/error.log warn;
events { worker_connections $((FDS - 100)); }
http {
  access_log off;
  client_body_temp_path $OUT/ngx;
  proxy_temp_path $OUT/ngx;
  keepalive_requests 10000000;
  keepalive_timeout 600s;
  map \$http_mcp_name \$mcp_pool { default pool_default; echo pool_echo; }
  upstream pool_echo    { server 127.0.0.1:$UP; keepalive 512; }
  upstream pool_default { server 127.0.0.1:$UP; keepalive 512; }
  upstream backend      { server 127.0.0.1:$BACKEND; }
  server {
    listen 127.0.0.1:$NGX backlog=4096;
    location /mcp { proxy_pass http://\$mcp_pool; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:$NGX_SSE backlog=4096;
    location /mcp {
      proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host \$host;
      proxy_buffering off; proxy_read_timeout 600s;
    }
  }
}
EOF
edge_conf() { # upstream-port
  cat <<EOF
listen: { mcp: 127.0.0.1:$EDGE, admin: null }
endpoint: /mcp
threads: 1
pools:
  echo: { instances: [127.0.0.1:$1], health: { check: off } }
  default: { instances: [127.0.0.1:$1], health: { check: off } }
routes:
  - name: echo
    match: { method: tools/call, name: echo }
    pool: echo
default_route: { pool: default }
validation: { sample: 1.0 }
timeouts: { client_idle: 600s, upstream_read: 600s, downstream_write: 600s }
$EDGE_YAML
EOF
}

start upstream "$NGINX" -p "$OUT/up" -e "$OUT/up/error.log" -c "$OUT/up/nginx.conf" -g 'daemon off;'
wait_port $UP
# The SSE case gets a fresh backend per proxy: streams the last proxy held may not be closed on
# the backend's side yet, and would count against its descriptors.
BPID=""
backend_up() {
  [ -n "$BPID" ] && stop "$BPID"
  start backend "$EDGE_BIN" backend --listen 127.0.0.1:$BACKEND
  BPID=$LAST_PID
  wait_port $BACKEND
}

TSV=$OUT/results.tsv
printf 'case\ttarget\tn\tok\tbefore_kib\topen_kib\tclosed_kib\tkib_per_conn\n' >"$TSV"

measure() { # case target pid port
  local c=$1 t=$2 pid=$3 port=$4 n before open closed ok cpid
  n=$N; [ "$c" = sse ] && n=$SSE_N; [ "$c" = legacy ] && n=$LEGACY_N
  # One warm-up connection, so that "before" includes what the first request allocates.
  python3 bench/conns_client.py --port "$port" --n 1 --mode "$c" --ready "$OUT/warm" --hold 0.2 \
    2>>"$OUT/client-$c-$t.stderr"
  sleep 1
  before=$(rss_kib "$pid")
  rm -f "$OUT/ready-$c-$t"
  python3 bench/conns_client.py --port "$port" --n "$n" --mode "$c" --ready "$OUT/ready-$c-$t" \
    --hold "$HOLD" 2>>"$OUT/client-$c-$t.stderr" &
  cpid=$!
  PIDS+=("$cpid")
  local i
  for i in $(seq 1 $((HOLD * 10))); do
    [ -s "$OUT/ready-$c-$t" ] && break
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.1
  done
  ok=$(sed -n 's/.*ok=\([0-9]*\).*/\1/p' "$OUT/ready-$c-$t" 2>/dev/null || true)
  ok=${ok:-0}
  sleep 2
  open=$(rss_kib "$pid")
  stop "$cpid"
  sleep 2
  closed=$(rss_kib "$pid")
  local per="-"
  [ "$ok" -gt 0 ] && per=$(awk -v a="$open" -v b="$before" -v n="$ok" 'BEGIN {printf "%.1f", (a - b) / n}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$t" "$n" "$ok" "$before" "$open" "$closed" "$per" >>"$TSV"
  printf '  %-4s %-8s %6s/%-6s open: RSS %7.1f -> %7.1f MiB (%s KiB/conn), after close %7.1f MiB\n' \
    "$c" "$t" "$ok" "$n" "$(echo "$before / 1024" | bc -l)" "$(echo "$open / 1024" | bc -l)" "$per" \
    "$(echo "$closed / 1024" | bc -l)"
  if [ "$ok" -lt "$n" ]; then sed 's/^/    /' "$OUT/client-$c-$t.stderr" | tail -5; fi
}

for c in $ONLY; do
  case $c in
    idle) up=$UP; nport=$NGX ;;
    sse) up=$BACKEND; nport=$NGX_SSE ;;
    legacy) up=$BACKEND; nport="" ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
  edge_conf $up >"$OUT/edge-$c.yaml"
  [ "$c" != idle ] && backend_up
  start "edge-$c" "$EDGE_BIN" serve --config "$OUT/edge-$c.yaml"
  epid=$LAST_PID
  wait_port $EDGE
  measure "$c" mcp-edge "$epid" $EDGE
  stop "$epid"
  if [ "$NGINX_ON" = 1 ] && [ -n "$nport" ]; then
    [ "$c" = sse ] && backend_up
    start "nginx-$c" "$NGINX" -p "$OUT/ngx" -e "$OUT/ngx/error.log" -c "$OUT/ngx/nginx.conf" -g 'daemon off;'
    npid=$LAST_PID
    wait_port $nport
    measure "$c" nginx "$npid" $nport
    stop "$npid"
  fi
done

TABLE=$OUT/table.md
{
  echo "| case | proxy | connections | RSS before | RSS with all open | after close | KiB per connection |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  awk -F'\t' -v capped="$SSE_CAPPED" -v lcapped="$LEGACY_CAPPED" 'NR > 1 {
    label = ($1 == "idle") ? "idle keep-alive" : ($1 == "sse") ? "open SSE streams" capped : "2025-era sessions, GET stream open (bridge)" lcapped
    printf "| %s | %s | %s of %s | %.1f MiB | %.1f MiB | %.1f MiB | %s |\n",
      label, $2, $4, $3, $5 / 1024, $6 / 1024, $7 / 1024, $8 }' "$TSV"
} >"$TABLE"
echo
cat "$TABLE"
