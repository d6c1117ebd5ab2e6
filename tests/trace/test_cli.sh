#!/usr/bin/env bash
# `gpureclaim trace` and `gpureclaim report` without a GPU: exit codes,
# output left alone, backends and their discovery errors, an end-to-end
# trace through the fake CUPTI and one through the interposer on the
# simulated driver, the report's JSON and exports (validated by Python).
# Run from the source root by `meson test --suite trace`, which sets the
# paths of what it built: GPR (the command), TRACER
# (libgpureclaim_trace.so), FAKE_CUPTI, APP (test_inject), LOGTOOL
# (test_trace_log), CHURN (bench/trace_churn), TRACE_GEN (bench/trace_gen),
# PYTHON, and for the interposer on the simulated driver SIM_DIR (the
# sim's libraries), RELEASE_DEMO (examples/release_demo) and PY_PATH (the
# built package).
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
# A sanitizer build's tracer needs its runtimes first in every program it
# is preloaded into (`gpureclaim trace` keeps them first); those programs
# (sh, python3) are not ours: no leak report for them.
SAN_PRELOAD=$(ldd "$TRACER" | awk '/lib(a|ub)san\.so/ {print $3}' | sort | paste -sd:)
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
check "trace: which tracer and CUPTI only with --verbose" "! grep -q 'interposer\\|CUPTI' e1"
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -v -- true 2>e1v
check "trace -v: the interposer by default, CUPTI as its fallback" "grep -q 'gpureclaim trace: interposer $TRACER; CUPTI fallback $FAKE' e1v"
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -- true 2>e1b
check "trace --backend cupti: silent on which CUPTI" "! grep -q 'gpureclaim trace: CUPTI' e1b"
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --verbose --backend cupti -- true 2>e1b
check "trace --verbose --backend cupti: says which CUPTI" "grep -q 'gpureclaim trace: CUPTI $FAKE' e1b"
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
GPURECLAIM_CUPTI_LIBRARY=/nonexistent/libcupti.so "$GPR" trace -v -- sh -c 'exit 4' 2>e3b
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
check "trace: LD_PRELOAD names the tracer" "grep -q '$TRACER' pre1"
LD_PRELOAD="${SAN_PRELOAD:+$SAN_PRELOAD:}/nonexistent/libother.so" "$GPR" trace -q --backend interpose -- sh -c 'echo "$LD_PRELOAD"' >pre2 2>/dev/null
check "trace: an earlier LD_PRELOAD is kept, after the tracer" "grep -q '$TRACER:/nonexistent/libother.so' pre2"
# a set-user-ID program ignores LD_PRELOAD: auto uses CUPTI, says so
cp "$(type -P true)" ./suid-true && chmod u+s ./suid-true
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- ./suid-true 2>e3e
check "trace: a setuid program gets CUPTI, said without -v" 'grep -q "set-user/group-ID.*using CUPTI" e3e'
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -v -- ./suid-true 2>e3e
check "trace -v: a setuid program gets CUPTI" 'grep -q "set-user/group-ID.*using CUPTI" e3e && grep -q "gpureclaim trace: CUPTI" e3e'

# 4. command not found, usage errors
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -- /nonexistent/cmd 2>/dev/null
rc=$?
check "trace: missing command gives 127" '[ $rc -eq 127 ]'
"$GPR" trace 2>/dev/null
rc=$?
check "trace: no command is a usage error" '[ $rc -eq 2 ]'
"$GPR" trace --help >h
check "trace --help has examples" 'grep -q EXAMPLES h'

