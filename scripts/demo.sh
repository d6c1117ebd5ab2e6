#!/usr/bin/env bash
# `make demo`, in two parts.
# 1. The design record's scenario (a 1 GiB Torch tensor in a reference
#    cycle and a 1 GiB CuPy array, dropped), before and after, with
#    `python -m gpureclaim demo`.
# 2. The same scenario traced (`gpureclaim trace -- python3
#    examples/seed_scenario.py`): the trace's summary, where the driver's
#    memory went, call by call.
# For real where a GPU, Torch and CuPy are present, else on the simulated
# driver with the test suite's fake frameworks, labelled "simulated".
# Falls back to the C example when the Python package cannot be used.
set -euo pipefail
BUILD=${1:-build}
PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKG="$ROOT/$BUILD/python"
GPR="$ROOT/$BUILD/cli/gpureclaim"
TRACE="$ROOT/$BUILD/demo-seed.trace" # kept: `gpureclaim report` it
state="demo-$$"
trap 'rm -f /dev/shm/gpureclaim-sim-*-"$state"' EXIT

part2() {
	echo
	echo "== Part 2: the scenario traced: gpureclaim trace -- $*"
	echo
	"$GPR" trace -o "$TRACE" -- "$@"
}

if "$PYTHON" -c "import sys; sys.path.insert(0, '$PKG'); import gpureclaim" 2>/dev/null; then
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
		"$PYTHON" -c 'import torch, cupy, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
		export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"
		"$PYTHON" -m gpureclaim demo
		part2 "$PYTHON" "$ROOT/examples/seed_scenario.py"
		exit 0
	fi
	export GPURECLAIM_SIM="gpus=1;memory=80GiB;context=512MiB;state=$state"
	export GPURECLAIM_CUDA_LIBRARY="$ROOT/$BUILD/sim/libcuda.so.1"
	export GPURECLAIM_NVML_LIBRARY="$ROOT/$BUILD/sim/libnvidia-ml.so.1"
	export PYTHONPATH="$PKG:$ROOT/tests/python/fakes"
	"$PYTHON" -m gpureclaim demo
	part2 "$PYTHON" "$ROOT/examples/seed_scenario.py"
	exit 0
fi

echo "demo: the Python package is not usable here; the C example instead" >&2
export GPURECLAIM_SIM="gpus=2;memory=80GiB;context=512MiB;state=$state"
export LD_LIBRARY_PATH="$BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "simulated driver: $GPURECLAIM_SIM"
"$BUILD/examples/release_demo"
part2 "$ROOT/$BUILD/examples/release_demo"
