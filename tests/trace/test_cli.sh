#!/usr/bin/env bash
# `gpureclaim trace` and `gpureclaim report` without a GPU: exit codes,
# output left alone, CUPTI discovery errors, an end-to-end trace through
# the fake CUPTI, the report's JSON and exports (validated by Python).
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

# 4b. an on/off switch with a value that is not 1/0/yes/no/true/false:
# refused in one line before the command runs
GPURECLAIM_TRACE_SELFTIME=maybe GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- sh -c 'touch ran4b' 2>e4b
rc=$?
check "trace: bad switch value is a usage error" '[ $rc -eq 2 ] && [ ! -e ran4b ]'
check "trace: bad switch value said in one line" '[ "$(wc -l <e4b)" -eq 1 ] && grep -q "GPURECLAIM_TRACE_SELFTIME=.maybe. is not one of 1/0/yes/no/true/false" e4b'
GPURECLAIM_TRACE_NO_SCHEDSTAT=Yes GPURECLAIM_TRACE_SELFTIME=0 GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -- true 2>/dev/null
rc=$?
check "trace: switch words in any case accepted" '[ $rc -eq 0 ]'

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

# 6b. names planted at the default log path (CMD's pid is the child's:
# the shell plants gpureclaim-$$.trace, then execs the CUDA program). The
# summary must read the log the program really wrote, never the plant.
"$B/tests/trace/test_trace_log" --sample planted-src.trace
GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- sh -c 'cp planted-src.trace gpureclaim-$$.trace; exec "$0" --cuda-app' "$APP" >/dev/null 2>e6c
rc=$?
check "trace planted log: exit code 5" '[ $rc -eq 5 ]'
check "trace planted log: summary of the real log" 'grep -q "Peak driver memory: 80.0 KiB" e6c && ! grep -q "Peak driver memory: 2.0 GiB" e6c'
check "trace planted log: says the name was taken" 'grep -q "gpureclaim trace: .*/gpureclaim-[0-9]*\.trace was already there; the log is .*/gpureclaim-[0-9]*\.trace\.[0-9]*" e6c'
check "trace planted log: points at the real log" 'grep -q "^Full report: gpureclaim report .*/gpureclaim-[0-9]*\.trace\.[0-9]*$" e6c'
rm -f gpureclaim-*.trace*
GPURECLAIM_CUPTI_LIBRARY=$FAKE timeout 20 "$GPR" trace -- sh -c 'mkfifo gpureclaim-$$.trace; exec "$0" --cuda-app' "$APP" >/dev/null 2>e6d
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
(cd "$D" && GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -- "$APP" --cuda-app >/dev/null 2>"$T/e6g")
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

# 8b. memory: peak RSS of `report` at most twice the log's size plus the
# tool's own (measured on a tiny log); a log larger than half the memory
# refused before reading; a log of millions of empty strings refused
# without costing memory. Not under ASan (its shadow memory is not ours).
GEN=$B/bench/trace_gen
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

# 9. the churn through the fake CUPTI: every call recorded; with
# GPURECLAIM_TRACE_SUBSCRIBE_ONLY (CUPTI held, no callback) or
# GPURECLAIM_TRACE_INJECT_ONLY (CUPTI not loaded) none is
calls() { "$GPR" report "$1" --json | "$PY" -c 'import json, sys; print(sum(o["calls"] for o in json.load(sys.stdin)["operations"]))'; }
CHURN=$B/bench/trace_churn
if [ -x "$CHURN" ]; then
	GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -o churn.trace -- "$CHURN" fake 500 >/dev/null 2>&1
	check "trace: churn of 500 pairs records 1000 calls" '[ "$(calls churn.trace)" = 1000 ]'
	GPURECLAIM_TRACE_SUBSCRIBE_ONLY=0 GPURECLAIM_CUPTI_LIBRARY=$FAKE "$GPR" trace -q -o sub0.trace -- "$CHURN" fake 500 >/dev/null 2>&1
	check "trace: GPURECLAIM_TRACE_SUBSCRIBE_ONLY=0 records every call" '[ "$(calls sub0.trace)" = 1000 ]'
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
