"""`gpureclaim exporter` scraped by a real Prometheus server (Debian's
`prometheus`, which scripts/install-deps.sh check installs): the server
runs on 127.0.0.1 on a free port, with its data in a temporary folder and
a scrape config for the exporter; the simulated host has two GPUs and
four processes, two with agents, one with a hostile command line. The
test waits for two scrapes by polling the server's HTTP API, then asks it
for the series: their values and labels, and the releasable sum per GPU,
which must be what the agents' explain() says and what `gpureclaim
reclaim --dry-run` says those processes would return. `promtool check metrics` checks the
exposition itself.

GPR_PROM_SCRAPE_S: the scrape interval in seconds (default 0.5; a
parameter, the test waits for scrapes, not for time). GPR_METRICS_DATA: a
file to write the series the test fetched into (scripts/metrics-png.py
draws the dashboard's panels from it).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest
from metricsenv import (BIN, HANG_S, PY_PATH, read_line, sim,  # noqa: F401
                        wait_for)

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
if not PROMETHEUS or not PROMTOOL:
    pytest.skip("prometheus/promtool not installed (scripts/install-deps.sh "
                "check installs Debian's prometheus)", allow_module_level=True)

SCRAPE_S = float(os.environ.get("GPR_PROM_SCRAPE_S", "0.5"))
HOSTILE = ['"}\n', "x\\" * 200, "\x1b]0;title\x07"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "docs")
# the recording rules docs/metrics.md offers for the names of the release
# before (kind="fragmented")
RULES = os.path.join(DOCS, "gpureclaim-deprecated-rules.yml")


class Prometheus:
    def __init__(self, tmp, target):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        ms = max(int(SCRAPE_S * 1000), 100)
        cfg = tmp / "prometheus.yml"
        cfg.write_text(
            "global:\n"
            f"  scrape_interval: {ms}ms\n"
            f"  scrape_timeout: {ms}ms\n"
            f"  evaluation_interval: {ms}ms\n"
            f"rule_files: ['{RULES}']\n"
            "scrape_configs:\n"
            "  - job_name: gpureclaim\n"
            "    static_configs:\n"
            f"      - targets: ['{target}']\n")
        self.log = open(tmp / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={cfg}",
             f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=tmp)

    def ready(self):
        if self.proc.poll() is not None:
            pytest.fail(f"prometheus ended ({self.proc.returncode}); see "
                        f"{self.log.name}")
        try:
            return get(f"{self.url}/-/ready")[0] == 200
        except OSError:
            return False

    def query(self, q):
        """The instant query's result: [(labels, value as float)]."""
        _, body = get(f"{self.url}/api/v1/query?" +
                      urllib.parse.urlencode({"query": q}))
        d = json.loads(body)
        assert d["status"] == "success", d
        return [(r["metric"], float(r["value"][1]))
                for r in d["data"]["result"]]

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(HANG_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def test_a_real_prometheus_scrapes_the_exporter(sim, tmp_path):  # noqa: F811
    procs = [
        sim.workload(0, 64, 96, agent=True)[1],
        sim.workload(1, 32, 160, agent=True)[1],
        sim.workload(0, 16, 32)[1],
        sim.workload(1, 8, 0, argv=HOSTILE)[1],
    ]
    agents = procs[:2]
    exp = subprocess.Popen([BIN, "exporter", "--listen", "127.0.0.1:0",
                            "--interval", str(SCRAPE_S / 2)], env=sim.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    sim.procs.append(exp)
    line = read_line(exp, "gpureclaim exporter: serving ")
    target = line.split("http://", 1)[1].split("/", 1)[0]
    prom = Prometheus(tmp_path, target)
    try:
        wait_for("prometheus to be ready", prom.ready)

        def scrapes():
            r = prom.query('sum_over_time(up{job="gpureclaim"}[1h])')
            return r and r[0][1] >= 2

        wait_for("two successful scrapes", scrapes)
        check_series(sim, prom, procs, agents, target)
        check_deprecated_kind(prom)
        data = check_dashboard(prom)
    finally:
        prom.close()
    out = os.environ.get("GPR_METRICS_DATA")
    if out:
        with open(out, "w") as f:
            json.dump({"panels": data, "processes": procs}, f, indent=1)
    # promtool's own check of the exposition, as scraped
    _, text = get(f"http://{target}/metrics")
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=HANG_S)
    assert p.returncode == 0, p.stdout + p.stderr


def check_deprecated_kind(prom):
    """Both names of a part's kind (docs/naming.md, "Words"): the exporter
    writes kind="not_releasable"; the documented recording rule gives the
    name of the release before, kind="fragmented", the same values."""
    def by(kind):
        return {(m["pid"], m["gpu"], m["source"]): v for m, v in prom.query(
            f'gpureclaim_process_part_bytes{{kind="{kind}"}}')}

    new = by("not_releasable")
    assert new, "no not_releasable part exported"
    wait_for("the recording rule's first evaluation",
             lambda: by("fragmented") == new)


DASHBOARD = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "docs", "grafana-gpureclaim.json")


