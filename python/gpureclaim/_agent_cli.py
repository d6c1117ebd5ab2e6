"""The agent's commands (docs/agent.md): `reclaim`, `agent start|list`,
`ps --explain`, and the help of `explain --pid N` and `release --pid N`.
The C command hands them to this module (cli/main.c, as it hands the
--dask forms); `explain --pid` and `release --pid` themselves are the C
command's (cli/cmd_agent.c: no interpreter's start in front of a
request), and this module's explain_main and release_main stand in for
them only where the command is not installed.

`ps --explain` lives here, not in C: the C side keeps the facts (NVML's
rows, who each process is, the stray-context flag), read once as
`gpureclaim ps --json` (the same listing, one JSON document), and this
module adds what only the processes themselves can say, asked of their
agents in parallel. The agents' protocol is Python's (gpureclaim/agent.py);
a second implementation of it in C would be one more thing to keep in
step, for no fact C has.
"""
from __future__ import annotations

import argparse
import concurrent.futures as _futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

from . import agent as _agent

#: the parts `ps --explain` shows, each a group of explain()'s kinds
GROUPS = (
    ("live", ("live", "unattributed")),
    ("returnable", ("releasable",)),
    ("not returnable", ("fragmented",)),
    ("workspaces", ("workspace",)),
    ("pools", ("pool", "graph_pool")),
    ("rest", ("rest", "unreported", "context")),
)

_EXIT_TAIL = """\
Exit status: 0 answered, 1 the process could not be asked or its request
failed (one line says why: no agent, refused, timeout, died, bad answer),
2 bad usage.
"""

EXPLAIN_USAGE = """\
USAGE: gpureclaim explain --pid N [--json] [--holders] [--timeout SECONDS]

Ask process N's agent where its GPU memory goes: its own
gpureclaim.explain(), as if it had called it (docs/agent.md). The process
must run the agent (gpureclaim.agent.start(), GPURECLAIM_AGENT=1,
`gpureclaim run --agent`, %load_ext gpureclaim) and be this user's (any
user's, as root).

OPTIONS:
    --pid N             the process
    --json              explain()'s JSON (exact bytes), as the process
                        writes it
    --holders           also what holds the memory, where that process's
                        explain() can say (explain(holders=True))
    --timeout SECONDS   the longest to wait for the answer (default 10)
    -h, --help          show this help

EXAMPLES:
    gpureclaim explain --pid 4242
    gpureclaim explain --pid 4242 --json | jq '.gpus[0].parts'

""" + _EXIT_TAIL

RELEASE_USAGE = """\
USAGE: gpureclaim release --pid N [--workspaces] [--collect WHEN]
                          [--json] [--timeout SECONDS]
       gpureclaim release --dask ADDRESS [--workers ADDR...]
                          [--timeout SECONDS] [--json]

Ask process N's agent to give its cached GPU memory back: its own
gpureclaim.release(), as if it had called it; the bytes are the drop in
the driver's figure for that process, exact (docs/agent.md). With --dask,
every worker of a Dask cluster instead, each about its own process
(docs/cluster.md; `gpureclaim release --dask ADDRESS --help`).

OPTIONS:
    --pid N             the process (it runs the agent: docs/agent.md)
    --workspaces        also free Torch's cuBLAS workspaces
    --collect WHEN      when it runs gc.collect(): auto (the default: only
                        when live bytes remain), always, never
    --json              release()'s JSON report (exact bytes)
    --timeout SECONDS   the longest to wait for the answer (default 30)
    --dask ADDRESS      a Dask scheduler, e.g. tcp://host:8786, instead
    -h, --help          show this help

EXAMPLES:
    gpureclaim release --pid 4242
    gpureclaim release --pid 4242 --workspaces --json | jq .bytes
    gpureclaim release --dask tcp://10.0.0.5:8786

""" + _EXIT_TAIL

