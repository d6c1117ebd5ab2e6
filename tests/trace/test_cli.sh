#!/usr/bin/env bash
# `gpureclaim trace` and `gpureclaim report` without a GPU: exit codes,
# output left alone, backends and their discovery errors, an end-to-end
# trace through the fake CUPTI and one through the interposer on the
# simulated driver, the report's JSON and exports (validated by Python).
# Usage: test_cli.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
SRC=$(pwd)
GPR=$B/gpureclaim
FAKE=$B/tests/trace/libcupti-fake.so
APP=$B/tests/trace/test_inject
PY=${PYTHON:-python3}
T=$(mktemp -d /tmp/gpr-trace-cli-XXXXXX)
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# The injection library must be found beside the CLI.
[ -f "$B/libgpureclaim_trace.so" ] || { echo "no $B/libgpureclaim_trace.so"; exit 1; }
cd "$T" || exit 1
# A sanitizer build's tracer needs its runtimes first in every program it
# is preloaded into (`gpureclaim trace` keeps them first); those programs
# (sh, python3) are not ours: no leak report for them.
SAN_PRELOAD=$(ldd "$B/libgpureclaim_trace.so" | awk '/lib(a|ub)san\.so/ {print $3}' | sort | paste -sd:)
if [ -n "$SAN_PRELOAD" ]; then
	export LD_PRELOAD=$SAN_PRELOAD
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi

# 1. exit code and output of the traced command unchanged
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- sh -c 'echo out; echo err >&2; exit 3' >o1 2>e1
rc=$?
check "trace: exit code 3 propagates" '[ $rc -eq 3 ]'
check "trace: stdout untouched" '[ "$(cat o1)" = out ]'
check "trace: stderr of the command kept" 'grep -qx err e1'
check "trace: the interposer by default, CUPTI as its fallback" "grep -q 'gpureclaim trace: interposer $B/libgpureclaim_trace.so; CUPTI fallback $FAKE' e1"
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -- true 2>e1b
check "trace --backend cupti: says which CUPTI" "grep -q 'gpureclaim trace: CUPTI $FAKE' e1b"
check "trace: no CUDA, no log, said so" 'grep -q "no trace was written" e1'

# 2. killed by a signal: 128 + signal
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -- sh -c 'kill -TERM $$' 2>/dev/null
rc=$?
check "trace: killed by SIGTERM gives 143" '[ $rc -eq 143 ]'

# 3. no CUPTI: --backend cupti refuses, unless --allow-untraced; auto
# runs with the interposer alone
GPURECLAIM_CUPTI_LIBRARY=/nonexistent/libcupti.so "$GPR" trace --backend cupti -- sh -c 'touch ran; exit 3' 2>e3
rc=$?
check "trace: no CUPTI exits 1" '[ $rc -eq 1 ]'
check "trace: no CUPTI, command not run" '[ ! -e ran ]'
check "trace: no CUPTI message" 'grep -q "no CUPTI library found" e3'
GPURECLAIM_CUPTI_LIBRARY=/nonexistent/libcupti.so "$GPR" trace --backend cupti --allow-untraced -- sh -c 'exit 3' 2>/dev/null
rc=$?
check "trace: --allow-untraced runs it, exit 3" '[ $rc -eq 3 ]'
GPURECLAIM_CUPTI_LIBRARY=/nonexistent/libcupti.so "$GPR" trace -- sh -c 'exit 4' 2>e3b
rc=$?
check "trace: auto without CUPTI runs, interposer alone" '[ $rc -eq 4 ] && grep -q "no CUPTI found for a fallback" e3b'
"$GPR" trace --backend nope -- true 2>e3c
rc=$?
check "trace: a bad --backend is a usage error" '[ $rc -eq 2 ] && grep -q "auto, interpose or cupti" e3c'
"$GPR" trace --dormant --backend cupti -- true 2>e3d
rc=$?
check "trace: --dormant with cupti is a usage error" '[ $rc -eq 2 ]'
# the preload comes first, after a sanitizer's runtime, once
"$GPR" trace -q --backend interpose -- sh -c 'echo "$LD_PRELOAD"' >pre1
check "trace: LD_PRELOAD names the tracer" "grep -q '$B/libgpureclaim_trace.so' pre1"
LD_PRELOAD="${SAN_PRELOAD:+$SAN_PRELOAD:}/nonexistent/libother.so" "$GPR" trace -q --backend interpose -- sh -c 'echo "$LD_PRELOAD"' >pre2 2>/dev/null
check "trace: an earlier LD_PRELOAD is kept, after the tracer" "grep -q '$B/libgpureclaim_trace.so:/nonexistent/libother.so' pre2"
# a set-user-ID program ignores LD_PRELOAD: auto uses CUPTI, says so
cp "$(type -P true)" ./suid-true && chmod u+s ./suid-true
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- ./suid-true 2>e3e
check "trace: a setuid program gets CUPTI" 'grep -q "set-user/group-ID.*using CUPTI" e3e && grep -q "gpureclaim trace: CUPTI" e3e'

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
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -o app.trace -- "$APP" --cuda-app >o6 2>e6
rc=$?
check "trace app: exit code 5" '[ $rc -eq 5 ]'
check "trace app: stdout untouched" '[ "$(cat o6)" = app-out ]'
check "trace app: log written, mode 0600" '[ "$(stat -c %a app.trace)" = 600 ]'
check "trace app: summary printed" 'grep -q "Peak driver memory: 80.0 KiB" e6'
check "trace app: caller is the app" 'grep -q "test_inject" e6'
# a second run replaces the old log
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -q -o app.trace -- "$APP" --cuda-app >/dev/null 2>e6b
rc=$?
check "trace app: rerun replaces the log" '[ $rc -eq 5 ] && [ -s app.trace ] && ! ls app.trace.* >/dev/null 2>&1'
"$GPR" report app.trace --json >app.json
check "report app: 20 records, by CUPTI" "$PY -c 'import json,sys; d=json.load(open(\"app.json\")); sys.exit(d[\"records\"]!=20 or d[\"backend\"]!=\"cupti\")'"

