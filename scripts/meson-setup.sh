#!/usr/bin/env bash
# meson-setup.sh DIR CC [MESON OPTIONS...]: sets up a Meson build folder
# with compiler CC, quietly: Meson's output goes to DIR/meson-logs/setup.txt
# and is shown only when the setup fails.
set -euo pipefail
dir=$1 cc=$2
shift 2
log=$(mktemp)
wipe=()
# a folder left half set up by an interrupted run is set up anew
[ -d "$dir/meson-private" ] && wipe=(--wipe)
# clang's builds compile the C++ test stand-ins with clang++ too
cxx=${CXX:-}
if [ -z "$cxx" ] && [ "$(basename "$cc")" = clang ] && command -v clang++ >/dev/null; then
	cxx=clang++
fi
if env CC="$cc" ${cxx:+CXX="$cxx"} "${MESON:-meson}" setup "${wipe[@]}" "$dir" "$@" >"$log" 2>&1; then
	mv "$log" "$dir/meson-logs/setup.txt"
else
	cat "$log" >&2
	rm -f "$log"
	echo "meson-setup: setting up $dir with CC=$cc failed (above)" >&2
	exit 1
fi
