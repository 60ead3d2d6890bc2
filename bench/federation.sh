#!/usr/bin/env bash
# bench/federation.sh: what federation costs on the request path, on loopback.
#
# One fast upstream (nginx, 1 worker) that answers as a small MCP server by Mcp-Method:
# server/discover, tools/list (one tool, `echo`, ttlMs 60000 public) and tools/call. Three
# mcp-edge (release, threads 1, every body checked) in front of it, measured alternately with wrk
# (1 thread, 32 connections):
#   route        a hand-written exact route for `echo` (the baseline)
#   federated    a federated endpoint (collisions: priority): `echo` routed by the catalog
#   prefixed     a federated endpoint (collisions: prefix): `up__echo` routed by the catalog and
#                renamed to `echo` in Mcp-Name and the body
# then `tools/list`: the route's edge-cache hit against the federated endpoint's merged answer
# served from the catalog. Measured: requests/s, p50, p99, the proxy's CPU time per request.
#
# Usage: bench/federation.sh [--rounds N] [--duration SECS] [--edge-bin PATH]
# Raw outputs go to target/bench/federation-<date>/. Every process started here is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=2
DURATION=5
EDGE_BIN=""
SMOKE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift ;;
    --duration) DURATION=$2; shift ;;
    --edge-bin) EDGE_BIN=$2; shift ;;
    --smoke) SMOKE=1; ROUNDS=1; DURATION=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
. bench/lib.sh
bench_tools nginx:nginx-light wrk:wrk curl:curl
NGINX=$(command -v nginx)
bench_edge_bin
OUT=$ROOT/target/bench/federation-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT/up"
echo "== raw outputs in $OUT"
start_cleanup

BASE=19400
while ! { port_free $BASE && port_free $((BASE + 1)) && port_free $((BASE + 2)) && port_free $((BASE + 3)); }; do
  BASE=$((BASE + 20))
done
UP=$BASE
declare -A PORT=([route]=$((BASE + 1)) [federated]=$((BASE + 2)) [prefixed]=$((BASE + 3)))

DISCOVER='{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":60000,"cacheScope":"public","resultType":"complete"}}'
LIST='{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}],"ttlMs":60000,"cacheScope":"public","resultType":"complete"}}'
CALL='{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello from the mcp-edge federation benchmark"}],"resultType":"complete"}}'
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
  map \$http_mcp_method \$answer {
    default '$CALL';
    server/discover '$DISCOVER';
    tools/list '$LIST';
  }
  server {
    listen 127.0.0.1:$UP backlog=4096;
    location / {
      default_type application/json;
      return 200 \$answer;
    }
  }
}
EOF

edge_conf() { # port tail
  printf 'listen:\n  mcp: 127.0.0.1:%s\n  admin: null\nthreads: 1\npools:\n  up: { instances: [127.0.0.1:%s] }\n%s\n' "$1" "$UP" "$2"
}
edge_conf "${PORT[route]}" $'routes:\n  - {name: echo, match: {method: tools/call, name: echo}, pool: up}\ndefault_route: { pool: up }' >"$OUT/route.yaml"
edge_conf "${PORT[federated]}" $'federation:\n  endpoints:\n    - {path: /mcp, pools: [up], collisions: priority}' >"$OUT/federated.yaml"
edge_conf "${PORT[prefixed]}" $'federation:\n  endpoints:\n    - {path: /mcp, pools: [up]}' >"$OUT/prefixed.yaml"

"$NGINX" -p "$OUT/up" -e "$OUT/up/error.log" -c "$OUT/up/nginx.conf" -g 'daemon off;' >"$OUT/up.log" 2>&1 &
PIDS+=($!)
declare -A PID
for t in route federated prefixed; do
  "$EDGE_BIN" serve --config "$OUT/$t.yaml" >"$OUT/$t.stdout" 2>"$OUT/$t.stderr" &
  PIDS+=($!)
  PID[$t]=$!
done
wait_port $UP
for t in route federated prefixed; do wait_port "${PORT[$t]}"; done