RECLAIM_USAGE = """\
USAGE: gpureclaim reclaim [--gpu INDEX] [--min SIZE] [--dry-run] [--json]
                          [--timeout SECONDS]

Ask every process of this user with an agent (every process, as root) to
give its cached GPU memory back, all at once, and print what came back,
exactly, per process and per GPU; then the processes on the GPUs that
have no agent or did not answer, and why (docs/agent.md).

OPTIONS:
    -i, --gpu INDEX     only GPU INDEX (NVML's index, as ps lists it)
    --min SIZE          only processes that would return at least SIZE
                        (e.g. 512MiB, 2GiB; each is asked first)
    --dry-run           ask what each would return; release nothing
    --json              one JSON document (exact bytes)
    --timeout SECONDS   the longest each process may take (default 30)
    -h, --help          show this help

EXAMPLES:
    gpureclaim reclaim
    gpureclaim reclaim --gpu 0 --min 1GiB
    gpureclaim reclaim --dry-run --json | jq '.total'

Exit status: 0 every agent answered, 1 runtime error, 2 bad usage, 3
some agents did not answer (listed with the reason).
"""

AGENT_USAGE = """\
USAGE: gpureclaim agent start --pid N [--timeout SECONDS]
       gpureclaim agent list [--json]

start: start the agent in running process N, which never opted in,
through sys.remote_exec (PEP 768: Python 3.14 or newer, in this command
and in the process; the kernel's ptrace rules apply). list: the agents
this user may ask (every user's, as root), with what each runs.

OPTIONS:
    --pid N             the process to start the agent in
    --timeout SECONDS   how long to wait for its socket (default 10)
    --json              the list as one JSON document
    -h, --help          show this help

EXAMPLES:
    gpureclaim agent list
    gpureclaim agent start --pid 4242

Exit status: 0 ok, 1 the agent could not be started or asked, 2 bad
usage.
"""

PS_EXPLAIN_USAGE = """\
USAGE: gpureclaim ps --explain [-i INDEX]... [--json] [--timeout SECONDS]

The rows of `gpureclaim ps`, and under each process that runs the agent
its parts (live, returnable, not returnable, workspaces, pools, rest), as
its own explain() says; per GPU, what a release of every process would
return (docs/agent.md). The processes are asked in parallel.

OPTIONS:
    --explain           ask the agents
    -i, --gpu INDEX     only GPU INDEX (repeat it, or a comma list)
    --json              ps's JSON document, each process with "agent" and
                        each GPU with "returnable"
    --timeout SECONDS   the longest each process may take (default 5)
    -h, --help          show this help

EXAMPLES:
    gpureclaim ps --explain
    gpureclaim ps --explain --json | jq '.gpus[].returnable'

Exit status: 0 ok, 1 runtime error (no NVIDIA driver), 2 bad usage.
"""


class _Parser(argparse.ArgumentParser):
    """argparse with the command's voice (as gpureclaim/cluster/_cli.py)."""

    def __init__(self, command: str, usage: str):
        super().__init__(prog=f"gpureclaim {command}", add_help=False)
        self.command = command
        self.usage_text = usage

    def format_help(self) -> str:
        return self.usage_text

    def error(self, message: str):
        sys.stderr.write(f"gpureclaim {self.command}: {message}\n"
                         f"Run 'gpureclaim {self.command} --help' for the "
                         "options.\n")
        sys.exit(2)


def _positive(p: _Parser, name: str, v: float) -> None:
    if not v > 0:
        p.error(f"{name} must be positive")


def _fail(command: str, msg: str) -> int:
    sys.stderr.write(f"gpureclaim {command}: {msg}\n")
    return 1


def _fb(n: Optional[int]) -> str:
    from . import format_bytes

    return format_bytes(n)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.I)
_UNITS = {"b": 1, "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3,
          "tb": 1000 ** 4, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
          "tib": 1 << 40}


def parse_size(text: str) -> Optional[int]:
    """"2GiB", "512MiB", "1.5GB", "4096" (bytes) -> bytes, or None."""
    m = _SIZE.match(text)
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()])


