#!/usr/bin/env bash
# `gpureclaim report` as issues 20 and 21 asked (the rest of the report's
# checks are test_cli.sh's): what an export prints, the names and errors
# of export files (NAME_MAX, a full disk, paths a terminal must not get),
# RMM's logs of many GPUs in one pass, the memory bound under --top, and
# the usage messages. Run from the source root by `meson test --suite
# trace`, which sets GPR (the command), LOGTOOL (test_trace_log),
# TRACE_GEN (bench/trace_gen) and PYTHON.
set -u
PY=${PYTHON:-python3}
T=$(mktemp -d /tmp/gpr-report-XXXXXX)
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
cd "$T" || exit 1
"$LOGTOOL" --sample s.trace
"$LOGTOOL" --rmm-sample two.trace

# 1. an export is the answer (memray's way): "wrote FILE" for each file,
# the report on stdout only when asked
"$GPR" report s.trace --svg a.svg --html a.html --chrome a.json >o1 2>e1
rc=$?
check "export: exit 0, nothing on stdout" '[ $rc -eq 0 ] && [ ! -s o1 ]'
check "export: wrote FILE for each" 'grep -qx "gpureclaim report: wrote a.json (the timeline)" e1 && grep -qx "gpureclaim report: wrote a.svg (the plot)" e1 && grep -qx "gpureclaim report: wrote a.html (the report as a page)" e1 && [ "$(wc -l <e1)" -eq 3 ]'
"$GPR" report s.trace --svg a.svg --text >o1b 2>/dev/null
check "export with --text: the text report too" 'grep -q "^Peak driver memory: " o1b'
"$GPR" report s.trace --svg a.svg --json >o1c 2>/dev/null
check "export with --json: the JSON too" "$PY -c 'import json; json.load(open(\"o1c\"))'"
"$GPR" report s.trace >o1d 2>e1d
check "no export: the text report, nothing on stderr" 'grep -q "^Peak driver memory: " o1d && [ ! -s e1d ]'
"$GPR" report s.trace --text --json >/dev/null 2>e1e
check "--text with --json is bad usage" '[ $? -eq 2 ] && grep -q "choose one" e1e'

# 2. export names up to NAME_MAX (255 bytes): the temporary name beside
# them (".NAME.XXXXXX", 8 more) still fits
for n in 247 248 251 255; do
	name=$(printf 'n%.0s' $(seq 1 $((n - 4)))).svg
	"$GPR" report s.trace --svg "$name" >/dev/null 2>e2
	rc=$?
	check "export: a name of $n bytes works" '[ $rc -eq 0 ] && [ -s "$name" ] && [ -z "$(ls -A | grep "^\.")" ]'
	"$GPR" report s.trace --svg "$name" >/dev/null 2>e2
	rc=$?
	check "export: a name of $n bytes is replaced" '[ $rc -eq 0 ] && [ -z "$(ls -A | grep "^\.")" ]'
	rm -f "$name"
done

# 3. a full disk says so (a 64 KiB tmpfs in a mount namespace of our own)
if unshare -rm true 2>/dev/null; then
	"$LOGTOOL" --big big.trace 20000
	mkdir full
	unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs full &&
		"$0" report big.trace --chrome full/tl.json; echo "rc=$?";
		"$0" report big.trace --rmm-csv full/r.csv; echo "rc=$?";
		ls -A full | wc -l' "$GPR" >o3 2>e3
	check "export on a full disk: No space left on device, exit 1" 'grep -q "^gpureclaim report: writing full/tl.json failed: No space left on device$" e3 && grep -q "^gpureclaim report: writing full/r.csv failed: No space left on device$" e3 && [ "$(grep -c "^rc=1$" o3)" -eq 2 ]'
	check "export on a full disk: nothing left behind" '[ "$(tail -n 1 o3)" = 0 ] && ! grep -qi "input/output" e3'
	rm -f big.trace
else
	echo "skip export on a full disk (no user and mount namespace here)"
fi

# 4. paths a terminal must not get are shown as words to paste
"$GPR" report "$(printf 'evil\033[2J.trace')" 2>e4
check "report: a path with ESC is quoted, never raw" '! grep -q "$(printf "\033")" e4 && grep -qF "gpureclaim report: \$'"'"'evil\\x1b[2J.trace'"'"': No such file" e4'
"$GPR" report "it's here.trace" 2>e4b
check "report: a path with a space and a quote, pasteable" "grep -qF \"gpureclaim report: 'it'\\\\''s here.trace': No such file\" e4b"
"$GPR" report s.trace --svg "$(printf 'x\033]0;t\007.svg')" >/dev/null 2>e4c
check "export: its wrote line quoted too" '! grep -q "$(printf "\033")" e4c && grep -qF "wrote \$'"'"'x\\x1b]0;t\\x07.svg'"'"'" e4c'

