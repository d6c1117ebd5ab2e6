#!/usr/bin/env bash
# `make demo`: the C example on the simulated driver (replaced by the Python
# scenario once the Python package exists).
set -euo pipefail
BUILD=${1:-build}
export GPURECLAIM_SIM="gpus=2;memory=80GiB;context=512MiB;state=demo-$$"
export LD_LIBRARY_PATH="$BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "simulated driver: $GPURECLAIM_SIM"
"$BUILD/examples/release_demo"
