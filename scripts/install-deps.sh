#!/usr/bin/env bash
# Installs what `make check` and `make demo` need on a fresh Debian 12 machine,
# and says what to install by hand where it cannot (not root, no apt).
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++) # the test stand-in of libtorch_cuda.so
command -v clang >/dev/null 2>&1 || need_apt+=(clang)
command -v clang-format >/dev/null 2>&1 || need_apt+=(clang-format)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v make >/dev/null 2>&1 || need_apt+=(make)
# the docs' and helps' examples pipe JSON through jq; tests run them
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
[ -f /usr/include/cmocka.h ] || need_apt+=(libcmocka-dev)
# clang's sanitizer runtimes (ThreadSanitizer for `make check`) and libFuzzer
if ! { ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a ||
	ls /usr/lib/llvm-*/lib/clang/*/lib/*/libclang_rt.fuzzer*.a; } >/dev/null 2>&1 ||
	! { ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.tsan-x86_64.a ||
		ls /usr/lib/llvm-*/lib/clang/*/lib/*/libclang_rt.tsan*.a; } >/dev/null 2>&1; then
	need_apt+=(libclang-rt-14-dev)
fi
command -v setarch >/dev/null 2>&1 || need_apt+=(util-linux)

if [ ${#need_apt[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "install-deps: apt-get install ${need_apt[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq "${need_apt[@]}" >/dev/null
	else
		echo "install-deps: missing packages: ${need_apt[*]}" >&2
		echo "install-deps: run as root: apt-get install ${need_apt[*]}" >&2
		exit 1
	fi
fi

PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
	echo "install-deps: $PYTHON not found; install python3 and python3-dev" >&2
	exit 1
fi
if ! "$PYTHON" -c 'import pytest' >/dev/null 2>&1; then
	echo "install-deps: pip install pytest"
	"$PYTHON" -m pip install -q pytest
fi
# The cluster tests (tests/cluster) run the real engines: Dask, the CPU
# build of torch (torch.distributed on gloo) and Ray with its State API.
# Versions as tested; on this project's machines pip takes them (torch
# 2.13.0+cpu included) from the local wheel store, about 1 MiB from PyPI.
cluster=()
"$PYTHON" -c 'import distributed' >/dev/null 2>&1 || cluster+=("distributed==2026.8.0")
"$PYTHON" -c 'import torch.distributed' >/dev/null 2>&1 || cluster+=("torch==2.13.0")
"$PYTHON" -c 'import ray.util.state' >/dev/null 2>&1 || cluster+=("ray[default]==2.60.0")
if [ ${#cluster[@]} -gt 0 ]; then
	echo "install-deps: pip install ${cluster[*]}"
	"$PYTHON" -m pip install -q "${cluster[@]}"
fi
if ! "$PYTHON" -c 'import sysconfig, os, sys; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'; then
	echo "install-deps: Python.h not found for $PYTHON; install python3-dev" >&2
	exit 1
fi
if ! "$PYTHON" -c 'import setuptools' >/dev/null 2>&1; then
	"$PYTHON" -m pip install -q setuptools
fi
echo "install-deps: ok"