# 5. usage: a short option is named as given
"$GPR" report -x.trace 2>e5
rc=$?
check "report -x.trace: unknown option -x, not 'report'" '[ $rc -eq 2 ] && grep -q "^gpureclaim report: unknown option -x (a file whose name begins with .-.: ./NAME, or -- before it)$" e5 && ! grep -q "'"'"'report'"'"'" e5'
cp s.trace ./-x.trace
"$GPR" report -- -x.trace >o5 2>&1
check "report -- -x.trace: read" '[ $? -eq 0 ] && grep -q "^Trace -x.trace: " o5'

# 6. RMM's logs: every GPU (past the 256th too), in one pass; a split
# over something that is not a regular file refused
"$TRACE_GEN" devices 300 d300.trace
mkdir rmm
"$GPR" report d300.trace --rmm-csv rmm/r.csv >/dev/null 2>e6
rc=$?
check "--rmm-csv: 300 GPUs, 300 files" '[ $rc -eq 0 ] && [ "$(ls rmm | wc -l)" -eq 300 ] && [ -f rmm/r.dev299.csv ] && [ "$(grep -c "^gpureclaim report: wrote rmm/r.dev[0-9]*.csv: GPU [0-9]*, 2 rows$" e6)" -eq 300 ]'
check "--rmm-csv: each GPU's file holds its rows" '[ "$(sed -n 2p rmm/r.dev299.csv | cut -d, -f3)" = allocate ] && [ "$(wc -l <rmm/r.dev123.csv)" -eq 3 ]'
mkdir few
(ulimit -n 64 && "$GPR" report d300.trace --rmm-csv few/r.csv) >/dev/null 2>e6b
rc=$?
check "--rmm-csv: more GPUs than files may be open: refused, said, nothing left" '[ $rc -eq 1 ] && grep -q "more GPUs than files this process may open (ulimit -n)" e6b && [ -z "$(ls -A few)" ]'
"$GPR" report two.trace --rmm-csv /dev/null >o6 2>e6c
rc=$?
check "--rmm-csv /dev/null on two GPUs: refused, /dev/null.dev* not made" '[ $rc -eq 1 ] && [ ! -e /dev/null.dev0 ] && [ ! -e /dev/null.dev1 ] && grep -q "^gpureclaim report: --rmm-csv /dev/null is not a regular file: the log has 2 GPUs" e6c && [ ! -s o6 ]'
"$GPR" report s.trace --rmm-csv /dev/null >/dev/null 2>e6d
check "--rmm-csv /dev/null: refused as any export there" '[ $? -eq 1 ] && grep -q "/dev/null is not a regular file" e6d'

# 7. the memory bound holds with --top: the lists are streamed (JSON) or
# shown to 1000 rows (text, HTML). Not under ASan (its shadow memory is
# not ours).
peak_kb() { /usr/bin/time -f "%x %M" -o peak "$@" >/dev/null 2>"$T/perr"; tail -n 1 peak; }
if [ -x /usr/bin/time ] && ! nm "$GPR" 2>/dev/null | grep -q __asan_init; then
	"$TRACE_GEN" random 10 tiny.trace
	read -r rc base < <(peak_kb "$GPR" report tiny.trace --json)
	"$TRACE_GEN" random 200000 live.trace
	size_kb=$(( $(stat -c %s live.trace) / 1024 ))
	for form in "--html p.html" "--json" "--text"; do
		read -r rc kb < <(peak_kb "$GPR" report live.trace --top 1000000 $form)
		check "report --top 1000000 $form: peak ${kb} KiB <= 2 x ${size_kb} KiB + ${base} KiB + 2 MiB" \
			"[ $rc -eq 0 ] && [ $kb -le $((2 * size_kb + base + 2048)) ]"
	done
	"$GPR" report live.trace --top 1000000 --json >live.json
	check "--json --top 1000000 lists every allocation never freed" "$PY -c '
import json
d = json.load(open(\"live.json\"))
assert len(d[\"never_freed\"]) == d[\"never_freed_count\"] == 200000, len(d[\"never_freed\"])
'"
	"$GPR" report live.trace --top 1000000 >live.txt
	check "text --top 1000000: 1000 rows, and says so" '[ "$(grep -c " dev 0 " live.txt)" -eq 1000 ] && grep -q "^  (the first 1000 of 200000 shown (--json lists up to --top))$" live.txt'
	rm -f live.trace live.json live.txt p.html tiny.trace
else
	echo "skip report memory checks (no /usr/bin/time, or an ASan build)"
fi

cd / && rm -rf "$T"
echo "test_report.sh: $fails failures"
[ $fails -eq 0 ]