# 4b. an on/off switch with a value that is not 1/0/yes/no/true/false:
# refused in one line before the command runs
GPURECLAIM_TRACE_SELFTIME=maybe GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- sh -c 'touch ran4b' 2>e4b
rc=$?
check "trace: bad switch value is a usage error" '[ $rc -eq 2 ] && [ ! -e ran4b ]'
check "trace: bad switch value said in one line" '[ "$(wc -l <e4b)" -eq 1 ] && grep -q "GPURECLAIM_TRACE_SELFTIME=.maybe. is not one of 1/0/yes/no/true/false" e4b'
GPURECLAIM_TRACE_NO_SCHEDSTAT=Yes GPURECLAIM_TRACE_SELFTIME=0 GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -- true 2>/dev/null
rc=$?
check "trace: switch words in any case accepted" '[ $rc -eq 0 ]'
# the settings that take a word: a typo refused the same way
GPURECLAIM_TRACE_WAIT=perff GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- sh -c 'touch ran4c' 2>e4c
rc=$?
check "trace: a GPURECLAIM_TRACE_WAIT typo is refused in one line" '[ $rc -eq 2 ] && [ ! -e ran4c ] && [ "$(wc -l <e4c)" -eq 1 ] && grep -q "GPURECLAIM_TRACE_WAIT=.perff. is not one of perf, getrusage or none" e4c'
GPURECLAIM_TRACE_CLOCK=clock-gettime GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- sh -c 'touch ran4d' 2>e4d
rc=$?
check "trace: a GPURECLAIM_TRACE_CLOCK typo is refused in one line" '[ $rc -eq 2 ] && [ ! -e ran4d ] && [ "$(wc -l <e4d)" -eq 1 ] && grep -q "GPURECLAIM_TRACE_CLOCK=.clock-gettime. is not clock_gettime" e4d'
GPURECLAIM_TRACE_WAIT=getrusage GPURECLAIM_TRACE_CLOCK=clock_gettime GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -- true 2>/dev/null
rc=$?
check "trace: the settings' own words accepted" '[ $rc -eq 0 ]'

# 5. -o over a file that is not a trace log: refused, file intact
echo precious >keep.txt
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -o keep.txt -- true 2>e5
rc=$?
check "trace: will not overwrite a non-log" '[ $rc -eq 1 ] && [ "$(cat keep.txt)" = precious ]'
check "trace: the non-log named once" '[ "$(grep -c keep.txt e5)" -eq 1 ] && grep -q "^gpureclaim trace: /.*/keep.txt exists and is not a trace log$" e5'
ln -s keep.txt keep-link.trace
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -o keep-link.trace -- sh -c 'touch ran5' 2>e5
rc=$?
check "trace: -o on a symbolic link refused, not followed, CMD not run" '[ $rc -eq 1 ] && [ ! -e ran5 ] && [ -L keep-link.trace ] && [ "$(cat keep.txt)" = precious ] && grep -q "keep-link.trace is a symbolic link, not followed$" e5'
: >empty5.trace
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -o empty5.trace -- true 2>e5
rc=$?
check "trace: -o on an empty file replaces it" '[ $rc -eq 0 ] && [ ! -s e5 ]'

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
# the summary's last line names the command as it was run (its path, or
# its name from PATH) and the log as one word a shell reads back: quoted,
# escape sequences as $'\xHH', never raw on the terminal
esc=$(printf 'x y\033[2J.trace')
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -o "$esc" -- "$APP" --cuda-app >/dev/null 2>eq1
exp1="Full report: $GPR report \$'$T/x y\\x1b[2J.trace'"
check "trace: the log's path quoted, its escape shown as \\x1b, none raw" 'grep -qxF -- "$exp1" eq1 && ! grep -q "$(printf "\033")" eq1'
(PATH=$(dirname "$GPR"):$PATH GPURECLAIM_CUPTI_LIBRARY=$FAKE gpureclaim trace --backend cupti -o plain.trace -- "$APP" --cuda-app >/dev/null 2>eq2)
exp2="Full report: gpureclaim report $T/plain.trace"
check "trace: run from PATH, the report command is its name" 'grep -qxF -- "$exp2" eq2'
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -o "it's.trace" -- "$APP" --cuda-app >/dev/null 2>eq3
exp3="Full report: $GPR report '$T/it'\\''s.trace'"
check "trace: a path with a quote, in single quotes" 'grep -qxF -- "$exp3" eq3'

