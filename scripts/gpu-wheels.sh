#!/usr/bin/env bash
# Run here (it needs PyPI): downloads into .whl/ (git-ignored, carried to the
# GPU machine with the tree) the wheels that tests/hardware/test_cluster.py
# needs and the GPU machine lacks: dask and distributed with every
# dependency, for CPython 3.12 on manylinux x86_64 (that machine's Python);
# and, for tests/hardware/test_explain.py, rmm-cu13 with the wheels it pulls
# that the machine lacks (numpy is there; about 14 MB, cuda-bindings most of
# it, installed only where the machine has none); IPython into
# .whl/ipython for tests/hardware/test_holders.py.
# The stages hw-cluster and rmm of scripts/gpu-check.sh install them from
# there with `pip install --no-index --find-links .whl`.
#   usage: bash scripts/gpu-wheels.sh [PYTHON_VERSION]   (default 3.12)
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${1:-3.12}
# the versions tests/cluster runs with here (scripts/install-deps.sh)
WANT=(distributed==2026.8.0 dask==2026.8.0)
rm -rf .whl
mkdir -p .whl
python3 -m pip download -q --dest .whl --only-binary=:all: \
	--python-version "$PYVER" --implementation cp --abi "cp${PYVER/./}" \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
	--platform manylinux2014_x86_64 --platform any "${WANT[@]}"
# RMM without its dependencies: numpy (and often cuda-bindings) is there
python3 -m pip download -q --dest .whl --no-deps --only-binary=:all: \
	--python-version "$PYVER" --platform manylinux_2_28_x86_64 \
	'rmm-cu13==26.10.*' 'librmm-cu13==26.10.*' 'rapids-logger==0.3.*' \
	'cuda-bindings>=13.0.1,<14' 'cuda-pathfinder>=1.4.2'
# IPython with what it pulls (pure Python), for tests/hardware/
# test_holders.py's Out case; the hw-holders stage puts it after the
# machine's own packages
python3 -m pip download -q --dest .whl/ipython --only-binary=:all: \
	--python-version "$PYVER" --implementation cp --abi "cp${PYVER/./}" \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
	--platform manylinux2014_x86_64 --platform any ipython
ls -1 .whl
echo "gpu-wheels: $(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/"
