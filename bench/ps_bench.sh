#!/usr/bin/env bash
# One-shot `gpureclaim ps` against `nvidia-smi --query-compute-apps`, side
# by side in one run: R rounds, each running every contender once in an
# order that rotates from round to round (interleaved, so drift and
# caches fall on all alike); wall time of the whole command, measured
# with bash's EPOCHREALTIME (no extra process per sample). Reports, per
# contender, the median and the minimum in ms per call, and the ratio to
# nvidia-smi (medians; minimums). Target (issue 12): `gpureclaim ps`
# <= 0.75x nvidia-smi.
#
# Two reference rows say where the time goes: `gpureclaim --version`
# (starting the process, nothing loaded) and `gpureclaim version` (NVML
# and libcuda loaded, NVML initialised, no GPU attached). Rows with
# GPURECLAIM_PS_VARIANT time the other ways `ps` can start and end
# (cli/ps_start.c, cli/util_exit.c, docs/ps.md): each must list exactly
# what the default lists (checked before timing), and the fastest is the
# one to keep. `exit=wait` is the end before the detached one: the
# kernel's release of NVML's files inside the time the shell waits.
#
# A one-shot `ps` returns before the process it leaves to release NVML's
# files has ended (a few ms later): a pause of 30 ms, not timed, follows
# every command, so that no command starts while another's release runs.
# One row times two `ps` back to back without that pause, which is what a
# script calling `ps` in a loop sees.
#
# While it runs, a Python child holds 1 GiB through torch (when torch and
# a GPU are there) so every tool lists a process, as in real use.
#
# usage: bench/ps_bench.sh [GPURECLAIM_BIN] [ROUNDS]
#        (defaults: $GPURECLAIM_BIN, else build/cli/gpureclaim; ROUNDS=21, >= 7)
# Without an NVIDIA driver: prints "skipped: no NVIDIA driver", exits 0.
set -euo pipefail

BIN=${1:-${GPURECLAIM_BIN:-build/cli/gpureclaim}}
R=${2:-21}
if ((R < 7)); then
	echo "ps_bench: at least 7 rounds, not $R" >&2
	exit 2
fi

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

# The contenders: a label and a command line each (run with eval, so a
# variable set before the command costs no extra process); the first is
# the reference the ratios are taken against, the second the target.
Q=$(printf '%q' "$BIN")
V=GPURECLAIM_PS_VARIANT
labels=(
	"nvidia-smi --query-compute-apps=pid,used_memory --format=csv"
	"gpureclaim ps"
	"gpureclaim ps --json"
	"  ps, exit=wait (_exit, NVML's release waited for)"
	"  ps, exit=fork (the detached end made by fork())"
	"  ps, exit=libc (ends through exit())"
	"  ps, start=serial (NVML started by the first query)"
	"  ps, gpu=split (facts, processes: two threads a GPU)"
	"  ps, start=serial,exit=libc (as before issue 12)"
	"  ps; ps (two back to back, both; no pause between)"
	"gpureclaim --version (process start only)"
	"gpureclaim version (NVML+libcuda loaded, NVML init, no GPU)"
)
cmds=(
	"nvidia-smi --query-compute-apps=pid,used_memory --format=csv"
	"$Q ps"
	"$Q ps --json"
	"$V=exit=wait $Q ps"
	"$V=exit=fork $Q ps"
	"$V=exit=libc $Q ps"
	"$V=start=serial $Q ps"
	"$V=gpu=split $Q ps"
	"$V=start=serial,exit=libc $Q ps"
	"$Q ps >/dev/null; $Q ps"
	"$Q --version"
	"$Q version"
)
n=${#cmds[@]}

# The pause after each command: a read that times out on a FIFO nobody
# writes (no process started, unlike sleep).
pause_fifo=$(mktemp -u)
mkfifo "$pause_fifo"
exec {pause_fd}<>"$pause_fifo"
rm -f "$pause_fifo"
pause() { read -r -t 0.03 -u "$pause_fd" _ || true; }

# one warm-up each; the variants must list what the default lists
same=yes
want=$(eval "${cmds[1]}")
for ((c = 0; c < n; c++)); do
	got=$(eval "${cmds[c]}") || {
		echo "ps_bench: '${cmds[c]}' failed" >&2
		exit 1
	}
	pause
	if [[ ${cmds[c]} == *"$V="* && $got != "$want" ]]; then
		same="NO: ${labels[c]}"
	fi
done

declare -A us # us[c,r]: microseconds of contender c in round r
for ((r = 0; r < R; r++)); do
	for ((k = 0; k < n; k++)); do
		c=$(((k + r) % n))
		# EPOCHREALTIME is "s.uuuuuu": without the dot, microseconds
		t0=${EPOCHREALTIME/[.,]/}
		eval "${cmds[c]}" >/dev/null
		t1=${EPOCHREALTIME/[.,]/}
		us[$c,$r]=$((10#$t1 - 10#$t0))
		pause
	done
done

# "median minimum" in microseconds
stats() {
	printf '%s\n' "$@" | sort -n | awk '
		{ v[NR] = $1 }
		END {
			med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%d %d\n", med, v[1]
		}'
}
declare -a med mn
for ((c = 0; c < n; c++)); do
	vals=()
	for ((r = 0; r < R; r++)); do
		vals+=("${us[$c,$r]}")
	done
	read -r med[c] mn[c] < <(stats "${vals[@]}")
done

nprocs=$("$BIN" ps --json | "$PY" -c 'import json,sys; print(sum(len(g.get("processes", [])) for g in json.load(sys.stdin)["gpus"]))' 2>/dev/null || echo "?")
ngpus=$(nvidia-smi -L | wc -l)
echo "ps_bench: $R rounds, each contender once per round in a rotating order;"
echo "          $ngpus GPU(s), $nprocs process(es) listed"
echo "          the variants list the same as gpureclaim ps: $same"
printf '%-60s %10s %10s %16s\n' "ms per call" median min "ratio med (min)"
for ((c = 0; c < n; c++)); do
	awk -v l="${labels[c]}" -v m="${med[c]}" -v x="${mn[c]}" \
		-v rm="${med[0]}" -v rx="${mn[0]}" -v c="$c" 'BEGIN {
		ratio = sprintf("%.2fx (%.2fx)", m / rm, x / rx)
		printf "%-60s %7.2f ms %7.2f ms %16s\n", l, m / 1000, x / 1000, ratio
	}'
done
awk -v m="${med[1]}" -v rm="${med[0]}" 'BEGIN {
	r = m / rm
	printf "target: gpureclaim ps <= 0.75x nvidia-smi (medians): %.2fx, %s\n", r, (r <= 0.75 ? "met" : "MISSED")
}'