# -- explain --pid and release --pid ----------------------------------------

def explain_main(argv: list) -> int:
    p = _Parser("explain", EXPLAIN_USAGE)
    p.add_argument("-h", "--help", action="help")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--json", action="store_true")
    p.add_argument("--holders", action="store_true")
    p.add_argument("--timeout", type=float, default=10.0)
    a = p.parse_args(argv)
    _positive(p, "--timeout", a.timeout)
    args = {"holders": True} if a.holders else {}
    return _ask_and_print("explain", a, args)


def _ask_and_print(op: str, a: Any, args: dict) -> int:
    """Asks a.pid's agent op(args); prints the process's own report (its
    text, or with a.json its JSON document)."""
    try:
        doc = _agent.ask_full(a.pid, op, timeout=a.timeout, **args)
    except _agent.AgentError as e:
        return _fail(op, str(e))
    if a.json:  # one line, as the C command prints it
        print(json.dumps(doc["result"], separators=(",", ":")))
    else:
        sys.stdout.write(str(doc.get("text") or json.dumps(doc["result"]))
                         .rstrip("\n") + "\n")
    return 0


def release_main(argv: list) -> int:
    p = _Parser("release", RELEASE_USAGE)
    p.add_argument("-h", "--help", action="help")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--workspaces", action="store_true")
    p.add_argument("--collect", choices=("auto", "always", "never"),
                   default="auto")
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args(argv)
    _positive(p, "--timeout", a.timeout)
    args: dict = {}
    if a.workspaces:
        args["workspaces"] = True
    if a.collect != "auto":
        args["collect"] = a.collect == "always"
    return _ask_and_print("release", a, args)


def release_entry(argv: list) -> int:
    """`release`: --pid N asks an agent, --dask a cluster; the help says
    both."""
    opts = argv[:argv.index("--")] if "--" in argv else argv
    if any(o.startswith("--pid") for o in opts):
        return release_main(argv)
    if any(o.startswith("--dask") for o in opts):
        from .cluster._cli import main as cluster_main

        return cluster_main("release", argv)
    if any(o in ("-h", "--help") for o in opts):
        sys.stdout.write(RELEASE_USAGE)
        return 0
    sys.stderr.write("gpureclaim release: give --pid N (a process with an "
                     "agent) or --dask ADDRESS (a Dask cluster)\n"
                     "Run 'gpureclaim release --help' for the options.\n")
    return 2


# -- the processes on the GPUs, from the C command --------------------------

def ps_document(select: list) -> tuple:
    """(`gpureclaim ps --json` as a dict, None, 0) or (None, why, its exit
    status)."""
    from .__main__ import _command

    cmd = _command()
    if not cmd:
        return None, ("the gpureclaim command is not installed beside this "
                      "package; set GPURECLAIM_BIN"), 1
    args = [cmd, "ps", "--json"]
    for i in select:
        args += ["-i", str(i)]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"gpureclaim ps failed: {e}", 1
    err = p.stderr.strip().splitlines()
    if p.returncode == 2:
        return None, err[0] if err else "bad usage", 2
    try:
        return json.loads(p.stdout), None, 0
    except ValueError:
        return None, (err[0] if err else
                      f"gpureclaim ps: exit {p.returncode}"), p.returncode or 1


def _askable(pid: int) -> bool:
    """A process this user may ask (its own, or any as root)."""
    uid = _agent._proc_uid(pid)
    return uid is not None and (os.getuid() == 0 or uid == os.getuid())


def _who(pid: int, rows: dict) -> tuple:
    """(user, command) of pid, from ps's rows or /proc."""
    r = rows.get(pid)
    if r:
        return r.get("user"), r.get("command")
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read(4096).replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmd = None
    try:
        import pwd

        user = pwd.getpwuid(_agent._proc_uid(pid)).pw_name
    except (KeyError, TypeError):
        user = None
    return user, (cmd.strip() if cmd else None)


