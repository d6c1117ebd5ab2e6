#!/usr/bin/env bash
# run-suites.sh SUMMARY LABEL:DIR:SUITES... : runs the Meson test suites of
# each build folder (`meson test`, tests in parallel), then prints one line
# per suite and the total, also into SUMMARY. The tests' output is in
# DIR/meson-logs/testlog.txt; a failing test's output is shown here.
# A sanitized build (asan) gets three times the timeouts.
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
	[ "$label" = asan ] && mult=3
	"${MESON:-meson}" test -C "$dir" --no-rebuild --print-errorlogs \
		--timeout-multiplier "$mult" "${args[@]}" \
		>"$dir/meson-logs/check.txt" 2>&1
	rc=$?
	"${PYTHON:-python3}" - "$dir/meson-logs/testlog.json" "$label" "$suites" "$rc" \
		>>"$summary" <<'PY' || status=1
import json, sys

log, label, suites, rc = sys.argv[1], sys.argv[2], sys.argv[3].split(), int(sys.argv[4])
counts = {s: [0, 0, 0] for s in suites}  # passed, failed, skipped
failed = []
with open(log) as f:
    for line in f:
        t = json.loads(line)
        suite = next((s.split(":")[-1] for s in t["suite"]
                      if s.split(":")[-1] in counts), None)
        if suite is None:
            continue
        r = t["result"]
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
                     f"(last lines; all in meson-logs/testlog.txt)\n")
    sys.stderr.write("\n".join(out[-60:]) + "\n")
for s in suites:
    p, f, k = counts[s]
    print(f"{label}/{s}: {p} passed, {f} failed, {k} skipped")
empty = [s for s in suites if sum(counts[s]) == 0]
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
