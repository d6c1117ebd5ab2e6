#!/usr/bin/env bash
# Where one-shot `gpureclaim ps` spends its time, step by step: RUNS runs
# with GPURECLAIM_PS_PROFILE set to the shell's clock as each starts
# (cli/ps_profile.c), the steps of each run summed by name, then the
# median over the runs. Two steps come from the shell's side: "exec to
# main" (fork, exec, loading, up to the command's main) and "exit"
# (from the profile's last step to the shell seeing the command end:
# closing its descriptors and starting the detached end, cli/util_exit.c;
# with GPURECLAIM_PS_VARIANT=exit=wait, the kernel closing NVML's files).
# The steps of different threads overlap: "end" (ms since the shell
# started the command, median) orders them. Runs are 30 ms apart, so that
# none starts while the previous one's detached end still runs.
#
# usage: bench/ps_profile.sh [GPURECLAIM_BIN] [RUNS] [PS ARGS...]
#        (defaults: $GPURECLAIM_BIN, else build/cli/gpureclaim; RUNS=11, >= 3)
# GPURECLAIM_PS_VARIANT in the environment profiles that variant.
# Without an NVIDIA driver (no nvidia-smi, or it fails): prints "skipped:
# no NVIDIA driver", exits 0; GPURECLAIM_PS_PROFILE_ANY=1 runs anyway (on
# the simulated driver, for a test).
set -euo pipefail

BIN=${1:-${GPURECLAIM_BIN:-build/cli/gpureclaim}}
R=${2:-11}
shift $(($# < 2 ? $# : 2))
if ((R < 3)); then
	echo "ps_profile: at least 3 runs, not $R" >&2
	exit 2
fi
if [ "${GPURECLAIM_PS_PROFILE_ANY:-0}" != 1 ] &&
	! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
	echo "skipped: no NVIDIA driver"
	exit 0
fi
if [ ! -x "$BIN" ]; then
	echo "ps_profile: $BIN is not built (make all)" >&2
	exit 1
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$BIN" ps "$@" >/dev/null 2>&1 || true # warm-up
# the pause between runs: a read that times out on a FIFO nobody writes
# (no process started)
pause_fifo=$(mktemp -u)
mkfifo "$pause_fifo"
exec {pause_fd}<>"$pause_fifo"
rm -f "$pause_fifo"
for ((r = 0; r < R; r++)); do
	read -r -t 0.03 -u "$pause_fd" _ || true
	t0=$EPOCHREALTIME
	GPURECLAIM_PS_PROFILE=$t0 "$BIN" ps "$@" >/dev/null 2>"$dir/$r" || true
	t1=$EPOCHREALTIME
	echo "ps-profile # wall_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) * 1000 }')" >>"$dir/$r"
done

echo "ps_profile: $R runs of '$(basename "$BIN") ps $*'${GPURECLAIM_PS_VARIANT:+ with GPURECLAIM_PS_VARIANT=$GPURECLAIM_PS_VARIANT}; medians in ms"
awk -v runs="$R" '
function med(list,   n, v, i, j, t) {
	n = split(list, v, " ")
	for (i = 2; i <= n; i++)	# insertion sort: a few dozen values
		for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
			t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
		}
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
FNR == 1 { run++; main = 0; last = 0; delete took; delete end }
!/^ps-profile / { next }
/^ps-profile # / {
	if (match($0, /main_after_given_ms=[0-9.]+/))
		main = substr($0, RSTART + 20, RLENGTH - 20) + 0
	if (match($0, /[0-9.]+ ms of CPU before main/))
		cpu = cpu " " substr($0, RSTART, RLENGTH - 24)
	if (match($0, /wall_ms=[0-9.]+/)) {
		wall = substr($0, RSTART + 8, RLENGTH - 8) + 0
		exec_l = exec_l " " main
		exit_l = exit_l " " (wall - main - last)
		wall_l = wall_l " " wall
		for (k in took) {
			took_l[k] = took_l[k] " " took[k]
			end_l[k] = end_l[k] " " (main + end[k])
		}
	}
	next
}
{
	# "ps-profile END THREAD TEXT", TEXT "<step>: <ms> ms[, why]" or a note
	t = $0
	sub(/^ps-profile +/, "", t)
	e = t; sub(/ .*/, "", e)
	sub(/^[^ ]+ +/, "", t)
	th = t; sub(/ .*/, "", th)
	sub(/^[^ ]+ +/, "", t)
	last = e + 0
	if (match(t, /: [0-9.]+ ms(, .*)?$/)) {
		k = substr(t, 1, RSTART - 1)
		ms = substr(t, RSTART + 2) + 0
	} else {
		k = t; ms = -1
	}
	k = th SUBSEP k (ms < 0 ? " (moment)" : "")
	took[k] += ms < 0 ? 0 : ms
	if (!(k in end)) end[k] = e + 0	# the first time it ended
}
END {
	printf "%9s %9s  %-6s %s\n", "end", "took", "thread", "step"
	printf "%9.3f %9.3f  %-6s %s\n", med(exec_l), med(exec_l), "shell", "exec to main (fork, exec, loading)"
	n = 0
	for (k in took_l) {
		n++; key[n] = k; at[n] = med(end_l[k])
	}
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && at[j - 1] > at[j]; j--) {
			t = at[j]; at[j] = at[j - 1]; at[j - 1] = t
			t = key[j]; key[j] = key[j - 1]; key[j - 1] = t
		}
	for (i = 1; i <= n; i++) {
		split(key[i], part, SUBSEP)
		if (part[2] ~ / \(moment\)$/)
			printf "%9.3f %9s  %-6s %s\n", at[i], "-", part[1], substr(part[2], 1, length(part[2]) - 9)
		else
			printf "%9.3f %9.3f  %-6s %s\n", at[i], med(took_l[key[i]]), part[1], part[2]
	}
	printf "%9.3f %9.3f  %-6s %s\n", med(wall_l), med(exit_l), "shell", "exit (after the last step, until the shell sees the end)"
	printf "CPU time before main: %.3f ms (median); wall per run: %.3f ms (median)\n", med(cpu), med(wall_l)
}' "$dir"/*