# 6b. names planted at the default log path (CMD's pid is the child's:
# the shell plants gpureclaim-$$.trace, then execs the CUDA program, which
# calls the fake CUPTI: --backend cupti). The summary must read the log the
# program really wrote, never the plant.
"$LOGTOOL" --sample planted-src.trace
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -- sh -c 'cp planted-src.trace gpureclaim-$$.trace; exec "$0" --cuda-app' "$APP" >/dev/null 2>e6c
rc=$?
check "trace planted log: exit code 5" '[ $rc -eq 5 ]'
check "trace planted log: summary of the real log" 'grep -q "Peak driver memory: 80.0 KiB" e6c && ! grep -q "Peak driver memory: 2.0 GiB" e6c'
check "trace planted log: says the name was taken" 'grep -q "gpureclaim trace: .*/gpureclaim-[0-9]*\.trace was already there; the log is .*/gpureclaim-[0-9]*\.trace\.[0-9]*" e6c'
check "trace planted log: points at the real log" 'grep -q "^Full report: $GPR report .*/gpureclaim-[0-9]*\.trace\.[0-9]*$" e6c'
rm -f gpureclaim-*.trace*
GPURECLAIM_CUPTI_LIBRARY=$FAKE timeout 20 "$GPR" trace --backend cupti -- sh -c 'mkfifo gpureclaim-$$.trace; exec "$0" --cuda-app' "$APP" >/dev/null 2>e6d
rc=$?
check "trace planted FIFO: no hang, exit code 5" '[ $rc -eq 5 ]'
check "trace planted FIFO: summary of the real log" 'grep -q "Peak driver memory: 80.0 KiB" e6d'
rm -f gpureclaim-*.trace*
# a FIFO given to report: one line, exit 1, at once
mkfifo fifo.trace
timeout 10 "$GPR" report fifo.trace >/dev/null 2>e6e
rc=$?
check "report FIFO: exit 1, no hang" '[ $rc -eq 1 ]'
check "report FIFO: one line saying why" '[ "$(wc -l <e6e)" -eq 1 ] && grep -q "fifo.trace.*not a regular file" e6e'
# a symbolic link named on the command line is followed (docs/trace.md)
ln -s app.trace link.trace
"$GPR" report link.trace --json >link.json
check "report: a symlink named by the user is read" "$PY -c 'import json,sys; sys.exit(json.load(open(\"link.json\"))[\"records\"]!=20)'"

# 6c. long paths are refused, never cut to another path
LONG=$($PY -c 'print("d/" * 2040 + "x.trace")')
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -o "$LONG" -- sh -c 'touch ran6c' 2>e6f
rc=$?
check "trace -o too long: usage error, command not run" '[ $rc -eq 2 ] && [ ! -e ran6c ]'
check "trace -o too long: said so" 'grep -q "gpureclaim trace: the log.s path would be 4[0-9]* bytes, more than 40[0-9]*" e6f'
# a working directory of ~3,100 bytes: the log lands in it, uncut
D=$T/$($PY -c 'print("/".join(["w" * 200] * 15))')
mkdir -p "$D"
(cd "$D" && GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -- "$APP" --cuda-app >/dev/null 2>"$T/e6g")
rc=$?
check "trace in a 3,100-byte directory: exit code 5" '[ $rc -eq 5 ]'
check "trace in a 3,100-byte directory: the log is there" 'ls "$D"/gpureclaim-*.trace >/dev/null 2>&1 && grep -q "Peak driver memory: 80.0 KiB" "$T/e6g"'
# ~4,070 bytes, too long with the default name added: refused (give -o)
D2=$D/$($PY -c 'print("/".join(["v" * 200] * 5 + ["u" * 20]))')
mkdir -p "$D2"
(cd "$D2" && GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- sh -c 'touch ran6h' >/dev/null 2>"$T/e6h")
rc=$?
check "trace in a 4,070-byte directory: refused, not run" '[ $rc -eq 2 ] && [ ! -e "$D2/ran6h" ]'
check "trace in a 4,070-byte directory: said so" 'grep -q "gpureclaim trace: the working directory.s path is too long .*-o" "$T/e6h"'
rm -rf "$T/wwwwwwwwww"*

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

