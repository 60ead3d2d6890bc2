#!/usr/bin/env bash
# bench/growth.sh: how mcp-edge's cost grows, against nginx, on loopback (speed goal 3 of
# docs/benchmarks.md, "What is left").
#
# The setup of bench/compare.sh (one nginx upstream answering a static JSON-RPC result, wrk with
# 1 thread in a closed loop, one worker per proxy, targets alternated within each round, CPU per
# request = utime+stime from /proc/PID/stat over the requests wrk completed), measured along three
# dimensions, each point for two targets:
#   nginx   1 worker routing on Mcp-Name (map $http_mcp_name, upstream keepalive)
#   edge    mcp-edge (release build), threads 1, validation.sample 1.0 (every body checked)
# Dimensions:
#   size    request bodies of 256 B, 4 KiB, 64 KiB and 1 MiB at 32 connections: a valid tools/call
#           whose arguments.text is a padding string of 'x' sized so the body has exactly that size
#   conns   32, 256 and 1024 connections with the ~480 B request of bench/mcp-call.lua
#   routes  10, 1,000 and 10,000 exact method+name routes (mcp-edge) / map entries (nginx) at 32
#           connections, the request naming the route in the middle of the table
# Size and conns use compare.sh's route table (one route, `echo`, plus the default route).
#
# Usage: bench/growth.sh [--smoke] [--rounds N] [--duration SECS] [--edge-bin PATH] [--no-docs]
#   --smoke     1 s runs, one round, no warm-up, no docs: checks that every point answers 2xx
#   --rounds    rounds of every point and target (default 2)
#   --duration  seconds measured per run (default 5; each run is preceded by a 1 s warm-up)
#   --edge-bin  the mcp-edge binary (default target/release/mcp-edge, built when missing)
#   --no-docs   print the tables only (default: also replace the generated part of the
#               "## Cost growth" section of docs/benchmarks.md)
# Raw outputs go to target/bench/growth-<date>/. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SMOKE=0
ROUNDS=2
DURATION=5
WARMUP=1
WRITE_DOCS=1
EDGE_BIN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1; ROUNDS=1; DURATION=1; WARMUP=0; WRITE_DOCS=0 ;;
    --rounds) ROUNDS=$2; shift ;;
    --duration) DURATION=$2; shift ;;
    --edge-bin) EDGE_BIN=$2; shift ;;
    --no-docs) WRITE_DOCS=0 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
case "$ROUNDS$DURATION" in *[!0-9]*) echo "--rounds and --duration take whole numbers" >&2; exit 2 ;; esac
[ "$ROUNDS" -ge 1 ] && [ "$DURATION" -ge 1 ] || { echo "--rounds and --duration must be at least 1" >&2; exit 2; }

# --- tools -------------------------------------------------------------------------------------
. bench/lib.sh
bench_tools nginx:nginx-light wrk:wrk curl:curl
NGINX=$(command -v nginx)

bench_edge_bin

# 1024 connections: wrk holds 1024 sockets, a proxy 1024 client + up to 1024 upstream sockets.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 4096 ]; then
  echo "open-file limit $(ulimit -n) (hard $(ulimit -Hn)) is below the 4096 the 1024-connection points need; raise it (ulimit -Hn)" >&2
  exit 1
fi

STAMP=$(date -u +%Y%m%d-%H%M%S)
OUT=$ROOT/target/bench/growth-$STAMP
mkdir -p "$OUT"
echo "== raw outputs in $OUT (mcp-edge: $EDGE_BIN)"

# --- processes ---------------------------------------------------------------------------------
start_cleanup

BASE=18900
for _ in $(seq 1 50); do
  ok=1
  for k in $(seq 0 8); do port_free $((BASE + k)) || { ok=0; break; }; done
  [ $ok = 1 ] && break
  BASE=$((BASE + 20))
done
[ $ok = 1 ] || { echo "no 9 free ports found from 18900" >&2; exit 1; }
UP=$BASE


start() { # name command...
  local name=$1; shift
  "$@" >"$OUT/$name.stdout" 2>"$OUT/$name.stderr" &
  PIDS+=($!)
  PID[$name]=$!
}
declare -A PID PORT

RESULT='{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello from the mcp-edge peer benchmark, 480 B"}],"resultType":"complete"}}'

# The upstream reads (and discards) bodies up to 2 MiB and answers the static result.
mkdir -p "$OUT/up"
cat >"$OUT/up/nginx.conf" <<EOF
worker_processes 1;
pid $OUT/up/nginx.pid;
error_log $OUT/up/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $OUT/up;
  client_max_body_size 2m;
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

