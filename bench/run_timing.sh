#!/usr/bin/env bash
# Wall time of the run command (README, docs/getting-started.md) on a fresh clone with no services set: `make run` from nothing
# (venv, install, initdb, migrate, demo data) until /readyz answers 200, then a second run on the same clone.
# Usage: bench/run_timing.sh [repo (default: this checkout)] [port (default: 8765)]
set -euo pipefail
repo="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
port="${2:-8765}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/w"
cd "$work/w"
unset DATABASE_URL REDIS_URL

run_once() {
    local label="$1" log="$work/$1.log" start pid elapsed
    start=$(date +%s.%N)
    # setsid: the whole process group (make, the runner, its servers) can be stopped as Ctrl-C would.
    setsid make run PORT="$port" >"$log" 2>&1 &
    pid=$!
    until curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
        if ! kill -0 "$pid" 2>/dev/null; then echo "$label: make run exited early:"; tail -20 "$log"; exit 1; fi
        sleep 0.2
    done
    elapsed=$(echo "$(date +%s.%N) - $start" | bc)
    printf '%s run: ready after %.1f s\n' "$label" "$elapsed"
    kill -INT -- "-$pid"
    wait "$pid" || true
    if pgrep -f "$work/w/.wovepaper" >/dev/null; then echo "$label: servers still running after Ctrl-C"; exit 1; fi
}

run_once first
run_once second
