#!/usr/bin/env bash
# bench/compare-tls.sh: mcp-edge against nginx configured the same way, over TLS and HTTP/2.
#
# Same upstream and request as bench/compare.sh (nginx static JSON-RPC result, keep-alive; the
# ~480 B tools/call of bench/mcp-call.lua). One certificate (ECDSA P-256, made here with openssl
# under target/, never committed) for both proxies; TLS 1.3 only; keep-alive; nginx with its
# session cache, mcp-edge with rustls' default in-memory session cache. Rows, alternated each
# round, for both proxies:
#   h1        plain HTTP/1.1, wrk -t1 -c32                (the baseline)
#   h1-tls    HTTP/1.1 over TLS 1.3, wrk -t1 -c32 (https; handshakes only at connect)
#   h2-tls    h2 over TLS 1.3 (ALPN), h2load -c4 -m8      (32 streams in flight)
#   h2c       h2 with prior knowledge, h2load -c4 -m8
# Each proxy has one worker (nginx worker_processes 1; mcp-edge threads 1, one process per
# listener kind so each is a single pingora service). CPU per request: utime+stime of the
# proxy process (and nginx's worker) over the requests completed.
#
# Usage: bench/compare-tls.sh [--smoke] [--rounds N] [--duration SECS] [--edge-bin PATH] [--no-docs]
#   --smoke   1 s runs, one round, no docs: checks that everything starts and answers
# Raw outputs: target/bench/compare-tls-<date>/. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SMOKE=0; ROUNDS=2; DURATION=5; WRITE_DOCS=1; EDGE_BIN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1; ROUNDS=1; DURATION=1; WRITE_DOCS=0 ;;
    --rounds) ROUNDS=$2; shift ;;
    --duration) DURATION=$2; shift ;;
    --edge-bin) EDGE_BIN=$2; shift ;;
    --no-docs) WRITE_DOCS=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

. bench/lib.sh
bench_tools nginx:nginx-light wrk:wrk h2load:nghttp2-client openssl:openssl
NGINX=$(command -v nginx)
if [ -z "$EDGE_BIN" ]; then
  if [ "$SMOKE" = 1 ] && [ -x target/debug/mcp-edge ]; then EDGE_BIN=target/debug/mcp-edge
  else cargo build --release --bin mcp-edge >/dev/null; EDGE_BIN=target/release/mcp-edge; fi
fi
EDGE_BIN=$(realpath "$EDGE_BIN")
OUT=$ROOT/target/bench/compare-tls-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT/up" "$OUT/ngx"
echo "== raw outputs in $OUT"

start_cleanup
BASE=19800
while ! { port_free $BASE && port_free $((BASE + 1)) && port_free $((BASE + 6)); }; do BASE=$((BASE + 20)); done
UP=$BASE; NGX_H1=$((BASE + 1)); NGX_TLS=$((BASE + 2)); NGX_H2C=$((BASE + 3))
EDGE_PLAIN=$((BASE + 4)); EDGE_TLS=$((BASE + 5))

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$OUT/key.pem" -out "$OUT/cert.pem" 2>/dev/null

