"""RMM's replay log, read back as RMM reads it: the parser round trip.

Usage: check_rmm.py REPORT.json RMM.csv [RMM.csv...]

Each file is parsed with the rules of rapidsai/rmm's benchmarks/utilities/
log_parser.hpp (columns by name through rapidcsv; Action one of
"allocate", "free", "allocate failure", anything else an error; Pointer
read with stoull(s, nullptr, 16), "(nil)" as 0; Size as a size_t; Stream
with stoul base 10, which stops at the first non-digit: "0x55..." is 0),
then replayed as REPLAY_BENCH replays it (row order; an allocate
remembers its pointer, a free must name a live pointer and its size).
What is still held at the end, per file, must be what the trace report
(REPORT.json, `gpureclaim report --json`) says the device holds.
"""
import csv
import json
import re
import sys

ACTIONS = ("allocate", "free", "allocate failure")


def stoull16(s):
    m = re.match(r"\s*(0[xX])?([0-9a-fA-F]+)", s)
    if not m:
        raise ValueError(f"stoull: {s!r}")
    return int(m.group(2), 16)


def stoul10(s):
    m = re.match(r"\s*([0-9]+)", s)
    if not m:
        raise ValueError(f"stoul: {s!r}")
    return int(m.group(1))


def parse(path):
    with open(path, newline="") as f:
        head = f.readline()
        assert head == "Thread,Time,Action,Pointer,Size,Stream\n", head
        f.seek(0)
        rows = list(csv.DictReader(f))
    events = []
    for r in rows:
        assert set(r) == {"Thread", "Time", "Action", "Pointer", "Size",
                          "Stream"}, r
        assert r["Action"] in ACTIONS, r
        assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{6}", r["Time"]), r
        ptr = 0 if r["Pointer"] == "(nil)" else stoull16(r["Pointer"])
        assert (ptr == 0) == (r["Action"] == "allocate failure"), r
        # as RMM prints a stream: 0, or 0x... in hexadecimal
        assert re.fullmatch(r"0|0x[0-9a-f]+", r["Stream"]), r
        assert stoul10(r["Stream"]) == 0  # what REPLAY_BENCH reads
        events.append((int(r["Thread"]), r["Action"], ptr, int(r["Size"])))
    return events


def replay(events):
    live = {}
    for _tid, action, ptr, size in events:
        if action == "allocate":
            assert ptr not in live, f"allocate of live {ptr:#x}"
            live[ptr] = size
        elif action == "free":
            assert live.get(ptr) == size, f"free {ptr:#x} {size}: {live.get(ptr)}"
            del live[ptr]
    return live


def main():
    report = json.load(open(sys.argv[1]))
    held = {d["device"]: d["held_at_end_bytes"] for d in report["devices"]}
    for path in sys.argv[2:]:
        live = replay(parse(path))
        m = re.search(r"\.dev(\d+)\.", path)
        dev = int(m.group(1)) if m else 0
        assert sum(live.values()) == held.get(dev, 0), (
            path, sum(live.values()), held)
    print("check_rmm: ok")


if __name__ == "__main__":
    main()
