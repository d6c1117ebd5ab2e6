#!/usr/bin/env bash
# Downloads the wheels the GPU machine needs for RMM (rmm-cu13 and what it
# pulls that the machine lacks) into .whl/ (git-ignored; carry it to the
# GPU machine). About 14 MB: numpy is already there; cuda-bindings is
# skipped too when the machine has it (scripts/gpu-check.sh stage `rmm`
# installs only what is missing, with pip --no-index --find-links .whl).
# The GPU machine's python is 3.12 on x86_64.
set -eu
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download --quiet --no-deps --only-binary=:all: \
	--python-version 3.12 --platform manylinux_2_28_x86_64 -d .whl \
	'rmm-cu13==26.10.*' 'librmm-cu13==26.10.*' 'rapids-logger==0.3.*' \
	'cuda-bindings>=13.0.1,<14' 'cuda-pathfinder>=1.4.2'
ls -l .whl
du -sh .whl