RESULT='{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello from the mcp-edge peer benchmark, 480 B"}],"resultType":"complete"}}'
cat >"$OUT/up/nginx.conf" <<EOF
worker_processes 1;
pid $OUT/up/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off; client_body_temp_path $OUT/up; keepalive_requests 10000000; keepalive_timeout 60s;
  server { listen 127.0.0.1:$UP backlog=4096; location / { default_type application/json; return 200 '$RESULT'; } }
}
EOF
cat >"$OUT/ngx/nginx.conf" <<EOF
worker_processes 1;
pid $OUT/ngx/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off; client_body_temp_path $OUT/ngx; proxy_temp_path $OUT/ngx;
  keepalive_requests 10000000; keepalive_timeout 60s; http2_max_requests 10000000;
  map \$http_mcp_name \$mcp_pool { default pool_default; echo pool_echo; }
  upstream pool_echo    { server 127.0.0.1:$UP; keepalive 512; keepalive_requests 10000000; }
  upstream pool_default { server 127.0.0.1:$UP; keepalive 512; keepalive_requests 10000000; }
  ssl_certificate $OUT/cert.pem; ssl_certificate_key $OUT/key.pem;
  ssl_protocols TLSv1.3; ssl_session_cache shared:TLS:10m;
  server { listen 127.0.0.1:$NGX_H1 backlog=4096;
           location /mcp { proxy_pass http://\$mcp_pool; proxy_http_version 1.1; proxy_set_header Connection ""; } }
  server { listen 127.0.0.1:$NGX_TLS ssl http2 backlog=4096;
           location /mcp { proxy_pass http://\$mcp_pool; proxy_http_version 1.1; proxy_set_header Connection ""; } }
  server { listen 127.0.0.1:$NGX_H2C http2 backlog=4096;
           location /mcp { proxy_pass http://\$mcp_pool; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
EOF
edge_conf() { # listener-yaml
  cat <<EOF
listen: { mcp: $1, admin: null }
threads: 1
pools:
  echo: { instances: [127.0.0.1:$UP], health: { check: off } }
  default: { instances: [127.0.0.1:$UP], health: { check: off } }
routes:
  - { name: echo, match: { method: tools/call, name: echo }, pool: echo }
default_route: { pool: default }
EOF
}
edge_conf "{ address: 127.0.0.1:$EDGE_PLAIN, h2c: true }" >"$OUT/edge-plain.yaml"
edge_conf "{ address: 127.0.0.1:$EDGE_TLS, tls: { certificates: [{ cert: $OUT/cert.pem, key: $OUT/key.pem }], min_version: \"1.3\" } }" >"$OUT/edge-tls.yaml"

declare -A PID
start() { local name=$1; shift; "$@" >"$OUT/$name.stdout" 2>"$OUT/$name.stderr" & PIDS+=($!); PID[$name]=$!; }
start upstream "$NGINX" -p "$OUT/up" -e "$OUT/up/error.log" -c "$OUT/up/nginx.conf" -g 'daemon off;'
start nginx "$NGINX" -p "$OUT/ngx" -e "$OUT/ngx/error.log" -c "$OUT/ngx/nginx.conf" -g 'daemon off;'
start edge-plain "$EDGE_BIN" serve --config "$OUT/edge-plain.yaml"
start edge-tls "$EDGE_BIN" serve --config "$OUT/edge-tls.yaml"
for p in $UP $NGX_H1 $NGX_TLS $NGX_H2C $EDGE_PLAIN $EDGE_TLS; do wait_port $p; done

BODY=$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p" bench/mcp-call.lua)
printf '%s' "$BODY" >"$OUT/body.json"
HDRS=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream'
      -H 'mcp-protocol-version: 2026-07-28' -H 'mcp-method: tools/call' -H 'mcp-name: echo')
# target -> "proxy-process tool url"
declare -A T=(
  [nginx/h1]="nginx wrk http://127.0.0.1:$NGX_H1/mcp"
  [edge/h1]="edge-plain wrk http://127.0.0.1:$EDGE_PLAIN/mcp"
  [nginx/h1-tls]="nginx wrk https://127.0.0.1:$NGX_TLS/mcp"
  [edge/h1-tls]="edge-tls wrk https://127.0.0.1:$EDGE_TLS/mcp"
  [nginx/h2-tls]="nginx h2load https://127.0.0.1:$NGX_TLS/mcp"
  [edge/h2-tls]="edge-tls h2load https://127.0.0.1:$EDGE_TLS/mcp"
  [nginx/h2c]="nginx h2load http://127.0.0.1:$NGX_H2C/mcp"
  [edge/h2c]="edge-plain h2load http://127.0.0.1:$EDGE_PLAIN/mcp"
)
ORDER=(nginx/h1 edge/h1 nginx/h1-tls edge/h1-tls nginx/h2-tls edge/h2-tls nginx/h2c edge/h2c)

# Every target answers the call (curl: h1, TLS with the certificate, h2 by ALPN, h2c).
for t in "${ORDER[@]}"; do
  read -r _ tool url <<<"${T[$t]}"
  flag=--http1.1; [ "$tool" = h2load ] && { flag=--http2; [[ $url == http:* ]] && flag=--http2-prior-knowledge; }
  got=$(curl -s "$flag" --cacert "$OUT/cert.pem" -w ' HTTP%{http_code}' "${HDRS[@]}" --data-binary "$BODY" "$url")
  case "$got" in *'"resultType":"complete"'*HTTP200) ;; *) echo "target $t answered wrongly: $got" >&2; exit 1 ;; esac
done

CLK=$(getconf CLK_TCK)
RUNS=$OUT/runs.tsv
printf 'round\ttarget\trps\trequests\tticks\tfailed\n' >"$RUNS"
run() { # round target
  local r=$1 t=$2 proc tool url f="$OUT/r$1-${2//\//-}.txt" a0 a1 rps reqs failed
  read -r proc tool url <<<"${T[$t]}"
  a0=$(cpu_ticks "${PID[$proc]}")
  if [ "$tool" = wrk ]; then
    wrk -t1 -c32 -d"${DURATION}s" -s bench/mcp-call.lua "$url" >"$f"
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$f"); reqs=$(awk '/requests in/ {print $1}' "$f")
    failed=$(awk '/Non-2xx/ {print $NF}' "$f"); failed=${failed:-0}
  else
    h2load -c4 -m8 -D "$DURATION" -d "$OUT/body.json" "${HDRS[@]}" "$url" >"$f" 2>&1
    rps=$(awk '/^finished in/ {print $4}' "$f"); reqs=$(awk '/^requests:/ {print $6}' "$f")
    failed=$(awk '/^requests:/ {print $10}' "$f")
  fi
  a1=$(cpu_ticks "${PID[$proc]}")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$t" "$rps" "$reqs" "$((a1 - a0))" "$failed" >>"$RUNS"
  printf '  round %s %-14s %10s req/s  failed %s\n' "$r" "$t" "$rps" "$failed"
}
n=${#ORDER[@]}
for r in $(seq 1 "$ROUNDS"); do
  for k in $(seq 0 $((n - 1))); do run "$r" "${ORDER[$(((k + r - 1) % n))]}"; done
done

TABLE=$OUT/table.md
{
  echo "| protocol | proxy | req/s | x nginx | CPU us/req | x own h1 CPU | failed |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  awk -F'\t' -v clk="$CLK" -v order="${ORDER[*]}" 'NR > 1 { n[$2]++; rps[$2] += $3; req[$2] += $4; tk[$2] += $5; bad[$2] += $6 }
    END { k = split(order, o, " ")
      for (i = 1; i <= k; i++) { t = o[i]; split(t, pp, "/"); cpu[t] = tk[t] / clk * 1e6 / req[t] }
      for (i = 1; i <= k; i++) { t = o[i]; split(t, pp, "/")
        printf "| %s | %s | %.0f | %.2f | %.1f | %.2f | %d |\n", pp[2], pp[1], rps[t] / n[t],
          (rps[t] / n[t]) / (rps["nginx/" pp[2]] / n["nginx/" pp[2]]), cpu[t], cpu[t] / cpu[pp[1] "/h1"], bad[t] } }' "$RUNS"
} >"$TABLE"
echo; cat "$TABLE"

if [ "$WRITE_DOCS" = 1 ]; then
  GEN=$OUT/generated.md
  { echo "<!-- generated by bench/compare-tls.sh: replaced on each run -->"
    echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'), $ROUNDS rounds x ${DURATION} s, $(nproc) cores, $("$NGINX" -v 2>&1 | sed 's/^nginx version: //'), mcp-edge $(git rev-parse --short HEAD) ($EDGE_BIN); \`bench/compare-tls.sh\` reproduces it."
    echo; cat "$TABLE"; echo "<!-- end generated tls -->"; } >"$GEN"
  DOC=docs/benchmarks.md
  if grep -q '<!-- generated by bench/compare-tls.sh' "$DOC"; then
    awk -v gen="$GEN" '/<!-- generated by bench\/compare-tls.sh/ { while ((getline l < gen) > 0) print l; skip = 1; next }
      /<!-- end generated tls -->/ { skip = 0; next } !skip { print }' "$DOC" >"$DOC.tmp" && mv "$DOC.tmp" "$DOC"
  else
    { cat "$DOC"; echo; echo "## TLS and HTTP/2"; echo; cat "$GEN"; } >"$DOC.tmp" && mv "$DOC.tmp" "$DOC"
  fi
  echo "== wrote $DOC"
fi