# 7. report of the synthetic sample: text, JSON, exports
"$B/tests/trace/test_trace_log" --sample s.trace
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
"$B/tests/trace/test_trace_log" --hostile h.trace
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

# 7c. RMM's replay log: the golden files, written by hand from RMM's
# format (tests/trace/golden), one per GPU; read back as RMM reads it
"$B/tests/trace/test_trace_log" --rmm-sample rmm.trace
TZ=UTC "$GPR" report rmm.trace --rmm-csv replay.csv --json >rmm.json 2>e7c
rc=$?
check "report --rmm-csv: exit 0, one file per GPU" '[ $rc -eq 0 ] && [ -f replay.dev0.csv ] && [ -f replay.dev1.csv ] && [ ! -e replay.csv ]'
check "report --rmm-csv: GPU 0 as the golden file" "cmp replay.dev0.csv $SRC/tests/trace/golden/rmm.dev0.csv"
check "report --rmm-csv: GPU 1 as the golden file" "cmp replay.dev1.csv $SRC/tests/trace/golden/rmm.dev1.csv"
check "report --rmm-csv: says what it left out" 'grep -q "1 frees of memory allocated before tracing began left out" e7c'
check "report --rmm-csv: RMM's parser and replay agree with the report" "$PY $SRC/tests/trace/check_rmm.py rmm.json replay.dev0.csv replay.dev1.csv >/dev/null 2>pyerr || { cat pyerr; false; }"
# one GPU: the file as named
"$GPR" report app.trace --rmm-csv one.csv --json >one.json 2>/dev/null
check "report --rmm-csv: one GPU, one file" "[ -f one.csv ] && $PY $SRC/tests/trace/check_rmm.py one.json one.csv >/dev/null"

# 7d. a large log: the size warning, --max-events, the progress line
"$B/tests/trace/test_trace_log" --big big.trace 250000
"$GPR" report big.trace --chrome full.json >/dev/null 2>e7d
check "report: a timeline over 100 MB is said" 'grep -q "the timeline will be about .*--max-events" e7d'
check "report: no progress line off a terminal" '! grep -q $(printf "\r") e7d'
"$GPR" report big.trace --chrome capped.json --max-events 20000 >/dev/null 2>e7e
rc=$?
check "report --max-events: exit 0, says so, no warning" '[ $rc -eq 0 ] && grep -q "calls merged into counters" e7e && ! grep -q "will be about" e7e'
check "report --max-events: events, peaks, last values" "$PY $SRC/tests/trace/check_timeline.py full.json capped.json 20000 >/dev/null 2>pyerr || { cat pyerr; false; }"
"$GPR" report big.trace --max-events 20000 >/dev/null 2>e7f
rc=$?
check "report: --max-events without --chrome is a usage error" '[ $rc -eq 2 ]'
"$GPR" report big.trace --chrome x.json --max-events 10 >/dev/null 2>e7g
rc=$?
check "report: --max-events below 1000 is a usage error" '[ $rc -eq 2 ]'
if command -v script >/dev/null 2>&1; then
	script -qec "$GPR report big.trace --chrome full2.json >/dev/null" /dev/null >tty.out 2>&1
	check "report: a progress line on a terminal after a second" 'grep -q "gpureclaim report: big.trace: .*%" tty.out'
else
	bad "report: no script(1) to give the report a terminal"