def _parallel(fn, items: list, workers: int = 32) -> list:
    """[fn(x) for x in items], each in a thread of its own (at most
    `workers` at once), in the items' order."""
    if not items:
        return []
    with _futures.ThreadPoolExecutor(min(workers, len(items))) as ex:
        return list(ex.map(fn, items))


def _groups(gpu: dict) -> dict:
    """An explained GPU's parts as GROUPS (bytes; unknown parts left
    out)."""
    out = {name: 0 for name, _ in GROUPS}
    for part in gpu.get("parts", []):
        if part.get("known") is False or part.get("bytes") is None:
            continue
        for name, kinds in GROUPS:
            if part.get("kind") in kinds:
                out[name] += part["bytes"]
                break
    return out


# -- reclaim -------------------------------------------------------------

def reclaim_main(argv: list) -> int:
    p = _Parser("reclaim", RECLAIM_USAGE)
    p.add_argument("-h", "--help", action="help")
    p.add_argument("-i", "--gpu", type=int)
    p.add_argument("--min", dest="min_size")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args(argv)
    _positive(p, "--timeout", a.timeout)
    min_bytes = None
    if a.min_size is not None:
        min_bytes = parse_size(a.min_size)
        if min_bytes is None:
            p.error(f"--min needs a size (512MiB, 2GiB, bytes), not "
                    f"{a.min_size!r}")
    if a.gpu is not None and a.gpu < 0:
        p.error("--gpu needs a GPU index (0, 1, ...)")
    t0 = time.monotonic()
    doc, why, rc = ps_document([] if a.gpu is None else [a.gpu])
    if rc == 2:  # a GPU index that no GPU has
        sys.stderr.write(why.replace("gpureclaim ps:", "gpureclaim reclaim:")
                         + "\n")
        return 2
    rows: dict = {}   # pid -> its ps row (the first GPU's)
    held: dict = {}   # pid -> {nvml index: bytes}
    for g in (doc or {}).get("gpus", []):
        for r in g.get("processes", []):
            if r.get("state") != "alive" or not _askable(r["pid"]):
                continue
            rows.setdefault(r["pid"], r)
            held.setdefault(r["pid"], {})[g["index"]] = r.get("bytes")
    agents = {pid for pid, _ in _agent.discover()}
    pids = sorted(agents | set(held))
    if a.gpu is not None:  # only the processes on that GPU
        pids = [q for q in pids if a.gpu in held.get(q, {})]
    asked = [q for q in pids if q in agents]

    def one(pid: int) -> dict:
        return _reclaim_one(pid, a, min_bytes)

    results = dict(zip(asked, _parallel(one, asked)))
    report = _reclaim_report(pids, agents, results, held, rows, a,
                             min_bytes, time.monotonic() - t0, why)
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        sys.stdout.write(_reclaim_text(report))
    return 3 if report["failed"] else 0


def _ordinals(pid: int, gpu: Optional[int], timeout: float) -> Optional[list]:
    """The CUDA ordinals by which pid knows NVML GPU `gpu` (None: all)."""
    if gpu is None:
        return None
    st = _agent.ask(pid, "status", timeout=timeout)
    m = st.get("nvml_index") or {}
    return [int(d) for d, i in m.items() if i == gpu]


