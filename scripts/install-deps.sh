#!/usr/bin/env bash
# install-deps.sh [check|demo]: installs what `make check` (the default) or
# `make demo` needs on a fresh Debian 12 machine, and says what to install
# by hand where it cannot (not root, no apt). Quiet when everything is there.
#   demo: what building the product and running the demo on the simulated
#         driver use, nothing more:
#         apt: gcc, g++ (the fake torch's stand-in libtorch_cuda.so, which
#              docs/sim.md's environment names), make, the Python headers
#              and pip
#         pip: meson (>= 1.4; Debian 12 has 1.0), ninja (>= 1.11)
#   check: the demo's, and what the tests use:
#         apt: clang (+ its sanitizer and libFuzzer runtimes),
#              clang-format, pkg-config, git, jq, cmocka, util-linux,
#              prometheus (a real server and promtool for tests/metrics),
#              patchelf, libncurses-dev (`top`'s terminal view; a build
#              without it has none and says so) and tmux (its tests drive
#              it in a real terminal)
#         pip: meson-python, pytest, hypothesis, auditwheel; the cluster
#              tests' engines (distributed, torch, ray); ipykernel and
#              jupyter-client (a real kernel for the notebook tests);
#              prometheus_client (the metrics' extra, gpureclaim[prometheus])
#         and a Python 3.14 with ipykernel, for the tests of `agent start
#         --pid` (scripts/python-remote-exec.sh: Debian unstable's .debs)
set -euo pipefail

what=${1:-check}
case $what in
check | demo) ;;
*)
	echo "install-deps: unknown set '$what' (check or demo)" >&2
	exit 2
	;;
esac
PYTHON=${PYTHON:-python3}
need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
# the fake torch's stand-in of libtorch_cuda.so (tests/fixtures, built by
# every build: docs/sim.md's environment after `make demo` names it)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v make >/dev/null 2>&1 || need_apt+=(make)
if ! command -v "$PYTHON" >/dev/null 2>&1; then
	need_apt+=(python3 python3-dev python3-pip)
else
	"$PYTHON" -c 'import sysconfig, os, sys; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' ||
		need_apt+=(python3-dev)
	"$PYTHON" -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
fi
if [ "$what" = check ]; then
	command -v clang >/dev/null 2>&1 || need_apt+=(clang)
	command -v clang-format >/dev/null 2>&1 || need_apt+=(clang-format)
	command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
	command -v git >/dev/null 2>&1 || need_apt+=(git)
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
	# tests/metrics: Debian's Prometheus server scrapes the exporter; its
	# package ships promtool (`promtool check metrics`)
	{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 ||
		need_apt+=(prometheus)
	# `gpureclaim top`'s terminal view (ncurses), and the real terminal its
	# tests drive it in
	[ -f /usr/include/curses.h ] || [ -f /usr/include/ncursesw/curses.h ] ||
		need_apt+=(libncurses-dev)
	command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
	# scripts/python-remote-exec.sh points Debian unstable's Python 3.14 at
	# its own glibc (the tests of `agent start --pid`)
	command -v patchelf >/dev/null 2>&1 || need_apt+=(patchelf)
fi

# INSTALL_DEPS_DRY_RUN=1: say what would be installed, install nothing
# (tests/install/test_deps.py)
dry=${INSTALL_DEPS_DRY_RUN:-}
if [ -n "$dry" ]; then
	[ ${#need_apt[@]} -eq 0 ] || echo "install-deps: would apt-get install ${need_apt[*]}"
fi

if [ ${#need_apt[@]} -gt 0 ] && [ -z "$dry" ]; then
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

# The Python tools, for the Python that runs the build ($PYTHON).
need_pip=()
if [ "$what" = check ]; then
	"$PYTHON" -c 'import pytest' >/dev/null 2>&1 || need_pip+=(pytest)
	# the Python fuzz tests of the agent's answers
	"$PYTHON" -c 'import hypothesis' >/dev/null 2>&1 || need_pip+=(hypothesis)
	"$PYTHON" -c 'import mesonpy' >/dev/null 2>&1 || need_pip+=('meson-python>=0.16')
	"$PYTHON" -c 'import auditwheel' >/dev/null 2>&1 || need_pip+=(auditwheel)
fi
# meson and ninja: the commands, new enough (ninja --quiet is 1.11)
meson_ok() {
	command -v meson >/dev/null 2>&1 && meson --version | "$PYTHON" -c \
		'import sys; v = tuple(map(int, sys.stdin.read().split(".")[:2])); sys.exit(v < (1, 4))'
}
ninja_ok() {
	command -v ninja >/dev/null 2>&1 && ninja --version | "$PYTHON" -c \
		'import sys; v = tuple(map(int, sys.stdin.read().split(".")[:2])); sys.exit(v < (1, 11))'
}
meson_ok || need_pip+=('meson>=1.4')
ninja_ok || need_pip+=(ninja)
# The cluster tests (tests/cluster) run the real engines: Dask, the CPU
# build of torch (torch.distributed on gloo) and Ray with its State API.
# Versions as tested; on this project's machines pip takes them (torch
# 2.13.0+cpu included) from the local wheel store, about 1 MiB from PyPI.
# The demo runs on fake frameworks: it neither needs nor looks for them
# (each look-up imports the engine, seconds each).
if [ "$what" = check ]; then
	"$PYTHON" -c 'import distributed' >/dev/null 2>&1 || need_pip+=("distributed==2026.8.0")
	"$PYTHON" -c 'import torch.distributed' >/dev/null 2>&1 || need_pip+=("torch==2.13.0")
	"$PYTHON" -c 'import ray.util.state' >/dev/null 2>&1 || need_pip+=("ray[default]==2.60.0")
	# a real Jupyter kernel for the notebook tests (tests/python/test_oom_notebook.py)
	"$PYTHON" -c 'import ipykernel' >/dev/null 2>&1 || need_pip+=("ipykernel==7.4.0")
	"$PYTHON" -c 'import jupyter_client' >/dev/null 2>&1 || need_pip+=("jupyter-client==8.10.0")
	# the exporter and gpureclaim.metrics (the [prometheus] extra)
	"$PYTHON" -c 'import prometheus_client' >/dev/null 2>&1 || need_pip+=("prometheus_client==0.26.0")
fi

if [ -n "$dry" ]; then
	[ ${#need_pip[@]} -eq 0 ] || echo "install-deps: would pip install ${need_pip[*]}"
	exit 0
fi

if [ ${#need_pip[@]} -gt 0 ]; then
	echo "install-deps: pip install ${need_pip[*]}"
	pip_args=(-q)
	# Debian's own Python is "externally managed" (PEP 668): as root, say
	# that installing into it is meant
	if "$PYTHON" -c 'import sys, sysconfig, os; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
		pip_args+=(--break-system-packages)
	fi
	"$PYTHON" -m pip install "${pip_args[@]}" "${need_pip[@]}"
	hash -r
	if ! meson_ok || ! ninja_ok; then
		echo "install-deps: meson (>= 1.4) or ninja (>= 1.11) is still not on PATH;" \
			"add $("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))') to PATH" >&2
		exit 1
	fi
fi

# A Python with sys.remote_exec (3.14; Debian 12's is 3.11) for the tests of
# `gpureclaim agent start --pid` (tests/python/test_agent_remote.py). Where
# it cannot be fetched those tests skip, saying so; the rest goes on.
if [ "$what" = check ]; then
	bash "$(dirname "$0")/python-remote-exec.sh" >/dev/null ||
		echo "install-deps: no Python 3.14 for the tests of agent start --pid (scripts/python-remote-exec.sh failed); they will skip" >&2
fi
