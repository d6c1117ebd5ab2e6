#!/usr/bin/env python3
"""Draws the Grafana dashboard's first two panels (docs/grafana-gpureclaim.json:
used vs releasable per GPU, top processes) from the series a real
Prometheus served in tests/metrics/test_prometheus.py, into
docs/img/metrics-dashboard.png (docs/metrics.md shows it).

The data: the test writes what it fetched to $GPR_METRICS_DATA. Needs
matplotlib (pip install matplotlib) and the built package (its
format_bytes writes the figures as every view does: build/python, or
$GPR_PY_PATH); not part of `make check`.

  GPR_METRICS_DATA=/tmp/metrics-data.json meson test -C build metrics
  python3 scripts/metrics-png.py /tmp/metrics-data.json [OUT.png]
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GiB = 1 << 30


def legend(fmt, metric):
    out = fmt
    for k, v in metric.items():
        out = out.replace("{{" + k + "}}", v)
    return out


def short(command, width=44):
    """A command label for the picture: each path by its last part."""
    words = [w.rsplit("/", 1)[-1] if "/" in w else w
             for w in command.split(" ")]
    text = " ".join(words)
    return text if len(text) <= width else text[:width - 3] + "..."


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(__doc__)
        return 0 if argv else 2
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("metrics-png: needs matplotlib (pip install "
                         "matplotlib)\n")
        return 1
    sys.path.insert(0, os.environ.get("GPR_PY_PATH")
                    or os.path.join(ROOT, "build", "python"))
    try:
        from gpureclaim import format_bytes
    except ImportError as e:
        sys.stderr.write(f"metrics-png: needs the built package ({e}): "
                         "make all, or set GPR_PY_PATH\n")
        return 1
    with open(argv[0]) as f:
        data = json.load(f)["panels"]
    out = argv[1] if len(argv) > 1 else os.path.join(
        ROOT, "docs", "img", "metrics-dashboard.png")
    used = data["Used vs releasable per GPU"]
    top = data["Top processes"]

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2),
                               gridspec_kw={"width_ratios": [0.8, 1.3]})
    fig.patch.set_facecolor("#111217")
    for ax in (a, b):
        ax.set_facecolor("#181b1f")
        ax.tick_params(colors="#ccccdc", labelsize=8)
        for s in ax.spines.values():
            s.set_color("#2c3235")
    # the panel's series at the last scrape, as grouped bars per GPU (the
    # test's window holds a few scrapes: a time axis would show flat lines)
    last = {}
    for fmt, _, result in used:
        kind = fmt.rsplit(" ", 1)[-1]
        for series in result:
            last[(series["metric"]["gpu"], kind)] = float(
                series["values"][-1][1])
    gpus = sorted({g for g, _ in last})
    colours = {"used": "#5794f2", "releasable": "#73bf69"}
    for j, kind in enumerate(("used", "releasable")):
        xs = [i + (j - 0.5) * 0.38 for i in range(len(gpus))]
        vs = [last.get((g, kind), 0) for g in gpus]
        a.bar(xs, [v / GiB for v in vs], 0.36, color=colours[kind],
              label=kind)
        for x, v in zip(xs, vs):
            a.text(x, v / GiB, format_bytes(int(v)), ha="center", va="bottom",
                   color="#ccccdc", fontsize=7)
    a.set_xticks(range(len(gpus)))
    a.set_xticklabels([f"GPU {g}" for g in gpus])
    a.set_title("Used vs releasable per GPU (last scrape)", color="#ccccdc",
                fontsize=10, loc="left")
    a.set_ylabel("GiB", color="#ccccdc", fontsize=8)
    # room above the bars for the legend, which then hides none of them
    a.set_ylim(top=max(v for (_, k), v in last.items()
                       if k in colours) / GiB * 1.35)
    a.legend(fontsize=7, facecolor="#181b1f", labelcolor="#ccccdc",
             edgecolor="#2c3235", loc="upper center", ncol=2)

    (_, _, rows), = top
    rows = sorted(rows, key=lambda r: r[1])
    labels = [f"GPU {m['gpu']}  pid {m['pid']}  {m['user']}  "
              f"{short(m['command'])}" for m, _ in rows]
    b.barh(range(len(rows)), [v / GiB for _, v in rows], color="#5794f2")
    b.set_yticks(range(len(rows)))
    b.set_yticklabels(labels, fontsize=7, family="monospace")
    b.set_title("Top processes (driver bytes)", color="#ccccdc", fontsize=10,
                loc="left")
    b.set_xlabel("GiB", color="#ccccdc", fontsize=8)
    for i, (_, v) in enumerate(rows):
        b.text(v / GiB, i, f" {format_bytes(int(v))}", va="center",
               color="#ccccdc", fontsize=7)
    b.set_xlim(right=max(v for _, v in rows) / GiB * 1.25)
    # the dashboard's own title (docs/grafana-gpureclaim.json), the words
    # of docs/naming.md
    with open(os.path.join(ROOT, "docs", "grafana-gpureclaim.json")) as f:
        title = json.load(f)["title"]
    fig.suptitle(f"{title} (simulated host of the real-server test)",
                 color="#ccccdc", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    fig.savefig(out, dpi=110, facecolor=fig.get_facecolor())
    print(f"Wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