def _reclaim_one(pid: int, a: Any, min_bytes: Optional[int]) -> dict:
    t0 = time.monotonic()
    deadline = t0 + a.timeout

    def left() -> float:
        return max(deadline - time.monotonic(), 0.01)

    try:
        devices = _ordinals(pid, a.gpu, left())
        if devices == []:
            return {"ok": True, "returned": 0, "gpus": [],
                    "skipped": f"holds no context on GPU {a.gpu}",
                    "seconds": time.monotonic() - t0}
        kw = {} if devices is None else {"devices": devices}
        if a.dry_run or min_bytes is not None:
            doc = _agent.ask_full(pid, "explain", timeout=left(), **kw)
            idx = doc.get("nvml_index") or {}
            gpus = [{"device": g["device"],
                     "nvml_index": idx.get(str(g["device"])),
                     "returnable": _groups(g)["returnable"]}
                    for g in doc["result"]["gpus"]]
            would = sum(g["returnable"] for g in gpus)
            if a.dry_run:
                return {"ok": True, "would_return": would, "gpus": gpus,
                        "seconds": time.monotonic() - t0}
            if would < min_bytes:
                return {"ok": True, "returned": 0, "gpus": [],
                        "skipped": f"would return {_fb(would)}, less than "
                                   f"--min {_fb(min_bytes)}",
                        "seconds": time.monotonic() - t0}
        r = _agent.ask(pid, "release", timeout=left(), **kw)
        gpus = [{"device": g["device"], "nvml_index": g.get("nvml_index"),
                 "returned": g["released"], "known": g.get("known", True)}
                for g in r["gpus"]]
        return {"ok": True, "returned": r["bytes"], "source": r["source"],
                "gpus": gpus, "notes": r.get("notes", []),
                "release_seconds": r.get("seconds"),
                "seconds": time.monotonic() - t0}
    except _agent.AgentError as e:
        return {"ok": False, "kind": e.kind, "error": str(e),
                "seconds": time.monotonic() - t0}


def _reclaim_report(pids, agents, results, held, rows, a, min_bytes,
                    seconds, ps_why) -> dict:
    key = "would_return" if a.dry_run else "returned"
    done, failed, unasked = [], [], []
    per_gpu: dict = {}
    for pid in pids:
        user, cmd = _who(pid, rows)
        base = {"pid": pid, "user": user, "command": cmd,
                "held": {str(k): v for k, v in held.get(pid, {}).items()}}
        if pid not in agents:
            unasked.append(dict(base, kind="no_agent",
                                error="no agent (GPURECLAIM_AGENT=1, "
                                      "gpureclaim run --agent, or "
                                      "gpureclaim.agent.start())"))
            continue
        r = results[pid]
        if not r["ok"]:
            failed.append(dict(base, kind=r["kind"], error=r["error"]))
            continue
        row = dict(base, **{key: r.get(key, 0)}, gpus=r["gpus"],
                   seconds=round(r["seconds"], 6))
        if r.get("skipped"):
            row["skipped"] = r["skipped"]
        if r.get("release_seconds") is not None:
            row["release_seconds"] = r["release_seconds"]  # in the process
        done.append(row)
        for g in r["gpus"]:
            i = g.get("nvml_index")
            i = g["device"] if i is None else i
            t = per_gpu.setdefault(str(i), {"index": i, key: 0,
                                            "processes": 0})
            t[key] += g.get(key, g.get("returnable", 0)) or 0
            t["processes"] += 1
    return {"dry_run": a.dry_run, "gpu": a.gpu, "min": min_bytes,
            "seconds": round(seconds, 6),
            "total": sum(r[key] for r in done),
            "processes": done,
            "gpus": sorted(per_gpu.values(), key=lambda g: str(g["index"])),
            "failed": failed, "no_agent": unasked,
            "notes": [f"the GPUs' process list is missing: {ps_why}"]
            if ps_why else []}