# 7c. RMM's replay log: the golden files, written by hand from RMM's
# format (tests/trace/golden), one per GPU; read back as RMM reads it
"$LOGTOOL" --rmm-sample rmm.trace
TZ=UTC "$GPR" report rmm.trace --rmm-csv replay.csv --json >rmm.json 2>e7c
rc=$?
check "report --rmm-csv: exit 0, one file per GPU" '[ $rc -eq 0 ] && [ -f replay.dev0.csv ] && [ -f replay.dev1.csv ] && [ ! -e replay.csv ]'
check "report --rmm-csv: GPU 0 as the golden file" "cmp replay.dev0.csv $SRC/tests/trace/golden/rmm.dev0.csv"
check "report --rmm-csv: GPU 1 as the golden file" "cmp replay.dev1.csv $SRC/tests/trace/golden/rmm.dev1.csv"
check "report --rmm-csv: says what it wrote, what it left out, in the right number" 'grep -q "^gpureclaim report: wrote replay.dev0.csv: GPU 0, 10 rows (1 free missing from the log added); 1 free of memory allocated before tracing began left out$" e7c && grep -q "^gpureclaim report: wrote replay.dev1.csv: GPU 1, 1 row$" e7c'
check "report --rmm-csv: RMM's parser and replay agree with the report" "$PY $SRC/tests/trace/check_rmm.py rmm.json replay.dev0.csv replay.dev1.csv >/dev/null 2>pyerr || { cat pyerr; false; }"
# one GPU: the file as named
"$GPR" report app.trace --rmm-csv one.csv --json >one.json 2>/dev/null
check "report --rmm-csv: one GPU, one file" "[ -f one.csv ] && $PY $SRC/tests/trace/check_rmm.py one.json one.csv >/dev/null"
# the export rules: an RMM log is replaced, anything else only with --force
TZ=UTC "$GPR" report rmm.trace --rmm-csv replay.csv >/dev/null 2>/dev/null
rc=$?
check "report --rmm-csv: replaces its own logs" "[ $rc -eq 0 ] && cmp replay.dev1.csv $SRC/tests/trace/golden/rmm.dev1.csv"
echo notes >replay.dev1.csv
"$GPR" report rmm.trace --rmm-csv replay.csv >out7c 2>e7c2
rc=$?
check "report --rmm-csv: another file is not replaced, nothing written" '[ $rc -eq 1 ] && [ ! -s out7c ] && grep -q "replay.dev1.csv exists and is not an export" e7c2 && [ "$(cat replay.dev1.csv)" = notes ]'
TZ=UTC "$GPR" report rmm.trace --rmm-csv replay.csv --force >/dev/null 2>/dev/null
check "report --rmm-csv --force: replaced" "cmp replay.dev1.csv $SRC/tests/trace/golden/rmm.dev1.csv"
"$GPR" report rmm.trace --rmm-csv tl.json --chrome tl.dev0.json >/dev/null 2>e7c3
rc=$?
check "report --rmm-csv: naming another export fails, nothing written" '[ $rc -eq 1 ] && grep -q "also another export" e7c3 && [ ! -e tl.dev0.json ] && [ ! -e tl.dev1.json ]'
check "report --rmm-csv: no temporary file left behind" '[ -z "$(ls -A | grep "^\.")" ]'

# 7d. a large log: the size warning, --max-events, the progress line
"$LOGTOOL" --big big.trace 250000
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
	# the quiet first second set to 0, so that the machine's speed does not
	# decide: the line at the start, then each phase as it ended
	script -qec "GPURECLAIM_PROGRESS_AFTER=0 $GPR report big.trace --chrome full2.json >/dev/null" /dev/null >tty.out 2>&1
	check "report: a progress line on a terminal (GPURECLAIM_PROGRESS_AFTER=0)" 'grep -q "gpureclaim report: big.trace: reading" tty.out && grep -q "gpureclaim report: big.trace: computing the report 100% (0.2 M of 0.2 M records)" tty.out'
	script -qec "GPURECLAIM_PROGRESS_AFTER=86400 $GPR report big.trace --chrome full3.json >/dev/null" /dev/null >tty2.out 2>&1
	check "report: no progress line before GPURECLAIM_PROGRESS_AFTER" '[ -f full3.json ] && ! grep -q "gpureclaim report: big.trace" tty2.out'
	script -qec "GPURECLAIM_PROGRESS_AFTER=soon $GPR report s.trace >/dev/null" /dev/null >tty3.out 2>&1
	check "report: a GPURECLAIM_PROGRESS_AFTER that is no number is said" 'grep -q "GPURECLAIM_PROGRESS_AFTER must be seconds" tty3.out'
else
	bad "report: no script(1) to give the report a terminal"
fi

