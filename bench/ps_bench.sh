#!/usr/bin/env bash
# `gpureclaim ps --json` against `nvidia-smi --query-compute-apps`, side by
# side in one run: N runs of each, interleaved (the order alternates each
# round), wall time of the whole command measured with bash's
# EPOCHREALTIME (no extra process per sample). Reports median, p90 and the
# ratio of the medians. Target: gpureclaim at least 5x faster.
#
# While it runs, a Python child holds 1 GiB through torch (when torch and
# a GPU are there) so both tools list a process, as in real use.
#
# usage: bench/ps_bench.sh [GPURECLAIM_BIN] [N]
#        (defaults: $GPURECLAIM_BIN, else build/cli/gpureclaim; N=50)
# Without an NVIDIA driver: prints "skipped: no NVIDIA driver", exits 0.
set -euo pipefail

BIN=${1:-${GPURECLAIM_BIN:-build/cli/gpureclaim}}
N=${2:-50}
SMI=(nvidia-smi --query-compute-apps=pid,used_memory --format=csv)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skipped: no NVIDIA driver"
	exit 0
fi
if [ ! -x "$BIN" ]; then
	echo "ps_bench: $BIN is not built (make all)" >&2
	exit 1
fi
if ! "$BIN" ps --json >/dev/null; then
	echo "ps_bench: '$BIN ps --json' failed" >&2
	exit 1
fi

holder_pid=
cleanup() {
	if [ -n "$holder_pid" ]; then
		kill "$holder_pid" 2>/dev/null || true
		wait "$holder_pid" 2>/dev/null || true
	fi
	rm -f "${fifo:-}"
}
trap cleanup EXIT
PY=${PYTHON:-python3}
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	fifo=$(mktemp -u)
	mkfifo "$fifo"
	"$PY" -c '
import sys, time, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
open(sys.argv[1], "w").write("ready\n")
time.sleep(3600)
' "$fifo" &
	holder_pid=$!
	read -r _ <"$fifo"
fi

# one warm-up each
"$BIN" ps --json >/dev/null
"${SMI[@]}" >/dev/null

ours=()
theirs=()
run_ours() {
	# EPOCHREALTIME is "s.uuuuuu": without the dot, microseconds
	local t0=${EPOCHREALTIME/[.,]/} t1
	"$BIN" ps --json >/dev/null
	t1=${EPOCHREALTIME/[.,]/}
	ours+=($((10#$t1 - 10#$t0)))
}
run_theirs() {
	# EPOCHREALTIME is "s.uuuuuu": without the dot, microseconds
	local t0=${EPOCHREALTIME/[.,]/} t1
	"${SMI[@]}" >/dev/null
	t1=${EPOCHREALTIME/[.,]/}
	theirs+=($((10#$t1 - 10#$t0)))
}
for ((i = 0; i < N; i++)); do
	if ((i % 2 == 0)); then
		run_ours
		run_theirs
	else
		run_theirs
		run_ours
	fi
done

# "median p90" in microseconds (p90: nearest rank)
stats() {
	printf '%s\n' "$@" | sort -n | awk '
		{ v[NR] = $1 }
		END {
			med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			r = int(0.9 * NR); if (r < 0.9 * NR) r++
			printf "%d %d\n", med, v[r]
		}'
}
read -r om op < <(stats "${ours[@]}")
read -r tm tp < <(stats "${theirs[@]}")

nprocs=$("$BIN" ps --json | "$PY" -c 'import json,sys; print(sum(len(g.get("processes", [])) for g in json.load(sys.stdin)["gpus"]))' 2>/dev/null || echo "?")
echo "ps_bench: N=$N runs each, interleaved; processes listed: $nprocs"
printf '%-48s %9s %9s\n' "" median p90
awk -v om="$om" -v op="$op" -v tm="$tm" -v tp="$tp" 'BEGIN {
	printf "%-48s %6.2f ms %6.2f ms\n", "gpureclaim ps --json", om / 1000, op / 1000
	printf "%-48s %6.2f ms %6.2f ms\n", "nvidia-smi --query-compute-apps=pid,used_memory", tm / 1000, tp / 1000
	ratio = tm / (om > 0 ? om : 1)
	printf "ratio (nvidia-smi / gpureclaim, medians): %.1fx; target >= 5x: %s\n", ratio, (ratio >= 5 ? "met" : "MISSED")
}'