def _reclaim_text(rep: dict) -> str:
    key = "would_return" if rep["dry_run"] else "returned"
    verb = "would give back" if rep["dry_run"] else "gave back"
    out = []
    n = len(rep["processes"])
    asked = n + len(rep["failed"])
    out.append(f"gpureclaim reclaim{' --dry-run' if rep['dry_run'] else ''}"
               f": {asked} process{'es' if asked != 1 else ''} with an "
               f"agent asked; {n} answered and {verb} "
               f"{_fb(rep['total'])} ({rep['total']} bytes)")
    if rep["processes"]:
        out.append(f"  {'PID':>7} {'USER':<10} {key.upper().replace('_', ' '):>14}"
                   f"  PER GPU / COMMAND")
        for r in rep["processes"]:
            per = ", ".join(
                f"GPU {g['nvml_index'] if g.get('nvml_index') is not None else g['device']}"
                f" {_fb(g.get(key, g.get('returnable', 0)))}"
                for g in r["gpus"]) or "-"
            note = f" ({r['skipped']})" if r.get("skipped") else ""
            out.append(f"  {r['pid']:>7} {(r['user'] or '-')[:10]:<10} "
                       f"{_fb(r[key]):>14}  {per}{note}  "
                       f"{_short(r['command'])}")
    for g in rep["gpus"]:
        out.append(f"GPU {g['index']}: {_fb(g[key])} ({g[key]} bytes) "
                   f"{'would come' if rep['dry_run'] else 'came'} back from "
                   f"{g['processes']} process"
                   f"{'es' if g['processes'] != 1 else ''}")
    if rep["failed"]:
        out.append("Did not answer:")
        for r in rep["failed"]:
            out.append(f"  {r['pid']:>7} {(r['user'] or '-')[:10]:<10} "
                       f"{r['kind']}: {_drop_pid(r['error'], r['pid'])}")
    if rep["no_agent"]:
        out.append("No agent (not asked):")
        for r in rep["no_agent"]:
            h = ", ".join(f"GPU {i} {_fb(b)}" for i, b in r["held"].items())
            out.append(f"  {r['pid']:>7} {(r['user'] or '-')[:10]:<10} "
                       f"holds {h or 'nothing listed'}  "
                       f"{_short(r['command'])}")
    out.extend(rep["notes"])
    return "\n".join(out) + "\n"


def _short(cmd: Optional[str], n: int = 60) -> str:
    if not cmd:
        return ""
    cmd = " ".join(cmd.split())
    return cmd if len(cmd) <= n else cmd[:n - 3] + "..."


def _drop_pid(msg: str, pid: int) -> str:
    p = f"process {pid}: "
    return msg[len(p):] if msg.startswith(p) else msg


# -- ps --explain ------------------------------------------------------------

def ps_explain_main(argv: list) -> int:
    p = _Parser("ps", PS_EXPLAIN_USAGE)
    p.add_argument("-h", "--help", action="help")
    p.add_argument("--explain", action="store_true", required=True)
    p.add_argument("-i", "--gpu", action="append", default=[])
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=float, default=5.0)
    a = p.parse_args(argv)
    _positive(p, "--timeout", a.timeout)
    select = []
    for item in a.gpu:
        for x in item.split(","):
            if not x.strip().isdigit():
                p.error(f"-i/--gpu needs GPU indexes (0, 1, 0,2), not "
                        f"{item!r}")
            select.append(int(x))
    doc, why, rc = ps_document(select)
    if doc is None:
        sys.stderr.write((why if why.startswith("gpureclaim") else
                          f"gpureclaim ps: {why}") + "\n")
        return rc
    agents = dict(_agent.discover())
    on_gpus = sorted({r["pid"] for g in doc.get("gpus", [])
                      for r in g.get("processes", []) if r["pid"] in agents})

    def one(pid: int) -> dict:
        try:
            d = _agent.ask_full(pid, "explain", timeout=a.timeout)
            return {"ok": True, "result": d["result"],
                    "nvml_index": d.get("nvml_index") or {}}
        except _agent.AgentError as e:
            return {"ok": False, "kind": e.kind, "error": str(e)}

    answers = dict(zip(on_gpus, _parallel(one, on_gpus)))
    for g in doc.get("gpus", []):
        if "processes" not in g:
            continue
        total, with_agent, silent = 0, 0, 0
        for r in g["processes"]:
            ans = answers.get(r["pid"])
            if ans is None:
                r["agent"] = None
                continue
            if not ans["ok"]:
                r["agent"] = {"kind": ans["kind"], "error": ans["error"]}
                silent += 1
                continue
            mine = [x for x in ans["result"]["gpus"]
                    if ans["nvml_index"].get(str(x["device"])) == g["index"]]
            parts = _groups(mine[0]) if mine else {n: 0 for n, _ in GROUPS}
            r["agent"] = {"parts": parts,
                          "driver": mine[0]["driver"] if mine else None}
            total += parts["returnable"]
            with_agent += 1
        g["returnable"] = total
        g["agents"] = with_agent
        g["agents_silent"] = silent
    if a.json:
        print(json.dumps(doc, separators=(",", ":")))
    else:
        sys.stdout.write(_ps_text(doc))
    return 1 if any("error" in g for g in doc.get("gpus", [])) else 0


