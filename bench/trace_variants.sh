#!/usr/bin/env bash
# Where the tracer's cost goes on a real GPU: the C churn (cuMemAlloc_v2 +
# cuMemFree_v2 of 2 MiB, N pairs) untraced, traced, and traced without each
# of its two costly parts (the stack walk, the waiting-time reads),
# interleaved over ROUNDS rounds. Prints microseconds per pair.
# usage: bench/trace_variants.sh BUILD [N] [ROUNDS]   (skips without a GPU)
set -euo pipefail
B=${1:-build}
N=${2:-20000}
ROUNDS=${3:-3}
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skipped: no NVIDIA GPU"
	exit 0
fi
churn=("$B/bench/trace_churn" cuda "$N" 2097152)
tr=("$B/gpureclaim" trace -o /tmp/gpr-variants.trace --)
declare -A sum
variants=(untraced traced no-callsite no-schedstat neither)
for ((r = 0; r < ROUNDS; r++)); do
	for v in "${variants[@]}"; do
		case $v in
		untraced) out=$("${churn[@]}") ;;
		traced) out=$("${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		no-callsite) out=$(GPURECLAIM_TRACE_NO_CALLSITE=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		no-schedstat) out=$(GPURECLAIM_TRACE_NO_SCHEDSTAT=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		neither) out=$(GPURECLAIM_TRACE_NO_CALLSITE=1 GPURECLAIM_TRACE_NO_SCHEDSTAT=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		esac
		us=$(echo "$out" | grep -oE '[0-9]+(\.[0-9]+)?' | head -1)
		echo "round $r $v: $us us/pair"
		sum[$v]="${sum[$v]:-} $us"
	done
done
echo "median us per pair over $ROUNDS rounds (N=$N):"
base=$(echo ${sum[untraced]} | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
for v in "${variants[@]}"; do
	m=$(echo ${sum[$v]} | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	awk -v v="$v" -v m="$m" -v b="$base" 'BEGIN {printf "  %-13s %8.2f  %+6.1f%%\n", v, m, (m / b - 1) * 100}'
done
