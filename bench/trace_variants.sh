#!/usr/bin/env bash
# Where the tracer's cost goes on a real GPU: a churn loop untraced, traced,
# traced without each of its two costly parts (the stack walk, the
# waiting-time reads), and with CUPTI subscribed but no callback enabled
# (CUPTI's own cost), interleaved over ROUNDS rounds. Prints microseconds
# per alloc/free pair and the change against untraced.
#   LOOP c:     cuMemAlloc_v2 + cuMemFree_v2 of 2 MiB through libcuda
#               (build/bench/trace_churn), N pairs;
#   LOOP torch: torch.empty + del of 1 MiB with PYTORCH_NO_CUDA_MEMORY_CACHING=1,
#               N pairs.
# usage: bench/trace_variants.sh BUILD [N] [ROUNDS] [c|torch]  (skips without a GPU)
set -euo pipefail
B=${1:-build}
N=${2:-20000}
ROUNDS=${3:-3}
LOOP=${4:-c}
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skipped: no NVIDIA GPU"
	exit 0
fi
TORCH_CHURN='
import sys, time, torch
n = int(sys.argv[1])
torch.ones(1, device="cuda")
for _ in range(200):
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda"); del x
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(n):
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda"); del x
torch.cuda.synchronize()
print("%.3f us/pair" % ((time.perf_counter() - t0) / n * 1e6))
'
case $LOOP in
c) churn=("$B/bench/trace_churn" cuda "$N" 2097152) ;;
torch)
	export PYTORCH_NO_CUDA_MEMORY_CACHING=1
	churn=(python3 -c "$TORCH_CHURN" "$N")
	;;
*)
	echo "usage: $0 BUILD [N] [ROUNDS] [c|torch]" >&2
	exit 2
	;;
esac
tr=("$B/gpureclaim" trace -q -o /tmp/gpr-variants.trace --)
declare -A sum
variants=(untraced traced no-callsite no-schedstat neither subscribe-only)
for ((r = 0; r < ROUNDS; r++)); do
	for v in "${variants[@]}"; do
		case $v in
		untraced) out=$("${churn[@]}") ;;
		traced) out=$("${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		no-callsite) out=$(GPURECLAIM_TRACE_NO_CALLSITE=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		no-schedstat) out=$(GPURECLAIM_TRACE_NO_SCHEDSTAT=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		neither) out=$(GPURECLAIM_TRACE_NO_CALLSITE=1 GPURECLAIM_TRACE_NO_SCHEDSTAT=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		subscribe-only) out=$(GPURECLAIM_TRACE_SUBSCRIBE_ONLY=1 "${tr[@]}" "${churn[@]}" 2>/dev/null) ;;
		esac
		us=$(echo "$out" | grep -oE '[0-9]+(\.[0-9]+)? us/pair' | grep -oE '^[0-9.]+' | head -1)
		echo "round $r $v: $us us/pair"
		sum[$v]="${sum[$v]:-} $us"
	done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median us per pair over $ROUNDS rounds ($LOOP loop, N=$N):"
base=$(echo "${sum[untraced]}" | median)
for v in "${variants[@]}"; do
	m=$(echo "${sum[$v]}" | median)
	awk -v v="$v" -v m="$m" -v b="$base" 'BEGIN {printf "  %-15s %8.2f  %+6.1f%%\n", v, m, (m / b - 1) * 100}'
done
