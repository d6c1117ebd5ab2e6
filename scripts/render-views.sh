#!/usr/bin/env bash
# Renders every notebook view (Release, explain(), the trace report, the
# cluster reports) on the simulated driver, as tests/views/views.py makes
# them, and photographs each in headless Chromium at a notebook's width
# (900 px) into docs/img/view-*.png, which the docs show. Installs
# Debian's chromium (and python3-pil, which trims the pictures) when they
# are missing and this runs as root. Not part of
# `make check` (which checks the same HTML: tests/views).
#   usage: bash scripts/render-views.sh [BUILD]     (after make all)
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
OUT=$(mktemp -d /tmp/gpr-views-XXXXXX)
state="views-$$"
trap 'rm -rf "$OUT"; rm -f /dev/shm/gpureclaim-sim-*-"$state"' EXIT

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ] || ! /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
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
GPURECLAIM_CUDA_LIBRARY="$ROOT/$BUILD/sim/libcuda.so.1" \
GPURECLAIM_NVML_LIBRARY="$ROOT/$BUILD/sim/libnvidia-ml.so.1" \
GPURECLAIM_BIN="$ROOT/$BUILD/gpureclaim" \
GPR_TRACE_SAMPLE="$ROOT/$BUILD/tests/trace/test_trace_log" \
GPR_FAKES_BUILD="$ROOT/$BUILD/tests" \
PYTHONPATH="$ROOT/$BUILD/python:$ROOT/tests/python/fakes" \
	"$PYTHON" "$ROOT/tests/views/views.py" "$OUT"

mkdir -p "$ROOT/docs/img"
for page in "$OUT"/*-page.html; do
	name=$(basename "$page" -page.html)
	# tall enough for the view; the blank below it is cut off
	"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--force-device-scale-factor=1 --window-size=932,2400 \
		--screenshot="$OUT/$name.png" "file://$page" 2>/dev/null
	/usr/bin/python3 - "$OUT/$name.png" "$ROOT/docs/img/view-$name.png" <<'PY'
import sys
from PIL import Image, ImageChops
img = Image.open(sys.argv[1]).convert("RGB")
bg = Image.new("RGB", img.size, (255, 255, 255))
box = ImageChops.difference(img, bg).getbbox()
bottom = min(img.height, (box[3] if box else img.height) + 16)
img.crop((0, 0, img.width, bottom)).save(sys.argv[2], optimize=True)
PY
	echo "render-views: docs/img/view-$name.png"
done
