#!/usr/bin/env bash
# `gpureclaim trace` and `gpureclaim report` without a GPU: exit codes,
# output left alone, CUPTI discovery errors, an end-to-end trace through
# the fake CUPTI, the report's JSON and exports (validated by Python).
# Run from the source root by `meson test --suite trace`, which sets the
# paths of what it built: GPR (the command), TRACER
# (libgpureclaim_trace.so), FAKE_CUPTI, APP (test_inject), LOGTOOL
# (test_trace_log), CHURN (bench/trace_churn), PYTHON.
set -u
SRC=$(pwd)
FAKE=$FAKE_CUPTI
PY=${PYTHON:-python3}
T=$(mktemp -d /tmp/gpr-trace-cli-XXXXXX)
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# The command finds the injection library by itself (in a build folder:
# the trace part's; installed: its libdir or the Python package).
unset GPURECLAIM_TRACE_LIBRARY
[ -f "$TRACER" ] || { echo "no $TRACER"; exit 1; }
cd "$T" || exit 1

# 1. exit code and output of the traced command unchanged
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- sh -c 'echo out; echo err >&2; exit 3' >o1 2>e1
rc=$?
check "trace: exit code 3 propagates" '[ $rc -eq 3 ]'
check "trace: stdout untouched" '[ "$(cat o1)" = out ]'
check "trace: stderr of the command kept" 'grep -qx err e1'
check "trace: says which CUPTI" "grep -q 'gpureclaim trace: CUPTI $FAKE' e1"
check "trace: no CUDA, no log, said so" 'grep -q "no trace was written" e1'

# 2. killed by a signal: 128 + signal
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -- sh -c 'kill -TERM $$' 2>/dev/null
rc=$?
check "trace: killed by SIGTERM gives 143" '[ $rc -eq 143 ]'

# 3. no CUPTI: refuse, unless --allow-untraced
GPURECLAIM_CUPTI_LIBRARY=/nonexistent/libcupti.so "$GPR" trace -- sh -c 'touch ran; exit 3' 2>e3
rc=$?
check "trace: no CUPTI exits 1" '[ $rc -eq 1 ]'
check "trace: no CUPTI, command not run" '[ ! -e ran ]'
check "trace: no CUPTI message" 'grep -q "no CUPTI library found" e3'
GPURECLAIM_CUPTI_LIBRARY=/nonexistent/libcupti.so "$GPR" trace --allow-untraced -- sh -c 'exit 3' 2>/dev/null
rc=$?
check "trace: --allow-untraced runs it, exit 3" '[ $rc -eq 3 ]'

# 4. command not found, usage errors
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -- /nonexistent/cmd 2>/dev/null
rc=$?
check "trace: missing command gives 127" '[ $rc -eq 127 ]'
"$GPR" trace 2>/dev/null
rc=$?
check "trace: no command is a usage error" '[ $rc -eq 2 ]'
"$GPR" trace --help >h
check "trace --help has examples" 'grep -q EXAMPLES h'

# 5. -o over a file that is not a trace log: refused, file intact
echo precious >keep.txt
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -o keep.txt -- true 2>e5
rc=$?
check "trace: will not overwrite a non-log" '[ $rc -eq 1 ] && [ "$(cat keep.txt)" = precious ]'

# 6. end to end: a "CUDA program" that loads the injection as libcuda would
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -o app.trace -- "$APP" --cuda-app >o6 2>e6
rc=$?
check "trace app: exit code 5" '[ $rc -eq 5 ]'
check "trace app: stdout untouched" '[ "$(cat o6)" = app-out ]'
check "trace app: log written, mode 0600" '[ "$(stat -c %a app.trace)" = 600 ]'
check "trace app: summary printed" 'grep -q "Peak driver memory: 80.0 KiB" e6'
check "trace app: caller is the app" 'grep -q "test_inject" e6'
# a second run replaces the old log
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -o app.trace -- "$APP" --cuda-app >/dev/null 2>e6b
rc=$?
check "trace app: rerun replaces the log" '[ $rc -eq 5 ] && [ -s app.trace ] && ! ls app.trace.* >/dev/null 2>&1'
"$GPR" report app.trace --json >app.json
check "report app: 20 records" "$PY -c 'import json,sys; d=json.load(open(\"app.json\")); sys.exit(d[\"records\"]!=20)'"

# 7. report of the synthetic sample: text, JSON, exports
"$LOGTOOL" --sample s.trace
"$GPR" report s.trace >r.txt
rc=$?
check "report: text exit 0" '[ $rc -eq 0 ]'
check "report: text has the peak" 'grep -q "Peak driver memory: 2.0 GiB" r.txt'
"$GPR" report s.trace --json --chrome c.json --svg p.svg >r.json
rc=$?
check "report: json + exports exit 0" '[ $rc -eq 0 ]'
check "report: exports validated by python" "$PY $SRC/tests/trace/check_exports.py r.json c.json p.svg >/dev/null 2>pyerr || { cat pyerr; false; }"

