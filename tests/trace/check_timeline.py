"""A capped timeline (report --chrome --max-events N) against the full one.

Usage: check_timeline.py FULL.json CAPPED.json N

The capped one parses, holds about N events (N plus the metadata), keeps
every failed call as a slice, says what it merged, and its held-bytes
counters reach the same peak and end on the same values as the full one.
"""
import json
import sys


def load(path):
    return json.load(open(path))["traceEvents"]


def counters(ev):
    out = {}
    for e in ev:
        if e["ph"] == "C" and e["name"].startswith("device bytes"):
            out.setdefault(e["name"], []).append((e["ts"], e["args"]["bytes"]))
    return {k: sorted(v) for k, v in out.items()}


def main():
    full, capped, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
    meta = [e for e in capped if e["ph"] == "M"]
    assert len(capped) - len(meta) <= n + 1, (len(capped), n)
    assert len(full) > len(capped)
    failed = [e for e in full if e["ph"] == "X" and e["args"]["result"]]
    kept = {(e["ts"], e["tid"]) for e in capped if e["ph"] == "X"}
    assert failed and all((e["ts"], e["tid"]) in kept for e in failed)
    notes = [e for e in capped if e["ph"] == "i" and "merged" in e["name"]]
    assert len(notes) == 1, notes
    merged = [e for e in capped if e["ph"] == "C" and
              e["name"].startswith("driver calls (merged)")]
    assert merged and sum(e["args"]["calls"] for e in merged) > 0
    fc, cc = counters(full), counters(capped)
    assert set(fc) == set(cc), (set(fc), set(cc))
    for name in fc:
        assert max(v for _, v in fc[name]) == max(v for _, v in cc[name]), name
        assert fc[name][-1][1] == cc[name][-1][1], (name, fc[name][-1],
                                                     cc[name][-1])
    print("check_timeline: ok")


if __name__ == "__main__":
    main()