# The wrk scripts: the call as bench/mcp-call.lua sends it, the prefixed call, and tools/list.
sed -n '/^wrk\./p' bench/mcp-call.lua >"$OUT/call.lua"
sed -e 's/"Mcp-Name"\] = "echo"/"Mcp-Name"] = "up__echo"/' -e 's/"name":"echo"/"name":"up__echo"/' "$OUT/call.lua" >"$OUT/call-prefixed.lua"
cat >"$OUT/list.lua" <<'EOF'
wrk.method = "POST"
wrk.path = "/mcp"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/list"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
EOF

check() { # target script want: send the script's request once with curl
  local body args=() line
  while IFS= read -r line; do args+=(-H "$line"); done < <(sed -n 's/^wrk.headers\["\([^"]*\)"\] = "\(.*\)"$/\1: \2/p' "$2")
  body=$(curl -s -X POST "http://127.0.0.1:${PORT[$1]}/mcp" "${args[@]}" \
    --data-binary "$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p" "$2")")
  case "$body" in *"$3"*) ;; *) echo "target $1 answered wrongly: $body" >&2; exit 1 ;; esac
}
# The federated endpoints learn their catalog in the background: wait for it.
for i in $(seq 1 100); do
  if curl -s -X POST "http://127.0.0.1:${PORT[prefixed]}/mcp" -H 'Content-Type: application/json' -H 'MCP-Protocol-Version: 2026-07-28' \
     -H 'Mcp-Method: tools/list' --data-binary "$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p" "$OUT/list.lua")" | grep -q up__echo; then break; fi
  sleep 0.1
done
check route "$OUT/call.lua" 'federation benchmark'
check federated "$OUT/call.lua" 'federation benchmark'
check prefixed "$OUT/call-prefixed.lua" 'federation benchmark'
check route "$OUT/list.lua" '"echo"'
check federated "$OUT/list.lua" '"echo"'

CLK=$(getconf CLK_TCK)
RUNS=$OUT/runs.tsv
printf 'round\tcase\ttarget\trps\tp50\tp99\trequests\tticks\n' >"$RUNS"
run() { # round case target script
  local f="$OUT/wrk-r$1-$2-$3.txt" url="http://127.0.0.1:${PORT[$3]}/mcp" a0 a1
  wrk -t1 -c32 -d1s -s "$4" "$url" >/dev/null
  a0=$(cpu_ticks "${PID[$3]}")
  wrk -t1 -c32 -d"${DURATION}s" --latency -s "$4" "$url" >"$f"
  a1=$(cpu_ticks "${PID[$3]}")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(awk '/^Requests\/sec:/ {print $2}' "$f")" \
    "$(awk '$1 == "50%" {print $2}' "$f")" "$(awk '$1 == "99%" {print $2}' "$f")" "$(awk '/requests in/ {print $1}' "$f")" "$((a1 - a0))" >>"$RUNS"
  tail -1 "$RUNS"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="route federated prefixed"; else order="prefixed federated route"; fi
  for t in $order; do
    s="$OUT/call.lua"; [ "$t" = prefixed ] && s="$OUT/call-prefixed.lua"
    run "$r" call "$t" "$s"
  done
  if [ $((r % 2)) = 1 ]; then order="route federated"; else order="federated route"; fi
  for t in $order; do run "$r" tools-list "$t" "$OUT/list.lua"; done
done
echo
echo "| request | target | req/s | p50 | p99 | proxy CPU us/req |"
echo "|---|---|---:|---:|---:|---:|"
awk -F'\t' -v clk="$CLK" 'NR > 1 { k = $2 " | " $3; if (!(k in n)) order[++m] = k; n[k]++; rps[k] += $4; req[k] += $7; t[k] += $8; p50[k] = $5; p99[k] = $6 }
  END { for (i = 1; i <= m; i++) { k = order[i]; printf "| %s | %.0f | %s | %s | %.1f |\n", k, rps[k] / n[k], p50[k], p99[k], t[k] / clk * 1e6 / req[k] } }' "$RUNS"
