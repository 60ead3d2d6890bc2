# bench/lib.sh: what the loopback benchmarks (compare.sh, growth.sh, compare-tls.sh, conns.sh)
# share; sourced, not run.
#
#   bench_tools CMD:PKG...   apt-get installs the packages of the commands that are missing
#   bench_edge_bin           sets EDGE_BIN (absolute): --edge-bin if given; with SMOKE=1 an
#                            existing release or debug build; else `cargo build --release`
#   start_cleanup            kills every pid in PIDS on exit (TERM, then KILL)
#   port_free PORT           true when nothing listens on 127.0.0.1:PORT
#   wait_port PORT [SECS]    waits until something listens there (default 10 s)
#   cpu_ticks PID            utime+stime (clock ticks) of PID and its direct children

bench_tools() {
  local need=() pair cmd pkg
  for pair in "$@"; do
    cmd=${pair%%:*}
    pkg=${pair#*:}
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "== installing: ${need[*]}"
    apt-get update -qq
    # The Debian packages may start a system nginx/haproxy; the benchmarks never use them.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  export PATH=$PATH:/usr/sbin
}

bench_edge_bin() {
  if [ -z "$EDGE_BIN" ]; then
    if [ "${SMOKE:-0}" = 1 ] && [ -x target/release/mcp-edge ]; then
      EDGE_BIN=target/release/mcp-edge
    elif [ "${SMOKE:-0}" = 1 ] && [ -x target/debug/mcp-edge ]; then
      EDGE_BIN=target/debug/mcp-edge
    else
      echo "== cargo build --release (fat LTO: several minutes on 2 cores when not up to date)"
      cargo build --release --bin mcp-edge >/dev/null
      EDGE_BIN=target/release/mcp-edge
    fi
  fi
  EDGE_BIN=$(realpath "$EDGE_BIN")
}

PIDS=()
bench_cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.3
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
start_cleanup() {
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local i
  for i in $(seq 1 $((${2:-10} * 20))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on port $1 after ${2:-10} s" >&2
  return 1
}

cpu_ticks() {
  local p total=0 f s
  for p in "$1" $(pgrep -P "$1" 2>/dev/null || true); do
    f=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || continue
    read -r -a s <<<"$f"
    total=$((total + s[11] + s[12]))
  done
  echo $total
}