# 8. report errors
"$GPR" report missing.trace 2>e8
rc=$?
check "report: missing file exits 1" '[ $rc -eq 1 ] && grep -q "missing.trace" e8'
check "report: the missing file named once" '[ "$(grep -o missing.trace e8 | wc -l)" -eq 1 ]'
# a log cut short (issue 21): read up to the cut, marked; cut inside its
# header: refused, saying so
head -c 100 s.trace >cut.trace
"$GPR" report cut.trace >cut.txt 2>e8
rc=$?
check "report: a cut log is read up to the cut, marked" '[ $rc -eq 0 ] && grep -q "^Trace cut.trace: .*(log cut short at byte 64: " cut.txt && grep -q "^  - the log is cut short: its last chunk, at byte 64 of 100, is incomplete" cut.txt'
"$GPR" report cut.trace --json >cut.json
check "report: a cut log in JSON: complete false, the offset, the note" "$PY -c '
import json, sys
d = json.load(open(\"cut.json\"))
assert d[\"complete\"] is False and d[\"cut_at_offset\"] == 64, d
assert any(\"at byte 64 of 100\" in n for n in d[\"notes\"]), d[\"notes\"]
' 2>pyerr || { cat pyerr; false; }"
head -c 40 s.trace >cut2.trace
"$GPR" report cut2.trace >/dev/null 2>e8
rc=$?
check "report: a log cut inside its header exits 1 with the reason" '[ $rc -eq 1 ] && grep -q "cut2.trace: cut inside its header: 40 of the 64 bytes are there" e8'
"$GPR" report 2>/dev/null
rc=$?
check "report: no file is a usage error" '[ $rc -eq 2 ]'
"$GPR" report s.trace --top 0 2>/dev/null
rc=$?
check "report: bad --top is a usage error" '[ $rc -eq 2 ]'

# 8b. memory: peak RSS of `report` at most twice the log's size plus the
# tool's own (measured on a tiny log); a log larger than half the memory
# refused before reading; a log of millions of empty strings refused
# without costing memory. Not under ASan (its shadow memory is not ours).
GEN=$TRACE_GEN
peak_kb() { /usr/bin/time -f "%x %M" -o peak "$@" >/dev/null 2>"$T/perr"; tail -n 1 peak; }
if [ -x /usr/bin/time ] && [ -x "$GEN" ] && ! nm "$GPR" 2>/dev/null | grep -q __asan_init; then
	"$GEN" random 10 tiny.trace
	read -r rc base < <(peak_kb "$GPR" report tiny.trace --json)
	for spec in "random 200000" "pairs 200000" "strings 131000"; do
		set -- $spec
		"$GEN" "$1" "$2" mem.trace
		read -r rc kb < <(peak_kb "$GPR" report mem.trace --json)
		size_kb=$(( $(stat -c %s mem.trace) / 1024 ))
		check "report $1 $2: exit 0, peak ${kb} KiB <= 2 x ${size_kb} KiB + ${base} KiB + 2 MiB" \
			"[ $rc -eq 0 ] && [ $kb -le $((2 * size_kb + base + 2048)) ]"
	done
	"$GEN" strings 3900000 mem.trace
	read -r rc kb < <(peak_kb "$GPR" report mem.trace --json)
	check "report: 16 MiB of empty strings refused, peak ${kb} KiB" \
		"[ $rc -eq 1 ] && grep -q 'more than 131072 strings' $T/perr && [ $kb -le $((base + 2048)) ]"
	rm -f mem.trace tiny.trace
else
	echo "skip report memory checks (no /usr/bin/time, no trace_gen, or an ASan build)"
fi
head -c 64 s.trace >huge.trace
truncate -s 16T huge.trace 2>/dev/null || truncate -s 4T huge.trace
timeout 10 "$GPR" report huge.trace 2>e8b
rc=$?
check "report: a log larger than half the memory refused at once" '[ $rc -eq 1 ] && grep -q "is larger than the .* MiB this machine can read" e8b'
rm -f huge.trace

# 10. the report's wording and figures (issue 12): nouns agree with their
# counts, pinned host memory is labelled host, the plot's peak is the
# text's, the plot's ticks are round
check "report: one failed call, one unmatched free, one never freed" 'grep -q "^  - 1 call failed " r.txt && grep -q "^  - 1 free of memory" r.txt && grep -q "^Never freed: 1 allocation, " r.txt'
check "report: no count with the wrong noun" '! grep -Eq "(^|[^0-9])1 (calls|allocations|frees|records)" r.txt'
"$LOGTOOL" --cases cases.trace
"$GPR" report cases.trace --svg cases.svg --text >cases.txt 2>e10
rc=$?
check "report cases: exit 0" '[ $rc -eq 0 ]'
check "report cases: singular notes" 'grep -q "^  - 1 record was lost " cases.txt && grep -q "^  - 1 free missing from the log" cases.txt'
check "report cases: pinned host memory labelled host" 'grep -Eq "^ +4\.0 KiB +0x5000000 +host +cuMemHostAlloc " cases.txt && ! grep -q "cuMemHostAlloc.*dev 0\|dev 0 *cuMemHostAlloc" cases.txt'
check "report cases: never freed counts host apart" 'grep -q "^Never freed: 2 allocations, 512.0 MiB of device memory, 4.0 KiB of pinned host memory$" cases.txt'
check "report cases: the plot's peak is the text's" "$PY - cases.txt cases.svg <<'PYEOF' 2>pyerr || { cat pyerr; false; }
import re, sys
text = open(sys.argv[1]).read()
svg = open(sys.argv[2]).read()
t = re.search(r'Peak driver memory: (\S+ \S+) at (\S+ \S+);', text).groups()
p = re.search(r'>peak (\S+ \S+) at (\S+ \S+)<', svg).groups()
assert t == p == ('1.0 GiB', '1.50 s'), (t, p)
PYEOF"
check "report cases: round ticks on both axes" "$PY - cases.svg p.svg <<'PYEOF' 2>pyerr || { cat pyerr; false; }
import re, sys
from decimal import Decimal
UNIT = {'B': 1, 'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30}
SECS = {'s': Decimal(1), 'ms': Decimal('1e-3'), '\u00b5s': Decimal('1e-6'),
        'ns': Decimal('1e-9')}
for path in sys.argv[1:]:
    svg = open(path, encoding='utf-8').read()
    # time: 0, s, 2s, ... with s = 1, 2 or 5 x 10^k, each in a unit
    # where it reads as a number from 0.1 (never 0.0005 s)
    labels = re.findall(r'middle\">(0|[0-9.]+ (?:s|ms|\u00b5s|ns))<', svg)
    ts = [Decimal(0) if x == '0' else Decimal(x.split()[0]) * SECS[x.split()[1]]
          for x in labels]
    assert all(x == '0' or Decimal(x.split()[0]) >= Decimal('0.1')
               for x in labels), labels
    # a panel per GPU: each axis starts again at 0; check the first
    first = lambda v: v[:next((i for i in range(1, len(v)) if v[i] == 0), len(v))]
    ts = first(ts)
    step = ts[1] - ts[0]
    assert ts[0] == 0 and len(ts) >= 3, ts
    assert all(b - a == step for a, b in zip(ts, ts[1:])), ts
    mant = step.scaleb(-step.adjusted()).normalize()
    assert mant in (1, 2, 5), (path, ts)
    # bytes: 0, s, 2s, ... with s a power of two
    ys = first([float(v) * UNIT[u] for v, u in
                re.findall(r'end\">([0-9.]+) (B|KiB|MiB|GiB)<', svg)])
    ystep = ys[1] - ys[0]
    assert ys[0] == 0 and ystep > 0 and int(ystep) & (int(ystep) - 1) == 0, ys
    assert all(abs(y - i * ystep) < 1e-6 * ystep for i, y in enumerate(ys)), ys
PYEOF"
# the plot's time axis covers the tracing the header counts, not only its
# calls (issue 33): the seed scenario traced 13.5 ms, its calls 1.8 ms
"$GPR" report "$SRC/tests/trace/corpus/seed-scenario.gprtrace" --svg seed.svg --json >seed.json 2>/dev/null
check "report: the plot's time axis reaches the end of tracing" "$PY - seed.json seed.svg <<'PYEOF' 2>pyerr || { cat pyerr; false; }
import json, re, sys
from decimal import Decimal
doc = json.load(open(sys.argv[1]))
traced = doc['traced_ns']
svg = open(sys.argv[2], encoding='utf-8').read()
SECS = {'s': Decimal(1), 'ms': Decimal('1e-3'), '\u00b5s': Decimal('1e-6'),
        'ns': Decimal('1e-9')}
ticks = [Decimal(x.split()[0]) * SECS[x.split()[1]] for x in
         re.findall(r'middle\">([0-9.]+ (?:s|ms|\u00b5s|ns))<', svg)]
assert max(ticks) * 10**9 >= traced > 2 * doc['duration_ns'], (ticks, doc)
# the lines go on to where tracing ended (the memory stayed held, or not)
xs = [float(p.split(',')[0]) for p in
      re.search(r'<polyline[^>]*points=\"([^\"]*)\"', svg).group(1).split()]
right = 90 + 640 * traced / float(max(ticks) * 10**9)
assert abs(max(xs) - right) <= 1.5, (max(xs), right)
PYEOF"
check "report cases: no bidi override reaches the terminal" "$PY -c '
import sys
t = open(\"cases.txt\", \"rb\").read().decode(\"utf-8\")
assert \"\\u202e\" not in t and \" lib?os.evil \" in t, t
' 2>pyerr || { cat pyerr; false; }"
"$GPR" report cases.trace --json >cases.json
check "report cases: JSON escapes the override, keeps the name" "$PY - cases.json <<'PYEOF' 2>pyerr || { cat pyerr; false; }
import json, sys
raw = open(sys.argv[1], 'rb').read()
assert b'\xe2\x80\xae' not in raw and b'lib\\u202eos.evil' in raw, raw
libs = [l['library'] for l in json.loads(raw)['libraries']]
assert 'lib\u202eos.evil' in libs, libs
PYEOF"

# 11. outputs are all opened before anything is rendered: one that cannot
# be written fails the command first, nothing printed, nothing created
"$GPR" report s.trace --chrome ok.json --svg /nonexistent/dir/p.svg >o11 2>e11
rc=$?
check "report: unwritable --svg exits 1, prints nothing" '[ $rc -eq 1 ] && [ ! -s o11 ] && grep -q "cannot write /nonexistent/dir/p.svg" e11'
check "report: unwritable --svg: the other export not created" '[ ! -e ok.json ] && [ -z "$(ls -A . | grep "^\.ok\.json")" ]'
"$GPR" report missing.trace --svg m.svg >o11 2>e11
check "report: missing log, no export created" '[ ! -e m.svg ] && [ ! -s o11 ]'

# 12. exports are created like the log (issue 16 item 4)
cp s.trace keep.trace
sum() { cksum <"$1"; }
before=$(sum keep.trace)
"$GPR" report keep.trace --svg keep.trace >/dev/null 2>e12; rc=$?
check "export: never the log itself" '[ $rc -eq 1 ] && [ "$(sum keep.trace)" = "$before" ] && grep -q "keep.trace is the file being read" e12'
"$GPR" report keep.trace --force --chrome keep.trace >/dev/null 2>e12; rc=$?
check "export: never the log itself, --force or not" '[ $rc -eq 1 ] && [ "$(sum keep.trace)" = "$before" ]'
ln keep.trace hard.svg
"$GPR" report keep.trace --svg hard.svg >/dev/null 2>e12; rc=$?
check "export: not a hard link of the log (same inode)" '[ $rc -eq 1 ] && [ "$(sum keep.trace)" = "$before" ]'
echo precious >notes.txt
"$GPR" report s.trace --svg notes.txt >o12 2>e12; rc=$?
check "export: another file is not replaced" '[ $rc -eq 1 ] && [ "$(cat notes.txt)" = precious ] && [ ! -s o12 ] && grep -q "notes.txt exists and is not an export of gpureclaim (--force replaces it)" e12'
"$GPR" report s.trace --svg notes.txt --force >/dev/null 2>e12; rc=$?
check "export: --force replaces it" '[ $rc -eq 0 ] && head -2 notes.txt | grep -q "gpureclaim report"'
"$GPR" report s.trace --svg notes.txt --chrome tl.json >/dev/null 2>e12; rc=$?
"$GPR" report s.trace --svg notes.txt --chrome tl.json >/dev/null 2>e12; rc2=$?
check "export: an earlier export is replaced without --force" '[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && ! grep -qv "^gpureclaim report: wrote " e12'
: >empty.svg
"$GPR" report s.trace --svg empty.svg >/dev/null 2>e12; rc=$?
check "export: an empty file is replaced" '[ $rc -eq 0 ] && [ -s empty.svg ]'
echo precious >target.txt
ln -s target.txt link.svg
"$GPR" report s.trace --svg link.svg >/dev/null 2>e12; rc=$?
check "export: a symbolic link is refused" '[ $rc -eq 1 ] && [ -L link.svg ] && [ "$(cat target.txt)" = precious ] && grep -q "symbolic link, not followed" e12'
"$GPR" report s.trace --svg link.svg --force >/dev/null 2>e12; rc=$?
check "export: --force replaces the link, never its target" '[ $rc -eq 0 ] && [ ! -L link.svg ] && [ -f link.svg ] && [ "$(cat target.txt)" = precious ]'
mkfifo fifo.svg
timeout 10 "$GPR" report s.trace --svg fifo.svg --force >/dev/null 2>e12; rc=$?
check "export: a FIFO is refused, without hanging" '[ $rc -eq 1 ] && [ -p fifo.svg ] && grep -q "fifo.svg is not a regular file" e12'
mkdir dir.svg
"$GPR" report s.trace --svg dir.svg --force >/dev/null 2>e12; rc=$?
check "export: a directory is refused" '[ $rc -eq 1 ] && grep -q "dir.svg is a directory" e12'
"$GPR" report s.trace --svg same.out --chrome ./same.out >/dev/null 2>e12; rc=$?
check "export: --svg and --chrome naming one file is bad usage" '[ $rc -eq 2 ] && [ ! -e same.out ]'
for m in 022:600 077:600 277:400; do
	rm -f mode.svg
	(umask "${m%%:*}" && "$GPR" report s.trace --svg mode.svg >/dev/null 2>&1)
	check "export: umask ${m%%:*} gives mode ${m##*:}" "[ \"\$(stat -c %a mode.svg)\" = ${m##*:} ]"
done
check "export: no temporary file left behind" '[ -z "$(ls -A . | grep "^\.")" ]'

# 9. the churn through the fake CUPTI: every call recorded; with
# GPURECLAIM_TRACE_SUBSCRIBE_ONLY (CUPTI held, no callback) or
# GPURECLAIM_TRACE_INJECT_ONLY (CUPTI not loaded) none is
calls() { "$GPR" report "$1" --json | "$PY" -c 'import json, sys; print(sum(o["calls"] for o in json.load(sys.stdin)["operations"]))'; }
if [ -x "$CHURN" ]; then
	GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -q -o churn.trace -- "$CHURN" fake 500 >/dev/null 2>&1
	check "trace: churn of 500 pairs records 1000 calls" '[ "$(calls churn.trace)" = 1000 ]'
	GPURECLAIM_TRACE_SUBSCRIBE_ONLY=0 GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace --backend cupti -q -o sub0.trace -- "$CHURN" fake 500 >/dev/null 2>&1
	check "trace: GPURECLAIM_TRACE_SUBSCRIBE_ONLY=0 records every call" '[ "$(calls sub0.trace)" = 1000 ]'
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
SIMENV=(GPURECLAIM_SIM="gpus=2;state=trace-cli-$$" LD_LIBRARY_PATH="$SIM_DIR"
	GPURECLAIM_CUDA_LIBRARY="$SIM_DIR/libcuda.so.1"
	GPURECLAIM_NVML_LIBRARY="$SIM_DIR/libnvidia-ml.so.1"
	GPURECLAIM_CUPTI_LIBRARY=/nonexistent/libcupti.so)
env "${SIMENV[@]}" "$GPR" trace -o demo.trace -- "$RELEASE_DEMO" >o10 2>e10
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
"$GPR" report demo.trace >demo.txt
# a context made is an event, not a call: no bytes, no latency in the text
check "sim: the context rows show no bytes or latency" \
	'grep -Eq "^ +context_created +2 +0 +- +- +- +- +- +-$" demo.txt'
if [ -d "$PY_PATH/gpureclaim" ]; then
	env "${SIMENV[@]}" PYTHONPATH="$PY_PATH:$SRC/tests/python/fakes" \
		"$GPR" trace -o seed.trace -- "$PY" "$SRC/examples/seed_scenario.py" >o11 2>e11
	rc=$?
	check "sim: the seed scenario traced, its output kept" '[ $rc -eq 0 ] && grep -q "^gpureclaim.release(): 512.0 MiB (1.0 GiB released)$" o11'
	check "sim: the seed scenario's summary" 'grep -q "Peak driver memory: 2.0 GiB" e11 && grep -q "held at the end: 0 B" e11'
else
	bad "sim: $PY_PATH not built"
fi

cd / && rm -rf "$T"
echo "test_cli.sh: $fails failures"
[ $fails -eq 0 ]