def _ps_text(doc: dict) -> str:
    out = []
    stray = False
    for g in doc.get("gpus", []):
        if out:
            out.append("")
        if "error" in g:
            out.append(f"GPU {g['index']}: {g['error']}")
            continue
        out.append(f"GPU {g['index']}: {g['name']}, {_fb(g['used'])} / "
                   f"{_fb(g['total'])} used, {_fb(g['free'])} free")
        if not g["processes"]:
            out.append("  no processes")
            continue
        out.append(f"  {'PID':>7} {'USER':<8} {'MEMORY':>10} {'SHARE':>6}  "
                   f"COMMAND")
        for r in g["processes"]:
            mem = _fb(r["bytes"]) if r.get("bytes_known") else "n/a"
            share = (f"{r['share']:.1f}%" if r.get("share") is not None
                     else "n/a")
            mark = ""
            if r.get("state") == "exited":
                mark = "<exited> "
            elif r.get("state") not in (None, "alive"):
                mark = "<not in this pid namespace> "
            if r.get("stray_context"):
                stray = True
                mark += (f"<stray context: works on GPU "
                         f"{r['stray_context']['works_on']}> ")
            cmd = _short(r.get("command") or "?", 200)
            out.append(f"  {r['pid']:>7} {(r.get('user') or '-')[:16]:<8} "
                       f"{mem:>10} {share:>6}  {mark}{cmd}")
            ag = r.get("agent")
            if ag is None:
                continue
            if "error" in ag:
                out.append(f"  {'':>7} agent: {ag['kind']}: "
                           f"{_drop_pid(ag['error'], r['pid'])}")
                continue
            out.append(f"  {'':>7} " + ", ".join(
                f"{name} {_fb(ag['parts'][name])}" for name, _ in GROUPS))
        silent = g.get("agents_silent", 0)
        also = (f"; {silent} agent{'s' if silent != 1 else ''} did not "
                f"answer" if silent else "")
        if g.get("agents"):
            out.append(f"  a release of every process would return "
                       f"{_fb(g['returnable'])} ({g['agents']} with an "
                       f"agent{also})")
        elif silent:
            out.append(f"  no agent here answered ({silent} asked)")
        else:
            out.append("  no process here runs the agent")
    if stray:
        out += ["", "<stray context>: about a CUDA context on a GPU the "
                "process does not work on, the missing "
                "torch.cuda.set_device(local_rank) before the first CUDA "
                "call (pytorch#135279); call it first in each rank"]
    return "\n".join(out) + "\n"


# -- agent start / list ----------------------------------------------------

_REMOTE = """\
import sys
try:
    import gpureclaim.agent as _gpr_agent
except ImportError:
    sys.path.append({parent!r})
    import gpureclaim.agent as _gpr_agent
_gpr_agent.start()
"""


def _ptrace_scope() -> str:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return f.read().strip()
    except OSError:
        return "?"


