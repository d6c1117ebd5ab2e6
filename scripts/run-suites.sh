#!/usr/bin/env bash
# run-suites.sh SUMMARY LABEL:DIR:SUITES... : runs the Meson test suites of
# each build folder (`meson test`, tests in parallel), then prints one line
# per suite (Meson's tests, and the checks their runners count inside
# them: pytest cases, cmocka cases) and the total, also into SUMMARY. The tests' output is in
# DIR/meson-logs/testlog.txt (testlog-<wrapper>.txt under a wrapper); a
# failing test's output is shown here.
# A sanitized build (asan, tsan) gets three times the timeouts; the
# variable WRAP_<label>, when set, is meson test's --wrapper for that build
# (the tsan run: setarch ... -R, from the Makefile).
set -uo pipefail
summary=$1
shift
: >"$summary"
status=0
for spec in "$@"; do
	label=${spec%%:*}
	rest=${spec#*:}
	dir=${rest%%:*}
	suites=${rest#*:}
	args=()
	for s in $suites; do args+=(--suite "$s"); done
	mult=1
	case $label in asan | tsan) mult=3 ;; esac
	# meson test names its log after the wrapper's program
	wrap_var=WRAP_$label
	wrap=${!wrap_var:-}
	log=$dir/meson-logs/testlog
	if [ -n "$wrap" ]; then
		args+=(--wrapper "$wrap")
		log=$log-$(basename "${wrap%% *}")
	fi
	"${MESON:-meson}" test -C "$dir" --no-rebuild --print-errorlogs \
		--timeout-multiplier "$mult" "${args[@]}" \
		>"$dir/meson-logs/check.txt" 2>&1
	rc=$?
	"${PYTHON:-python3}" - "$log.json" "$label" "$suites" "$rc" \
		>>"$summary" <<'PY' || status=1
import json, re, sys


def cases(out):
    """The checks inside one test program, from its runner's own lines:
    pytest's summary, cmocka's "[       OK ]" line of each case (its
    "[  PASSED  ] N" lines repeat them: tests/unit/support.c runs each case
    in a process of its own), "ok   " lines of scripts."""
    n = 0
    for line in out.splitlines():
        m = re.match(r"^=*\s*(\d+) passed\b", line)
        if m:
            n += int(m[1])
        elif line.startswith(("[       OK ] ", "ok   ")):
            n += 1
    return n


log, label, suites, rc = sys.argv[1], sys.argv[2], sys.argv[3].split(), int(sys.argv[4])
counts = {s: [0, 0, 0, 0] for s in suites}  # passed, failed, skipped, cases
failed = []
try:
    f = open(log)
except OSError as e:
    sys.stderr.write(f"{label}: no test log ({e.strerror}: {log}); meson "
                     f"test's output is in {log.rsplit('/', 1)[0]}/check.txt\n")
    sys.exit(1)
with f:
    for n, line in enumerate(f, 1):
        try:
            t = json.loads(line)
        except ValueError:
            # another `meson test` of the same folder wrote it meanwhile
            sys.stderr.write(f"{label}: {log}:{n} is not a test record; "
                             "was meson test run twice at once on "
                             f"{log.rsplit('/', 2)[0]}?\n")
            sys.exit(1)
        # "unit - gpureclaim:test_core" (suites joined by "+")
        names = t["name"].split(" - ", 1)[0].split("+")
        suite = next((s for s in names if s in counts), None)
        if suite is None:
            continue
        r = t["result"]
        counts[suite][3] += cases(t.get("stdout") or "")
        if r in ("OK", "EXPECTEDFAIL"):
            counts[suite][0] += 1
        elif r == "SKIP":
            counts[suite][2] += 1
        else:
            counts[suite][1] += 1
            failed.append(t)
for t in failed:
    out = (t.get("stdout") or "").splitlines()
    sys.stderr.write(f"---- {label}: {t['name']} {t['result']} "
                     f"(last lines; all in {log[:-5]}.txt)\n")
    sys.stderr.write("\n".join(out[-60:]) + "\n")
for s in suites:
    p, f, k, c = counts[s]
    inside = f" ({c} checks inside)" if c else ""
    print(f"{label}/{s}: {p} passed, {f} failed, {k} skipped{inside}")
empty = [s for s in suites if sum(counts[s][:3]) == 0]
if empty:
    sys.stderr.write(f"{label}: no test ran in suite(s) {' '.join(empty)}\n")
sys.exit(1 if failed or empty or rc else 0)
PY
done
cat "$summary"
"${PYTHON:-python3}" - "$summary" "$status" <<'PY'
import re, sys
p = f = k = 0
for line in open(sys.argv[1]):
    m = re.search(r": (\d+) passed, (\d+) failed, (\d+) skipped", line)
    if m:
        p, f, k = p + int(m[1]), f + int(m[2]), k + int(m[3])
print(f"check: {p} passed, {f} failed, {k} skipped")
sys.exit(1 if f or int(sys.argv[2]) else 0)
PY