def check_dashboard(prom):
    """Every query of the Grafana dashboard (docs/grafana-gpureclaim.json)
    runs on the server ($instance: every node); those of the memory
    panels find series. Returns {panel title: [(legend, expr, result)]}
    with the series of the last minute (scripts/metrics-png.py draws
    them)."""
    import time

    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = {}
    now = time.time()
    for panel in dash["panels"]:
        rows = []
        for t in panel["targets"]:
            expr = t["expr"].replace("$instance", ".*")
            got = prom.query(expr)
            if "health" not in panel["title"].lower():
                assert got, (panel["title"], expr)
            _, body = get(f"{prom.url}/api/v1/query_range?" +
                          urllib.parse.urlencode({
                              "query": expr, "start": now - 60, "end": now,
                              "step": max(SCRAPE_S, 0.1)}))
            d = json.loads(body)
            assert d["status"] == "success", (expr, d)
            rows.append((t["legendFormat"], expr,
                         got if t.get("instant") else d["data"]["result"]))
        out[panel["title"]] = rows
    return out


def check_series(sim, prom, procs, agents, target):  # noqa: F811
    up = prom.query('up{job="gpureclaim"}')
    assert [(m["instance"], v) for m, v in up] == [(target, 1.0)]
    gpus = prom.query("gpureclaim_gpu_memory_total_bytes")
    assert sorted((m["gpu"], m["uuid"], m["name"], v) for m, v in gpus) == [
        ("0", "GPU-5111a000-0000-4000-8000-000000000000", "Simulated GPU",
         80 * 2.0 ** 30),
        ("1", "GPU-5111a000-0000-4000-8000-000000000001", "Simulated GPU",
         80 * 2.0 ** 30)]
    # used: the sum of the processes' driver bytes (the sim has no other)
    used = {m["gpu"]: v for m, v in prom.query(
        "gpureclaim_gpu_memory_used_bytes")}
    per_gpu = {m["gpu"]: v for m, v in prom.query(
        "sum by (gpu) (gpureclaim_process_memory_bytes)")}
    assert used == per_gpu
    held = {m["pid"]: (m, v) for m, v in prom.query(
        "gpureclaim_process_memory_bytes")}
    assert set(held) == {str(r["pid"]) for r in procs}
    for r in procs:
        m, v = held[str(r["pid"])]
        assert v == r["driver"]
        assert m["command"].startswith(os.path.basename(sys.executable))
        assert len(m["command"]) <= 64 and m["user"]
    hostile = held[str(procs[3]["pid"])][0]["command"]
    assert hostile.endswith("...") and all(c.isprintable() for c in hostile)
    # the parts: only the processes with agents, and what each says itself
    parts = prom.query("gpureclaim_process_part_bytes")
    assert {m["pid"] for m, _ in parts} == {str(r["pid"]) for r in agents}
    for r in agents:
        mine = [(m, v) for m, v in parts if m["pid"] == str(r["pid"])]
        assert sum(v for _, v in mine) == r["driver"]
    releasable = {m["gpu"]: v for m, v in prom.query(
        'sum by (gpu) (gpureclaim_process_part_bytes{kind="releasable"})')}
    assert releasable == expected_releasable(agents)
    # and what `gpureclaim reclaim --dry-run` says those processes would
    # return, per GPU
    p = sim.run("reclaim", "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    dry = json.loads(p.stdout)
    assert releasable == {str(g["gpu"]): float(g["releasable"])
                          for g in dry["gpus"]}
    assert sum(releasable.values()) == dry["total"]
    assert releasable == {"0": 96 * 2.0 ** 20, "1": 160 * 2.0 ** 20}
    answered = prom.query('gpureclaim_exporter_agents{state="answered"}')
    assert [v for _, v in answered] == [2.0]
    assert prom.query("gpureclaim_exporter_nvml_errors_total")[0][1] == 0


def expected_releasable(agents):
    """Per GPU, what the agents' own explain() calls releasable, asked
    through gpureclaim.agent as a reclaim would (the workloads' GPU
    ordinals are the NVML indexes here: no CUDA_VISIBLE_DEVICES)."""
    sys.path.insert(0, PY_PATH)
    from gpureclaim import agent

    out = {}
    for r in agents:
        e = agent.ask(r["pid"], "explain", timeout=HANG_S)
        for g in e["gpus"]:
            b = sum(p["bytes"] for p in g["parts"]
                    if p["kind"] == "releasable" and p["known"])
            out[str(g["device"])] = out.get(str(g["device"]), 0.0) + b
    return out


#: idle connections one client holds (1,025: one more than the usual
#: descriptor limit, which the exporter runs under here, as the shipped
#: systemd unit sets none); a parameter for slower machines
IDLE = int(os.environ.get("GPR_EXPORTER_IDLE_CONNECTIONS", "1025"))


def test_idle_connections_do_not_stop_the_scrapes(sim, tmp_path):  # noqa: F811
    """A client holding 1,025 idle connections made every scrape time out
    and accept() spin (the exporter out of descriptors, never closing
    one). The exporter bounds the connections per peer and the idle time,
    closing the oldest idle connection for a new one: a real Prometheus
    on the same address keeps scraping while they are held."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = IDLE + 256
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"needs {need} descriptors (hard limit {hard})")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))

    def limited():
        resource.setrlimit(resource.RLIMIT_NOFILE, (IDLE - 1, hard))

    exp = subprocess.Popen([BIN, "exporter", "--listen", "127.0.0.1:0",
                            "--interval", str(SCRAPE_S / 2)], env=sim.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, preexec_fn=limited)
    sim.procs.append(exp)
    line = read_line(exp, "gpureclaim exporter: serving ")
    target = line.split("http://", 1)[1].split("/", 1)[0]
    host, port = target.rsplit(":", 1)
    prom = Prometheus(tmp_path, target)
    held = []
    try:
        wait_for("prometheus to be ready", prom.ready)

        def scraped():
            r = prom.query('sum_over_time(up{job="gpureclaim"}[1h])')
            return r[0][1] if r else 0

        wait_for("a first scrape", scraped)
        import select

        for _ in range(IDLE):  # connected, nothing sent
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex((host, int(port)))
            held.append(c)
            # each given a moment to be taken (a guard, not a measure:
            # one the exporter cannot take stays pending)
            p = select.poll()
            p.register(c, select.POLLOUT)
            p.poll(1000)
        before = scraped()
        wait_for("two more successful scrapes while the connections are "
                 "held", lambda: scraped() >= before + 2)
        assert exp.poll() is None
    finally:
        for c in held:
            c.close()
        prom.close()
