#!/usr/bin/env bash
# The injection library in a setuid program (docs/trace.md): a copy of
# setuid_host made setuid root and run as nobody gets AT_SECURE; the
# library must then load nothing the environment names (a planted
# GPURECLAIM_CUPTI_LIBRARY / GPURECLAIM_CUDA_LIBRARY), write no log, and
# say in one line that the program runs untraced.
# Needs root and a filesystem without nosuid; skips otherwise.
# Run by `meson test --suite trace`, which sets the paths of what it built:
# TRACER (libgpureclaim_trace.so), SETUID_HOST, PLANTED (libplanted.so).
set -u
INJ=$TRACER
HOST=$SETUID_HOST
if [ "$(id -u)" != 0 ]; then
	echo "test_setuid.sh: skipped (needs root to make a setuid binary)"
	exit 0
fi
T=$(mktemp -d /tmp/gpr-setuid-XXXXXX)
trap 'rm -rf "$T"' EXIT
chmod 755 "$T"
cp "$HOST" "$T/host" && cp "$INJ" "$T/inj.so" && cp "$PLANTED" "$T/planted.so"
chown root:root "$T/host" && chmod 4755 "$T/host"
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

cd "$T" || exit 1
env GPURECLAIM_CUPTI_LIBRARY="$T/planted.so" GPURECLAIM_CUDA_LIBRARY="$T/planted.so" \
	GPURECLAIM_TRACE_OUTPUT="$T/out.trace" PLANTED_MARK="$T/planted-ran" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$T/host" "$T/inj.so" >o 2>e
rc=$?
if ! grep -q "ruid=65534 euid=0 secure=1" o; then
	echo "test_setuid.sh: skipped (the setuid bit had no effect here: $(cat o e))"
	exit 0
fi
check "setuid: the program runs on (exit 0)" '[ $rc -eq 0 ]'
check "setuid: the planted library was never loaded" '[ ! -e planted-ran ]'
check "setuid: no log written" '[ ! -e out.trace ] && ! ls out.trace.* >/dev/null 2>&1'
check "setuid: said in one line" '[ "$(wc -l <e)" -eq 1 ] && grep -q "^gpureclaim-trace: not tracing a setuid or setgid program" e'
# the same host without the setuid bit: traced as usual (the planted
# library is then a user's own choice, loaded as the user)
chmod 0755 "$T/host"
env GPURECLAIM_CUPTI_LIBRARY="$T/planted.so" PLANTED_MARK="$T/planted-ran2" \
	GPURECLAIM_TRACE_OUTPUT="$T/out2.trace" "$T/host" "$T/inj.so" >o2 2>e2
check "not setuid: the named library is loaded" '[ -e planted-ran2 ]'
echo "test_setuid.sh: $fails failures"
[ $fails -eq 0 ]