# 7b. hostile names (C1 CSI as UTF-8 and as a raw byte, ESC, DEL, bad
# UTF-8): the text shows them as '?', the JSON escapes them and parses
"$LOGTOOL" --hostile h.trace
"$GPR" report h.trace >h.txt
rc=$?
check "report hostile: text exit 0" '[ $rc -eq 0 ]'
check "report hostile: text has no control, valid UTF-8" "$PY -c '
import sys
b = open(\"h.txt\", \"rb\").read()
assert b\"\\x9b\" not in b and b\"\\x1b\" not in b, \"raw CSI/ESC\"
s = b.decode(\"utf-8\")
bad = [c for c in s if (ord(c) < 0x20 and c != \"\\n\") or 0x7f <= ord(c) <= 0x9f]
assert not bad, bad
assert \"evil?31m?2J?[0m? caf\\u00e9\" in s, s
' 2>pyerr || { cat pyerr; false; }"
"$GPR" report h.trace --json >h.json
rc=$?
check "report hostile: json exit 0" '[ $rc -eq 0 ]'
check "report hostile: json parses, escapes, round-trips" "$PY -c '
import json
raw = open(\"h.json\", \"rb\").read()
assert b\"\\x9b\" not in raw and b\"\\x1b\" not in raw, \"raw control\"
d = json.loads(raw.decode(\"utf-8\"))
libs = [l[\"library\"] for l in d[\"libraries\"]]
assert \"evil\\u009b31m\\ufffd2J\\x1b[0m\\x7f caf\\u00e9\" in libs, libs
assert json.loads(json.dumps(d)) == d
' 2>pyerr || { cat pyerr; false; }"

# 8. report errors
"$GPR" report missing.trace 2>e8
rc=$?
check "report: missing file exits 1" '[ $rc -eq 1 ] && grep -q "missing.trace" e8'
head -c 100 s.trace >cut.trace
"$GPR" report cut.trace 2>e8
rc=$?
check "report: truncated log exits 1 with reason" '[ $rc -eq 1 ] && grep -q truncated e8'
"$GPR" report 2>/dev/null
rc=$?
check "report: no file is a usage error" '[ $rc -eq 2 ]'
"$GPR" report s.trace --top 0 2>/dev/null
rc=$?
check "report: bad --top is a usage error" '[ $rc -eq 2 ]'

# 9. the churn through the fake CUPTI: every call recorded; with
# GPURECLAIM_TRACE_SUBSCRIBE_ONLY (CUPTI held, no callback) or
# GPURECLAIM_TRACE_INJECT_ONLY (CUPTI not loaded) none is
calls() { "$GPR" report "$1" --json | "$PY" -c 'import json, sys; print(sum(o["calls"] for o in json.load(sys.stdin)["operations"]))'; }
if [ -x "$CHURN" ]; then
	GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -o churn.trace -- "$CHURN" fake 500 >/dev/null 2>&1
	check "trace: churn of 500 pairs records 1000 calls" '[ "$(calls churn.trace)" = 1000 ]'
	GPURECLAIM_TRACE_SUBSCRIBE_ONLY=1 GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -o sub.trace -- "$CHURN" fake 500 >/dev/null 2>&1
	check "trace: GPURECLAIM_TRACE_SUBSCRIBE_ONLY records no call" '[ "$(calls sub.trace)" = 0 ]'
	# GPURECLAIM_TRACE_INJECT_ONLY never touches CUPTI: a busy CUPTI goes unnoticed
	FAKE_CUPTI_BUSY=holder GPURECLAIM_TRACE_INJECT_ONLY=1 GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -o inj.trace -- "$CHURN" fake 500 >/dev/null 2>e9
	check "trace: GPURECLAIM_TRACE_INJECT_ONLY records no call" '[ "$(calls inj.trace)" = 0 ]'
	check "trace: GPURECLAIM_TRACE_INJECT_ONLY leaves CUPTI alone" '! grep -q "already in use" e9'
	FAKE_CUPTI_BUSY=holder GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -o busy.trace -- "$CHURN" fake 500 >/dev/null 2>e10
	check "trace: a busy CUPTI is reported" 'grep -q "already in use by another tool (holder)" e10'
	# the in-process A/B of bench/trace_ab.py: 4 traced blocks of 100+20 pairs recorded, 4 paused not
	GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -o ab.trace -- "$CHURN" fake-ab 100 4 >ab.out 2>/dev/null
	check "trace: fake-ab prints both medians" 'grep -q "^traced .* us/pair, paused .* us/pair (medians of 4 blocks of 100 pairs each)" ab.out'
	check "trace: fake-ab records only the traced blocks" '[ "$(calls ab.trace)" = 960 ]'
	GPURECLAIM_CUPTI_LIBRARY=$FAKE "$CHURN" fake-ab 100 4 >/dev/null 2>e11
	rc=$?
	check "trace: fake-ab untraced says so" '[ $rc -eq 2 ] && grep -q "run this under .gpureclaim trace." e11'
else
	bad "trace: $CHURN not built"
fi

cd / && rm -rf "$T"
echo "test_cli.sh: $fails failures"
[ $fails -eq 0 ]
