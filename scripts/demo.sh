#!/usr/bin/env bash
# `make demo`, in two parts.
# 1. The design record's scenario (a 1 GiB Torch tensor in a reference
#    cycle and a 1 GiB CuPy array, dropped), before and after the usual
#    call and gpureclaim's, with `python -m gpureclaim demo`.
# 2. The same scenario traced (`gpureclaim trace -- python3
#    examples/seed_scenario.py`): what the program printed, then what the
#    trace saw, said in words (`python -m gpureclaim _demo-trace`), and the
#    command that shows every call.
# For real where a GPU, Torch and CuPy are present, else on the simulated
# driver with the test suite's fake frameworks, which the output says.
# Falls back to the C example when the Python package cannot be used.
# The commands it prints can be pasted as they are: the build folder's
# command is named by its path unless it is the one on the PATH.
set -euo pipefail
BUILD=${1:-build}
PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKG="$ROOT/$BUILD/python"
GPR="$ROOT/$BUILD/cli/gpureclaim"
TRACE="$ROOT/$BUILD/demo-seed.trace" # kept: `gpureclaim report` it
state="demo-$$"
trap 'rm -f /dev/shm/gpureclaim-sim-*-"$state"' EXIT

# A path as the user can type it from here: relative when below the
# current folder, else whole.
shown() {
	case $1 in
	"$PWD"/*) printf '%s\n' "${1#"$PWD"/}" ;;
	*) printf '%s\n' "$1" ;;
	esac
}
# The command as the user runs it: `gpureclaim` when that is this build's,
# else its path.
cmd=$(shown "$GPR")
if [ "$(command -v gpureclaim 2>/dev/null)" = "$GPR" ]; then
	cmd=gpureclaim
fi

part1() {
	echo "== Part 1: one call gives back what empty_cache() leaves held"
	echo "   ($cmd demo)"
	echo
	"$PYTHON" -m gpureclaim demo
}

part2() {
	echo
	echo "== Part 2: the same scenario traced, every driver allocation and free"
	echo "   ($cmd trace -o $(shown "$TRACE") -- $(shown "$1") $(shown "$2"))"
	echo
	"$GPR" trace -q -o "$TRACE" -- "$@"
	echo
	"$PYTHON" -m gpureclaim _demo-trace "$TRACE" \
		"$cmd report $(shown "$TRACE")"
}

if "$PYTHON" -c "import sys; sys.path.insert(0, '$PKG'); import gpureclaim" 2>/dev/null; then
	export GPURECLAIM_BIN="$GPR"
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
		"$PYTHON" -c 'import torch, cupy, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
		export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"
		part1
		part2 "$PYTHON" "$ROOT/examples/seed_scenario.py"
		exit 0
	fi
	export GPURECLAIM_SIM="gpus=1;memory=80GiB;context=512MiB;state=$state"
	export GPURECLAIM_CUDA_LIBRARY="$ROOT/$BUILD/sim/libcuda.so.1"
	export GPURECLAIM_NVML_LIBRARY="$ROOT/$BUILD/sim/libnvidia-ml.so.1"
	export PYTHONPATH="$PKG:$ROOT/tests/python/fakes"
	part1
	part2 "$PYTHON" "$ROOT/examples/seed_scenario.py"
	exit 0
fi

echo "demo: the Python package is not usable here; the C example instead" >&2
export GPURECLAIM_SIM="gpus=2;memory=80GiB;context=512MiB;state=$state"
export LD_LIBRARY_PATH="$BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== The C example on the simulated driver ($GPURECLAIM_SIM)"
echo
"$BUILD/examples/release_demo"
echo
echo "== The same traced ($cmd trace -- $(shown "$ROOT/$BUILD/examples/release_demo"))"
echo
"$GPR" trace -o "$TRACE" -- "$ROOT/$BUILD/examples/release_demo"
