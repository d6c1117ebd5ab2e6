#!/usr/bin/env bash
# Where the tracer's cost goes on a real GPU: a churn loop untraced, traced,
# traced without each of its two costly parts (the stack walk, the
# waiting-time reads), with the full stack walk every time (no fast walk),
# with CUPTI subscribed but no callback enabled (CUPTI's own cost), and
# with the injection library loaded but CUPTI not (the injection's cost),
# interleaved over ROUNDS rounds. Prints microseconds per iteration and
# the change against untraced. The "selftime" variant is traced with
# GPURECLAIM_TRACE_SELFTIME=1 and also prints the tracer's own line: the
# nanoseconds per call spent in its callbacks, split.
#   LOOP c:     cuMemAlloc_v2 + cuMemFree_v2 of 2 MiB through libcuda
#               (build/bench/trace_churn), N pairs;
#   LOOP torch: torch.empty + del of 1 MiB with PYTORCH_NO_CUDA_MEMORY_CACHING=1,
#               N pairs.
#   LOOP mlp:   N/40 training steps of bench/trace_loops.py's MLP, caching on
#               (no driver allocation per step: what the tracer costs a
#               program that is not allocating).
# VARIANTS="untraced traced ..." picks a subset (untraced always runs).
# usage: bench/trace_variants.sh BUILD [N] [ROUNDS] [c|torch|mlp]  (skips without a GPU)
set -euo pipefail
B=${1:-build}
N=${2:-20000}
ROUNDS=${3:-3}
LOOP=${4:-c}
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skipped: no NVIDIA GPU"
	exit 0
fi
LOOPS=$(dirname "$0")/trace_loops.py # the torch and mlp loops
case $LOOP in
c) churn=("$B/bench/trace_churn" cuda "$N" 2097152) ;;
torch)
	export PYTORCH_NO_CUDA_MEMORY_CACHING=1
	churn=(python3 "$LOOPS" torch "$N")
	;;
mlp) churn=(python3 "$LOOPS" mlp $((N / 40 > 10 ? N / 40 : 10))) ;;
*)
	echo "usage: $0 BUILD [N] [ROUNDS] [c|torch|mlp]" >&2
	exit 2
	;;
esac
tr=("$B/cli/gpureclaim" trace -q -o /tmp/gpr-variants.trace --)
declare -A sum
read -r -a variants <<<"untraced ${VARIANTS:-traced no-callsite no-schedstat neither subscribe-only}"
variants=(untraced $(printf '%s\n' "${variants[@]:1}" | grep -vx untraced || true))
for ((r = 0; r < ROUNDS; r++)); do
	for v in "${variants[@]}"; do
		case $v in
		untraced) out=$("${churn[@]}") ;;
		traced) out=$("${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		no-callsite) out=$(GPURECLAIM_TRACE_NO_CALLSITE=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		no-schedstat) out=$(GPURECLAIM_TRACE_NO_SCHEDSTAT=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		neither) out=$(GPURECLAIM_TRACE_NO_CALLSITE=1 GPURECLAIM_TRACE_NO_SCHEDSTAT=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		full-walk) out=$(GPURECLAIM_TRACE_FULL_WALK=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		selftime)
			out=$(GPURECLAIM_TRACE_SELFTIME=1 "${tr[@]}" "${churn[@]}" 2>&1)
			echo "$out" | grep 'self time' || true
			;;
		inject-only) out=$(GPURECLAIM_TRACE_INJECT_ONLY=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		subscribe-only) out=$(GPURECLAIM_TRACE_SUBSCRIBE_ONLY=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		*)
			echo "unknown variant $v" >&2
			exit 2
			;;
		esac
		us=$(echo "$out" | grep -oE '[0-9]+(\.[0-9]+)? us/pair' | grep -oE '^[0-9.]+' | head -1)
		echo "round $r $v: $us us/pair"
		sum[$v]="${sum[$v]:-} $us"
	done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
lowest() { tr ' ' '\n' | grep . | sort -n | head -1; }
echo "us per iteration over $ROUNDS rounds ($LOOP loop, N=$N): median (change), lowest (change)"
base=$(echo "${sum[untraced]}" | median)
low=$(echo "${sum[untraced]}" | lowest)
for v in "${variants[@]}"; do
	m=$(echo "${sum[$v]}" | median)
	l=$(echo "${sum[$v]}" | lowest)
	awk -v v="$v" -v m="$m" -v b="$base" -v l="$l" -v lb="$low" 'BEGIN {printf "  %-15s %8.2f  %+6.1f%%   %8.2f  %+6.1f%%\n", v, m, (m / b - 1) * 100, l, (l / lb - 1) * 100}'
done
