#!/usr/bin/env bash
# The tracer's own cost without a GPU: pairs of cuMemAlloc_v2/cuMemFree_v2
# from bench/trace_churn through a driver that does nothing
# (bench/fakecuda.c), or through the test suite's fake CUPTI.
#  1. the interposer's time per call in its own code
#     (GPURECLAIM_TRACE_SELFTIME: median, p90), warm, and cold (the driver
#     walks EVICT bytes between calls, as real work evicts the tracer's
#     cache lines), with each waiting-time source and each clock;
#  2. the same figure for the CUPTI backend (fake CUPTI: the callbacks'
#     own time, CUPTI's dispatch not included);
#  3. microseconds per pair, process against process, interleaved:
#     untraced, dormant (preloaded, not recording), interposed.
# usage: bench/trace_cpu.sh [BUILD] [ROUNDS] [N]   (defaults build 5 200000)
set -euo pipefail
B=${1:-build}
ROUNDS=${2:-5}
N=${3:-200000}
EVICT=${EVICT:-1048576}
COLD_N=${COLD_N:-20000}
FAKE=$B/bench/fakecuda
TR=$(cd "$B" && pwd)/trace/inject/libgpureclaim_trace.so
CHURN=$B/bench/trace_churn
LOG=/tmp/gpr-trace-cpu-$$.trace
trap 'rm -f "$LOG"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
lowest() { sort -n | head -1; }

# one traced run: its self-time median and p90
self() {
	rm -f "$LOG"
	env LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$TR" GPURECLAIM_TRACE_OUTPUT="$LOG" \
		GPURECLAIM_TRACE_SELFTIME=1 "$@" 2>&1 >/dev/null |
		sed -n 's/.*median \([0-9]*\) ns, p90 \([0-9]*\) ns.*/\1 \2/p'
}

echo "1. interposer, our code per recorded call (ns), median of $ROUNDS runs' medians (p90)"
row() {
	local label=$1 n=$2
	shift 2
	local meds=() p90s=()
	for ((r = 0; r < ROUNDS; r++)); do
		read -r m p <<<"$(self "$@" "$CHURN" cuda "$n" 1048576)"
		meds+=("$m")
		p90s+=("$p")
	done
	printf '  %-44s %5s ns (p90 %s)\n' "$label" \
		"$(printf '%s\n' "${meds[@]}" | median)" "$(printf '%s\n' "${p90s[@]}" | median)"
}
row "warm, TSC, perf-gated (the default)" "$N"
row "warm, clock_gettime, perf-gated" "$N" GPURECLAIM_TRACE_CLOCK=clock_gettime
row "warm, TSC, getrusage-gated" "$N" GPURECLAIM_TRACE_WAIT=getrusage
row "warm, TSC, no waiting time" "$N" GPURECLAIM_TRACE_WAIT=none
row "warm, TSC, no call site" "$N" GPURECLAIM_TRACE_NO_CALLSITE=1
row "cold ($EVICT B walked per call), default" "$COLD_N" FAKECUDA_EVICT_BYTES="$EVICT"
row "cold, getrusage-gated" "$COLD_N" FAKECUDA_EVICT_BYTES="$EVICT" GPURECLAIM_TRACE_WAIT=getrusage

echo "2. CUPTI backend through the fake CUPTI (the callbacks' own time, ns)"
CUPTI=$B/tests/trace/libcupti-fake.so
for ((r = 0; r < ROUNDS; r++)); do
	rm -f "$LOG"
	GPURECLAIM_TRACE_SELFTIME=1 GPURECLAIM_CUPTI_LIBRARY=$CUPTI \
		"$B/cli/gpureclaim" trace -q --backend cupti -o "$LOG" -- "$CHURN" fake "$N" 2>&1 >/dev/null |
		sed -n 's/.*median \([0-9]*\) ns.*/\1/p'
done | median | xargs printf '  median %s ns\n'

echo "3. us per pair through the fake driver, $ROUNDS interleaved rounds: median (change) / lowest"
declare -A runs
for ((r = 0; r < ROUNDS; r++)); do
	for v in untraced dormant interposed; do
		case $v in
		untraced) pre= ;;
		*) pre=$TR ;;
		esac
		extra=()
		[ "$v" = dormant ] && extra=(GPURECLAIM_TRACE_DORMANT=1)
		rm -f "$LOG"
		us=$(env LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$pre" GPURECLAIM_TRACE_OUTPUT="$LOG" \
			"${extra[@]}" "$CHURN" cuda "$N" 1048576 | grep -oE '^[0-9.]+')
		runs[$v]="${runs[$v]:-} $us"
	done
done
base=$(echo "${runs[untraced]}" | tr ' ' '\n' | grep . | median)
for v in untraced dormant interposed; do
	m=$(echo "${runs[$v]}" | tr ' ' '\n' | grep . | median)
	l=$(echo "${runs[$v]}" | tr ' ' '\n' | grep . | lowest)
	awk -v v="$v" -v m="$m" -v b="$base" -v l="$l" \
		'BEGIN {printf "  %-11s %8.4f us (%+8.4f us) / %8.4f\n", v, m, m - b, l}'
done