# Route tables: "base" is compare.sh's (echo + default); rN has N exact names tool-00001.. .
tool() { printf 'tool-%05d' "$1"; }
nginx_conf() { # dir port routes
  local dir=$1 port=$2 n=$3
  cat <<EOF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $dir;
  proxy_temp_path $dir;
  client_max_body_size 2m;
  client_body_buffer_size 2m;
  keepalive_requests 10000000;
  keepalive_timeout 60s;
  map_hash_max_size 65536;
  map_hash_bucket_size 64;
  map \$http_mcp_name \$mcp_pool {
    default pool_default;
EOF
  if [ "$n" = base ]; then
    echo "    echo    pool_echo;"
  else
    seq 1 "$n" | awk '{ printf "    tool-%05d pool_echo;\n", $1 }'
  fi
  cat <<EOF
  }
  upstream pool_echo    { server 127.0.0.1:$UP; keepalive 512; keepalive_requests 10000000; }
  upstream pool_default { server 127.0.0.1:$UP; keepalive 512; keepalive_requests 10000000; }
  server {
    listen 127.0.0.1:$port backlog=4096;
    location /mcp {
      proxy_pass http://\$mcp_pool;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
}
edge_conf() { # port routes
  cat <<EOF
listen:
  mcp: 127.0.0.1:$1
  admin: null
endpoint: /mcp
threads: 1
pools:
  echo: { instances: [127.0.0.1:$UP] }
  default: { instances: [127.0.0.1:$UP] }
routes:
EOF
  if [ "$2" = base ]; then
    printf '  - name: echo\n    match: { method: tools/call, name: echo }\n    pool: echo\n'
  else
    seq 1 "$2" | awk '{ printf "  - match: { method: tools/call, name: tool-%05d }\n    pool: echo\n", $1 }'
  fi
  cat <<EOF
default_route: { pool: default }
validation: { sample: 1.0 }
limits: { max_body_bytes: 2097152 }
EOF
}

start upstream "$NGINX" -p "$OUT/up" -e "$OUT/up/error.log" -c "$OUT/up/nginx.conf" -g 'daemon off;'
TABLES=(base 10 1000 10000)
k=1
for t in "${TABLES[@]}"; do
  PORT[nginx-$t]=$((BASE + k)); PORT[edge-$t]=$((BASE + k + 1)); k=$((k + 2))
  mkdir -p "$OUT/nginx-$t"
  nginx_conf "$OUT/nginx-$t" "${PORT[nginx-$t]}" "$t" >"$OUT/nginx-$t/nginx.conf"
  edge_conf "${PORT[edge-$t]}" "$t" >"$OUT/edge-$t.yaml"
  start "nginx-$t" "$NGINX" -p "$OUT/nginx-$t" -e "$OUT/nginx-$t/error.log" -c "$OUT/nginx-$t/nginx.conf" -g 'daemon off;'
  start "edge-$t" "$EDGE_BIN" serve --config "$OUT/edge-$t.yaml"
done
wait_port "$UP" 10
for t in "${TABLES[@]}"; do wait_port "${PORT[nginx-$t]}" 30; wait_port "${PORT[edge-$t]}" 60; done

# --- requests ----------------------------------------------------------------------------------
# body FILE NAME TEXT PADDING: a tools/call naming NAME whose arguments.text is TEXT + PADDING x's.
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
body() {
  { printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"%s","arguments":{"text":"%s' "$2" "$3"
    head -c "$4" /dev/zero | tr '\0' x
    printf '"},%s}}' "$META"; } >"$1"
}
# lua FILE BODY NAME: a wrk script sending BODY with the Mcp-* headers naming NAME (no
# per-response callback, as bench/mcp-call.lua; wrk counts non-2xx answers itself).
lua() {
  cat >"$1" <<EOF
local f = assert(io.open("$2", "rb"))
local body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.path = "/mcp"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "$3"
wrk.headers["Content-Length"] = tostring(#body)
wrk.body = body
EOF
}
mkdir -p "$OUT/req"
# Every point: dimension, point, route table, connections, tool name, wrk script.
POINTS=()
body "$OUT/req/empty.json" echo "" 0
EMPTY=$(stat -c %s "$OUT/req/empty.json")
for s in 256 4096 65536 1048576; do
  body "$OUT/req/size-$s.json" echo "" $((s - EMPTY))
  [ "$(stat -c %s "$OUT/req/size-$s.json")" = "$s" ] || { echo "body of $s B came out wrong" >&2; exit 1; }
  lua "$OUT/req/size-$s.lua" "$OUT/req/size-$s.json" echo
  POINTS+=("size $s base 32 echo $OUT/req/size-$s")
done
sed -n "s/^wrk.body = '\(.*\)'$/\1/p" bench/mcp-call.lua | tr -d '\n' >"$OUT/req/call.json"
for c in 32 256 1024; do
  POINTS+=("conns $c base $c echo $ROOT/bench/mcp-call")
done
for n in 10 1000 10000; do
  name=$(tool $((n / 2)))
  body "$OUT/req/routes-$n.json" "$name" "hello from the mcp-edge peer benchmark, 480 B" 0
  lua "$OUT/req/routes-$n.lua" "$OUT/req/routes-$n.json" "$name"
  POINTS+=("routes $n $n 32 $name $OUT/req/routes-$n")
done
reqfile() { case "$1" in */bench/mcp-call) echo "$OUT/req/call.json" ;; *) echo "$1.json" ;; esac; }

# Check every target answers every point's request correctly before measuring.
for p in "${POINTS[@]}"; do
  read -r _ _ tbl _ name script <<<"$p"
  for t in nginx edge; do
    ans=$(curl -s -o - -w ' HTTP%{http_code}' -X POST "http://127.0.0.1:${PORT[$t-$tbl]}/mcp" \
      -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
      -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $name" \
      -H 'Expect:' --data-binary "@$(reqfile "$script")")
    case "$ans" in
      *'"resultType":"complete"'*HTTP200) ;;
      *) echo "$t-$tbl answered the $p request wrongly: $ans" >&2; exit 1 ;;
    esac
  done
done
echo "== every target answers every point (${#POINTS[@]} points)"

# --- runs --------------------------------------------------------------------------------------
CLK=$(getconf CLK_TCK)
RUNS=$OUT/runs.tsv
printf 'round\tdim\tpoint\ttarget\trps\trequests\tproxy_ticks\tupstream_ticks\tnon2xx\tsockerr\n' >"$RUNS"

run_wrk() { # round dim point table conns target script
  local r=$1 d=$2 pt=$3 tbl=$4 c=$5 t=$6 script=$7.lua
  local url="http://127.0.0.1:${PORT[$t-$tbl]}/mcp" f="$OUT/wrk-r$1-$2-$3-$6.txt"
  local ppid=${PID[$t-$tbl]} upid=${PID[upstream]} a0 u0 a1 u1
  if [ "$WARMUP" -gt 0 ]; then
    wrk -t1 -c"$c" -d"${WARMUP}s" -s "$script" "$url" >/dev/null
  fi
  a0=$(cpu_ticks "$ppid"); u0=$(cpu_ticks "$upid")
  wrk -t1 -c"$c" -d"${DURATION}s" -s "$script" "$url" >"$f"
  a1=$(cpu_ticks "$ppid"); u1=$(cpu_ticks "$upid")
  local rps reqs non2xx sockerr
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$f")
  reqs=$(awk '/requests in/ {print $1}' "$f")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$f"); non2xx=${non2xx:-0}
  sockerr=$(awk '/Socket errors/ {s = 0; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) s += $i; print s}' "$f"); sockerr=${sockerr:-0}
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$d" "$pt" "$t" "${rps:-0}" "${reqs:-0}" \
    "$((a1 - a0))" "$((u1 - u0))" "$non2xx" "$sockerr" >>"$RUNS"
  printf '  round %s  %-6s %-8s %-6s %10s req/s  non-2xx %s  socket errors %s\n' \
    "$r" "$d" "$pt" "$t" "${rps:-0}" "$non2xx" "$sockerr"
}

TARGETS=(nginx edge)
for r in $(seq 1 "$ROUNDS"); do
  i=0
  for p in "${POINTS[@]}"; do
    read -r d pt tbl c _ script <<<"$p"
    # Alternate which target runs first, point by point and round by round.
    for k in 0 1; do
      run_wrk "$r" "$d" "$pt" "$tbl" "$c" "${TARGETS[$(((i + r + k) % 2))]}" "$script"
    done
    i=$((i + 1))
  done
done

# --- the tables ----------------------------------------------------------------------------------
TABLE=$OUT/table.md
table() { # dim heading
  echo "### $2"
  echo
  echo "| point | nginx req/s | edge req/s | x nginx | nginx CPU µs/req | edge CPU µs/req | non-2xx (nginx / edge) |"
  echo "|---|---:|---:|---:|---:|---:|---|"
  awk -F'\t' -v dim="$1" -v clk="$CLK" '
    function label(d, p) {
      if (d == "size") return p >= 1048576 ? p / 1048576 " MiB" : p >= 1024 ? p / 1024 " KiB" : p " B"
      if (d == "conns") return p " connections"
      return (p >= 1000 ? sprintf("%d,%03d", p / 1000, p % 1000) : p) " routes"
    }
    NR == 1 || $2 != dim { next }
    { k = $3 SUBSEP $4; if (!($3 in seen)) { seen[$3] = 1; order[++np] = $3 }
      n[k]++; rps[k] += $5; req[k] += $6; tk[k] += $7; bad[k] += $9; sock[k] += $10 }
    END {
      for (i = 1; i <= np; i++) {
        p = order[i] + 0; a = order[i] SUBSEP "nginx"; b = order[i] SUBSEP "edge"
        rn = rps[a] / n[a]; re = rps[b] / n[b]
        cn = req[a] ? sprintf("%.1f", tk[a] / clk * 1e6 / req[a]) : "-"
        ce = req[b] ? sprintf("%.1f", tk[b] / clk * 1e6 / req[b]) : "-"
        err = bad[a] + bad[b] + sock[a] + sock[b]
        cell = bad[a] " / " bad[b]
        if (sock[a] + sock[b] > 0) cell = cell ", socket errors " sock[a] " / " sock[b]
        if (err > 0 || rn == 0 || re == 0) cell = "**" cell ": not a valid measurement**"
        x = "-"; if (rn > 0) x = sprintf("%.2f", re / rn)
        printf "| %s | %.0f | %.0f | %s | %s | %s | %s |\n", label(dim, p), rn, re, x, cn, ce, cell
      }
    }' "$RUNS"
  echo
}
{
  table size "Request body size (32 connections)"
  table conns "Connections (the ~480 B request of bench/mcp-call.lua)"
  table routes "Exact routes (32 connections, the request names the route in the middle)"
} >"$TABLE"
echo
cat "$TABLE"
INVALID=$(awk -F'\t' 'NR > 1 && ($9 + $10 > 0 || $6 == 0) { n++ } END { print n + 0 }' "$RUNS")

# --- docs ----------------------------------------------------------------------------------------
if [ "$WRITE_DOCS" = 1 ]; then
  GEN=$OUT/generated.md
  {
    echo "<!-- generated by bench/growth.sh: everything up to the end marker is replaced on each run -->"
    echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'): $ROUNDS rounds x ${DURATION} s per point and target (after a"
    echo "${WARMUP} s warm-up), nginx and mcp-edge alternated, figures averaged over rounds; CPU per request is"
    echo "the process's utime+stime over the requests wrk completed."
    echo
    echo "- machine: $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr)"
    echo "- versions: $("$NGINX" -v 2>&1 | sed 's/^nginx version: //'), $(wrk -v 2>&1 | head -1 | awk '{print "wrk " $2}'), mcp-edge $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src Cargo.toml || echo '+dirty') ($("$EDGE_BIN" --version), binary \`$(realpath --relative-to="$ROOT" "$EDGE_BIN")\`), $(rustc --version 2>/dev/null | awk '{print "rustc " $2}')"
    echo "- reproduce: \`bench/growth.sh\` (raw wrk outputs: \`target/bench/growth-<date>/\`)"
    echo
    cat "$TABLE"
    echo "<!-- end generated growth -->"
  } >"$GEN"
  DOC=docs/benchmarks.md
  if [ -f "$DOC" ] && grep -q '<!-- generated by bench/growth.sh' "$DOC"; then
    awk -v gen="$GEN" '
      /<!-- generated by bench\/growth.sh/ { while ((getline l < gen) > 0) print l; skip = 1; next }
      /<!-- end generated growth -->/ { skip = 0; next }
      !skip { print }' "$DOC" >"$DOC.tmp" && mv "$DOC.tmp" "$DOC"
  else
    { [ -f "$DOC" ] && cat "$DOC"; echo; echo "## Cost growth"; echo; cat "$GEN"; } >"$DOC.tmp" && mv "$DOC.tmp" "$DOC"
  fi
  echo "== wrote $DOC"
fi
if [ "$INVALID" -gt 0 ]; then
  echo "== $INVALID runs had non-2xx answers, socket errors or no requests: those points are not valid measurements" >&2
  exit 1
fi
