"""Checks the report's JSON and the exports of the synthetic sample log.

Usage: check_exports.py REPORT.json CHROME.json PLOT.svg
The numbers are those test_trace_log.c writes with --sample.
"""
import json
import sys
import xml.etree.ElementTree as ET

GiB = 1 << 30


def main():
    report_path, chrome_path, svg_path = sys.argv[1:4]
    with open(report_path) as f:
        rep = json.load(f)
    assert rep["peak_bytes"] == 2 * GiB, rep["peak_bytes"]
    assert rep["held_at_end_bytes"] == 4096
    assert rep["records"] == 211
    assert rep["never_freed_count"] == 1
    libs = {l["library"]: l for l in rep["libraries"]}
    assert libs["libtorch_cuda.so"]["allocated_bytes"] == GiB + (2 << 20)
    assert libs["cupy_backends.so"]["freed_bytes"] == GiB
    ops = {o["op"]: o for o in rep["operations"]}
    host = ops["cuMemHostAlloc"]
    assert (host["p50_ns"], host["p90_ns"], host["p99_ns"], host["max_ns"]) \
        == (50000, 90000, 99000, 100000), host
    assert abs(host["wait_share"] - 0.25) < 1e-6

    with open(chrome_path) as f:
        tl = json.load(f)
    ev = tl["traceEvents"]
    slices = [e for e in ev if e["ph"] == "X"]
    assert len(slices) == 211, len(slices)
    counters = [e for e in ev if e["ph"] == "C"]
    total = [e["args"]["bytes"] for e in counters
             if e["name"] == "device bytes: total"]
    assert max(total) == 2 * GiB and total[-1] == 4096, total[-3:]
    names = {e["name"] for e in counters}
    assert "device bytes: libtorch_cuda.so" in names, names
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in slices)

    root = ET.parse(svg_path).getroot()
    assert root.tag.endswith("svg"), root.tag
    lines = [e for e in root.iter() if e.tag.endswith("polyline")]
    assert len(lines) >= 3, len(lines)  # total + two libraries
    text = " ".join(e.text or "" for e in root.iter() if e.tag.endswith("text"))
    assert "libtorch_cuda.so" in text and "cupy_backends.so" in text, text
    print("check_exports: ok")


if __name__ == "__main__":
    main()