def agent_start(argv: list) -> int:
    p = _Parser("agent", AGENT_USAGE)
    p.add_argument("-h", "--help", action="help")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--timeout", type=float, default=10.0)
    a = p.parse_args(argv)
    _positive(p, "--timeout", a.timeout)
    if not hasattr(sys, "remote_exec"):
        v = ".".join(map(str, sys.version_info[:3]))
        return _fail("agent", f"start --pid needs Python 3.14 or newer "
                     f"(sys.remote_exec, PEP 768) here and in process "
                     f"{a.pid}; this is Python {v} ({sys.executable}): set "
                     f"GPURECLAIM_PYTHON to a 3.14, or start the agent in "
                     f"the program (GPURECLAIM_AGENT=1, gpureclaim run "
                     f"--agent)")
    if _agent._proc_uid(a.pid) is None:
        return _fail("agent", f"process {a.pid} does not exist")
    if _agent.socket_path(a.pid):
        try:
            _agent.ask(a.pid, "status", timeout=a.timeout)
            print(_agent.socket_path(a.pid))
            return 0
        except _agent.AgentError:
            pass
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fd, script = tempfile.mkstemp(prefix="gpureclaim-agent-", suffix=".py")
    keep = None
    try:
        with os.fdopen(fd, "w") as f:
            f.write(_REMOTE.format(parent=parent))
        os.chmod(script, 0o644)  # the process reads it, as its own user
        try:
            sys.remote_exec(a.pid, script)
        except PermissionError as e:
            return _fail("agent", f"process {a.pid}: the kernel's ptrace "
                         f"rules refused it ({e}; kernel.yama.ptrace_scope"
                         f" = {_ptrace_scope()}): run it as root, or as "
                         f"the same user with ptrace_scope 0")
        except Exception as e:
            return _fail("agent", f"process {a.pid}: sys.remote_exec "
                         f"failed: {type(e).__name__}: {e}")
        end = time.monotonic() + a.timeout
        while time.monotonic() < end:
            path = _agent.socket_path(a.pid)
            if path:
                print(path)
                return 0
            time.sleep(0.02)
        keep = script
        return _fail("agent", f"process {a.pid} has not run the start "
                     f"within {a.timeout:g} s: it runs it at its next "
                     f"Python bytecode (a process blocked in C code, or "
                     f"stopped, runs it later; the script stays at "
                     f"{script} until then)")
    finally:
        if keep is None:
            try:
                os.unlink(script)
            except OSError:
                pass


def agent_list(argv: list) -> int:
    p = _Parser("agent", AGENT_USAGE)
    p.add_argument("-h", "--help", action="help")
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=float, default=5.0)
    a = p.parse_args(argv)
    found = list(_agent.discover())

    def one(item: tuple) -> dict:
        pid, path = item
        try:
            st = _agent.ask(pid, "status", timeout=a.timeout)
            return {"pid": pid, "socket": path, "status": st}
        except _agent.AgentError as e:
            return {"pid": pid, "socket": path, "kind": e.kind,
                    "error": str(e)}

    rows = _parallel(one, found)
    if a.json:
        print(json.dumps({"agents": rows}, indent=2))
        return 0
    if not rows:
        print("no agents (start one: GPURECLAIM_AGENT=1, gpureclaim run "
              "--agent, gpureclaim.agent.start())")
        return 0
    print(f"  {'PID':>7} {'PYTHON':<8} {'FRAMEWORKS':<16} SOCKET / COMMAND")
    for r in rows:
        st = r.get("status")
        if st is None:
            print(f"  {r['pid']:>7} {r['kind']}: "
                  f"{_drop_pid(r['error'], r['pid'])}")
            continue
        fw = ",".join(st.get("frameworks") or []) or "-"
        print(f"  {r['pid']:>7} {st.get('python', '?'):<8} {fw:<16} "
              f"{r['socket']}  {_short(' '.join(st.get('argv') or []))}")
    return 0


def agent_main(argv: list) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        if argv:
            sys.stdout.write(AGENT_USAGE)
            return 0
        sys.stderr.write("gpureclaim agent: give start --pid N or list\n"
                         "Run 'gpureclaim agent --help' for the options.\n")
        return 2
    if argv[0] == "start":
        return agent_start(argv[1:])
    if argv[0] == "list":
        return agent_list(argv[1:])
    sys.stderr.write(f"gpureclaim agent: unknown action {argv[0]!r} (start "
                     f"or list)\nRun 'gpureclaim agent --help' for the "
                     f"options.\n")
    return 2
