#!/usr/bin/env bash
# Renders every notebook view (Release, explain(), the trace report, the
# cluster reports) on the simulated driver, as tests/views/views.py makes
# them, and photographs each in headless Chromium at a notebook's width
# (900 px) into docs/img/view-*.png, which the docs show. Beside each
# picture, docs/img/view-NAME.png.sha256 holds the hash of the page it was
# photographed from (its markup, with the digits of its text masked: times
# and pids change from run to run, the layout does not), so --check can
# tell a picture that is older than what the views render now, without
# Chromium and whatever the files' times say.
#
# Installs Debian's chromium (and python3-pil, which trims the pictures)
# when they are missing and this runs as root. Not part of `make check`
# (which checks the same HTML: tests/views).
#
#   usage: bash scripts/render-views.sh [--check] [BUILD] [NAME...]
#     BUILD   a Meson build folder after make all (default build)
#     NAME    only these views (release, explain, trace, cluster-release,
#             cluster-explain, cluster-ps); default all
#     --check photograph nothing: exit 1, naming each, when a picture in
#             docs/img is missing, has no hash, or is older than its page
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
check=0
if [ "${1:-}" = --check ]; then
	check=1
	shift
fi
build=build
if [ $# -gt 0 ] && [ -d "$ROOT/$1" -o -d "$1" ] && [ -f "$(cd "$ROOT" && cd "$1" && pwd)/build.ninja" ]; then
	build=$1
	shift
fi
# a Meson build folder: relative to the checkout's root, or absolute
BUILD=$(cd "$ROOT" && cd "$build" && pwd)
OUT=$(mktemp -d /tmp/gpr-views-XXXXXX)
state="views-$$"
trap 'rm -rf "$OUT"; rm -f /dev/shm/gpureclaim-sim-*-"$state"' EXIT

browser=$(command -v chromium || command -v chromium-browser || true)
if [ $check = 0 ] && { [ -z "$browser" ] || ! /usr/bin/python3 -c 'import PIL' 2>/dev/null; }; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq chromium fonts-dejavu-core \
			python3-pil >/dev/null
		browser=$(command -v chromium)
	else
		echo "render-views: needs Debian's chromium and python3-pil" \
			"(apt-get install chromium python3-pil, as root)" >&2
		exit 1
	fi
fi

GPURECLAIM_SIM="gpus=2;state=$state" \
GPURECLAIM_CUDA_LIBRARY="$BUILD/sim/libcuda.so.1" \
GPURECLAIM_NVML_LIBRARY="$BUILD/sim/libnvidia-ml.so.1" \
GPURECLAIM_BIN="$BUILD/cli/gpureclaim" \
GPR_TRACE_SAMPLE="$BUILD/tests/trace/test_trace_log" \
GPR_FAKES_BUILD="$BUILD/tests/fixtures" \
PYTHONPATH="$BUILD/python:$ROOT/tests/python/fakes" \
	"$PYTHON" "$ROOT/tests/views/views.py" "$OUT" >/dev/null

# The hash of a page: its markup as it is, the digits, temporary paths and
# hexadecimal names of its text (not of its attributes: widths, colours)
# masked.
page_hash() {
	/usr/bin/python3 - "$1" <<'PY'
import hashlib, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
def mask(text):
    # temporary paths (a post-mortem's file) and hexadecimal names (the
    # cluster's worker ids) change from run to run too
    text = re.sub(r"/tmp/[^\s<'\"()]*", "/tmp/T", text)
    text = re.sub(r"\b[0-9a-f][0-9a-f-]{7,}\b", "H", text)
    return re.sub(r"[0-9]+", "0", text)
masked = re.sub(r">([^<]*)<", lambda m: ">" + mask(m.group(1)) + "<", html)
print(hashlib.sha256(masked.encode()).hexdigest())
PY
}

mkdir -p "$ROOT/docs/img"
stale=0
for page in "$OUT"/*-page.html; do
	name=$(basename "$page" -page.html)
	if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then
		continue
	fi
	png="$ROOT/docs/img/view-$name.png"
	hash=$(page_hash "$page")
	if [ $check = 1 ]; then
		if [ ! -f "$png" ] || [ ! -f "$png.sha256" ] ||
			[ "$(cat "$png.sha256")" != "$hash" ]; then
			echo "render-views: docs/img/view-$name.png is older than" \
				"the view renders now (bash scripts/render-views.sh $name)" >&2
			stale=1
		fi
		continue
	fi
	# tall enough for the view; the blank below it is cut off
	"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--force-device-scale-factor=1 --window-size=932,2400 \
		--screenshot="$OUT/$name.png" "file://$page" 2>/dev/null
	/usr/bin/python3 - "$OUT/$name.png" "$png" <<'PY'
import sys
from PIL import Image, ImageChops
img = Image.open(sys.argv[1]).convert("RGB")
bg = Image.new("RGB", img.size, (255, 255, 255))
box = ImageChops.difference(img, bg).getbbox()
bottom = min(img.height, (box[3] if box else img.height) + 16)
img.crop((0, 0, img.width, bottom)).save(sys.argv[2], optimize=True)
PY
	echo "$hash" >"$png.sha256"
	echo "render-views: docs/img/view-$name.png"
done
if [ $check = 1 ] && [ $stale = 0 ]; then
	echo "render-views: every picture in docs/img is what the views render"
fi
exit $stale
