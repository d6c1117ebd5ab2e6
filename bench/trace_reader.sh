#!/usr/bin/env bash
# The trace reader against hostile logs, on the CPU (no GPU needed):
# wall time and peak memory (/usr/bin/time's maximum RSS) of
# `gpureclaim report --json` on logs written by bench/trace_gen:
#   - allocations at random addresses, at addresses chosen to share one
#     slot of the former fixed hash, and 4 KiB apart; 10^5 and 10^6 each;
#     target: chosen / random <= 3 (issue 16);
#   - memory: peak RSS against the log's size (target <= 2x + a constant)
#     for 10^6 alloc/free pairs, 10^6 allocations never freed, and a log
#     of empty strings.
# Each figure: the median of RUNS runs.
# Usage: bench/trace_reader.sh [BUILD_DIR] [RUNS] [SIZES]
set -eu
B=${1:-build}
RUNS=${2:-3}
SIZES=${3:-"100000 1000000"}
GPR=$B/cli/gpureclaim
GEN=$B/bench/trace_gen
[ -x "$GPR" ] && [ -x "$GEN" ] || { echo "build first: make all ($GPR, $GEN)" >&2; exit 1; }
T=$(mktemp -d /tmp/gpr-reader-bench-XXXXXX)
trap 'rm -rf "$T"' EXIT

# median of the numbers on stdin
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# prints "SECONDS PEAK_KB EXIT" (medians) for `gpureclaim report FILE --json`
measure() {
	local f=$1 i out rc
	: >"$T/s"
	: >"$T/m"
	for i in $(seq "$RUNS"); do
		rc=0
		/usr/bin/time -f "%e %M" -o "$T/time" "$GPR" report "$f" --json >/dev/null 2>"$T/err" || rc=$?
		read -r s m < <(tail -n 1 "$T/time")
		echo "$s" >>"$T/s"
		echo "$m" >>"$T/m"
	done
	echo "$(median <"$T/s") $(median <"$T/m") $rc"
}

echo "machine: $(uname -m), $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo); $(date -u +%Y-%m-%d)"
echo "tool: $GPR ($(git -C "$(dirname "$GPR")" rev-parse --short HEAD 2>/dev/null || echo "?"))"
echo
echo "| records | random s | chosen s | strided s | chosen / random | strided / random |"
echo "|---|---|---|---|---|---|"
for n in $SIZES; do
	declare -A sec
	for shape in random chosen strided; do
		"$GEN" "$shape" "$n" "$T/$shape.trace"
		read -r s m rc < <(measure "$T/$shape.trace")
		[ "$rc" = 0 ] || { echo "report $shape $n failed: $(cat "$T/err")" >&2; exit 1; }
		sec[$shape]=$s
		rm -f "$T/$shape.trace"
	done
	awk -v n="$n" -v r="${sec[random]}" -v c="${sec[chosen]}" -v s="${sec[strided]}" \
		'BEGIN {d = r > 0.005 ? r : 0.005; printf "| %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", n, r, c, s, c / d, s / d}'
done
echo
echo "| log | size MiB | exit | s | peak RSS MiB | RSS / size |"
echo "|---|---|---|---|---|---|"
for spec in "pairs 1000000" "random 1000000" "strings 131000" "strings 3900000"; do
	set -- $spec
	"$GEN" "$1" "$2" "$T/m.trace"
	size=$(stat -c %s "$T/m.trace")
	read -r s m rc < <(measure "$T/m.trace")
	awk -v name="$1 $2" -v size="$size" -v s="$s" -v m="$m" -v rc="$rc" \
		'BEGIN {printf "| %s | %.1f | %s | %.2f | %.1f | %.2f |\n", name, size / 1048576, rc, s, m / 1024, m * 1024 / size}'
	[ "$rc" = 0 ] || echo "  ($1: $(head -c 200 "$T/err"))"
	rm -f "$T/m.trace"
done