fi

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
CHURN=$B/bench/trace_churn
if [ -x "$CHURN" ]; then
	GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -q -o churn.trace -- "$CHURN" fake 500 >/dev/null 2>&1
	check "trace: churn of 500 pairs records 1000 calls" '[ "$(calls churn.trace)" = 1000 ]'
	GPURECLAIM_TRACE_SUBSCRIBE_ONLY=1 GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -q -o sub.trace -- "$CHURN" fake 500 >/dev/null 2>&1
	check "trace: GPURECLAIM_TRACE_SUBSCRIBE_ONLY records no call" '[ "$(calls sub.trace)" = 0 ]'
	# GPURECLAIM_TRACE_INJECT_ONLY never touches CUPTI: a busy CUPTI goes unnoticed
	FAKE_CUPTI_BUSY=holder GPURECLAIM_TRACE_INJECT_ONLY=1 GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -q -o inj.trace -- "$CHURN" fake 500 >/dev/null 2>e9
	check "trace: GPURECLAIM_TRACE_INJECT_ONLY records no call" '[ "$(calls inj.trace)" = 0 ]'
	check "trace: GPURECLAIM_TRACE_INJECT_ONLY leaves CUPTI alone" '! grep -q "already in use" e9'
	FAKE_CUPTI_BUSY=holder GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -q -o busy.trace -- "$CHURN" fake 500 >/dev/null 2>e10
	check "trace: a busy CUPTI is reported" 'grep -q "already in use by another tool (holder)" e10'
	# the in-process A/B of bench/trace_ab.py: 4 traced blocks of 100+20 pairs recorded, 4 paused not
	GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -q -o ab.trace -- "$CHURN" fake-ab 100 4 >ab.out 2>/dev/null
	check "trace: fake-ab prints both medians" 'grep -q "^traced .* us/pair, paused .* us/pair (medians of 4 blocks of 100 pairs each)" ab.out'
	check "trace: fake-ab records only the traced blocks" '[ "$(calls ab.trace)" = 960 ]'
	GPURECLAIM_CUPTI_LIBRARY=$FAKE "$CHURN" fake-ab 100 4 >/dev/null 2>e11
	rc=$?
	check "trace: fake-ab untraced says so" '[ $rc -eq 2 ] && grep -q "run this under .gpureclaim trace." e11'
else
	bad "trace: $CHURN not built"
fi

# 10. the interposer on the simulated driver, no CUPTI anywhere: the C
# example (the core's own dlopen/dlsym of the driver) and the seed
# scenario in Python (the fake torch and cupy call the sim through ctypes)
SIMENV=(GPURECLAIM_SIM="gpus=2;state=trace-cli-$$" LD_LIBRARY_PATH="$B/sim"
	GPURECLAIM_CUDA_LIBRARY="$B/sim/libcuda.so.1"
	GPURECLAIM_NVML_LIBRARY="$B/sim/libnvidia-ml.so.1"
	GPURECLAIM_CUPTI_LIBRARY=/nonexistent/libcupti.so)
env "${SIMENV[@]}" "$GPR" trace -o demo.trace -- "$B/examples/release_demo" >o10 2>e10
rc=$?
check "sim: release_demo traced, exit 0" '[ $rc -eq 0 ] && grep -q "released 1.5 GiB" o10'
check "sim: summary by the interposer" 'grep -q "Recorded by the interposer" e10 && grep -q "held at the end: 256.0 MiB" e10'
"$GPR" report demo.trace --json >demo.json
check "sim: 4 allocations, 3 frees, 2 contexts" "$PY -c '
import json
d = json.load(open(\"demo.json\"))
ops = {o[\"op\"]: o[\"calls\"] for o in d[\"operations\"]}
assert ops == {\"cuMemAlloc_v2\": 4, \"cuMemFree_v2\": 3, \"context_created\": 2}, ops
assert d[\"backend\"] == \"interpose\" and d[\"held_at_end_bytes\"] == 256 << 20, d
assert {x[\"device\"] for x in d[\"devices\"]} == {0, 1}, d[\"devices\"]
' 2>pyerr || { cat pyerr; false; }"
if [ -d "$B/python/gpureclaim" ]; then
	env "${SIMENV[@]}" PYTHONPATH="$B/python:$SRC/tests/python/fakes" \
		"$GPR" trace -o seed.trace -- "$PY" "$SRC/examples/seed_scenario.py" >o11 2>e11
	rc=$?
	check "sim: the seed scenario traced, its output kept" '[ $rc -eq 0 ] && grep -q "^after gpureclaim.release(): 0.500 GiB (1.000 GiB returned)" o11'
	check "sim: the seed scenario's summary" 'grep -q "Peak driver memory: 2.0 GiB" e11 && grep -q "held at the end: 0 B" e11'
else
	bad "sim: $B/python not built"
fi

cd / && rm -rf "$T"
echo "test_cli.sh: $fails failures"
[ $fails -eq 0 ]
