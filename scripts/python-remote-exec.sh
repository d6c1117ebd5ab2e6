#!/usr/bin/env bash
# python-remote-exec.sh [--find] [DIR]: a Python that has sys.remote_exec (3.14 or
# newer, PEP 768) on a Debian 12 machine, whose own Python is 3.11, for the
# tests of `gpureclaim agent start --pid` (tests/python/test_agent_remote.py).
#
# Debian unstable's python3.1X (the oldest there that is 3.14 or newer) and
# the libraries it needs, glibc among them, are fetched by apt as .debs (the
# archive's signatures checked, this machine's package state untouched),
# unpacked into DIR, and the interpreter is pointed at that glibc with
# patchelf (its loader and an RPATH), so it runs here as any program does.
# ipykernel and jupyter-client for it go to DIR/site (pip --target, binary
# wheels only), for the test of an idle Jupyter kernel.
#
# Prints the interpreter's path, DIR/python. Quick and quiet when DIR
# already has a working one. --find: only that (exit 1 where DIR has
# none; nothing is fetched): how the tests find it.
# DIR: $GPURECLAIM_REMOTE_PYTHON_DIR; else, as root,
# /var/cache/gpureclaim/remote-python (readable by every user: a test runs
# it as a second uid); else ~/.cache/gpureclaim/remote-python.
# Needs apt-get, dpkg-deb and patchelf, and deb.debian.org and PyPI.
set -euo pipefail

find_only=
if [ "${1:-}" = --find ]; then
	find_only=1
	shift
fi
if [ $# -gt 0 ]; then
	dir=$1
elif [ -n "${GPURECLAIM_REMOTE_PYTHON_DIR:-}" ]; then
	dir=$GPURECLAIM_REMOTE_PYTHON_DIR
elif [ "$(id -u)" = 0 ]; then
	dir=/var/cache/gpureclaim/remote-python
else
	dir=${XDG_CACHE_HOME:-$HOME/.cache}/gpureclaim/remote-python
fi
PYTHON=${PYTHON:-python3}
IPYKERNEL=ipykernel==7.4.0
JUPYTER_CLIENT=jupyter-client==8.10.0

works() {
	[ -x "$dir/python" ] && PYTHONPATH="$dir/site" "$dir/python" -c \
		'import sys, ipykernel, jupyter_client; sys.exit(not hasattr(sys, "remote_exec"))' \
		>/dev/null 2>&1
}
if works; then
	echo "$dir/python"
	exit 0
fi
[ -z "$find_only" ] || exit 1
for tool in apt-get apt-cache dpkg-deb patchelf; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "python-remote-exec: $tool is missing (apt-get install patchelf apt dpkg)" >&2
		exit 1
	fi
done

umask 022
rm -rf "$dir"
apt_dir=$dir/.apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" \
	>"$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list"
	-o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$apt_dir/lists"
	-o "Dir::Cache=$apt_dir/cache"
	-o Dir::State::status=/dev/null
	-o Debug::NoLocking=1
	-o APT::Architecture=amd64 -o APT::Architectures=amd64
	-o APT::Sandbox::User=root)
[ "$(id -u)" = 0 ] || apt_opts+=(-o APT::Sandbox::User="$(id -un)")
apt-get "${apt_opts[@]}" -qq update
ver=$(apt-cache "${apt_opts[@]}" pkgnames python3.1 |
	sed -n 's/^python3\.\([0-9][0-9]*\)-minimal$/\1/p' | sort -n |
	awk '$1 >= 14 { print; exit }')
if [ -z "$ver" ]; then
	echo "python-remote-exec: Debian unstable has no python3.14 or newer" >&2
	exit 1
fi
py=python3.$ver
# the interpreter, its standard library and every library they link: the
# dependency closure, less the packages that are not libraries
pkgs=$(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends \
	--no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
	"$py-minimal" "lib$py-stdlib" | grep -E '^(lib|python3)[^ <]*$' | sort -u)
(cd "$apt_dir/cache" && apt-get "${apt_opts[@]}" -qq download $pkgs)
for deb in "$apt_dir"/cache/*.deb; do
	dpkg-deb -x "$deb" "$dir"
done
lib=$dir/usr/lib/x86_64-linux-gnu
patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" --force-rpath \
	--set-rpath "$lib" "$dir/usr/bin/$py"
ln -s "usr/bin/$py" "$dir/python"
rm -rf "$apt_dir"
"$PYTHON" -m pip install -q --disable-pip-version-check --target "$dir/site" \
	--python-version "3.$ver" --implementation cp --only-binary=:all: \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
	--platform manylinux2014_x86_64 "$IPYKERNEL" "$JUPYTER_CLIENT" \
	>"$dir/pip.log" 2>&1 || { cat "$dir/pip.log" >&2; exit 1; }
rm -f "$dir/pip.log"
if ! works; then
	echo "python-remote-exec: $dir/python does not run, or has no sys.remote_exec" >&2
	exit 1
fi
echo "$dir/python"
