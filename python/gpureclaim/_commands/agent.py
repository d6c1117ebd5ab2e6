"""The agent's commands (docs/agent.md) that stay in Python: `agent
start|list` (their help, and every other, is the C command's:
cli/help_python.c). The C command hands them to this module
(cli/main.c, as it hands the --dask forms); `explain --pid`, `release
--pid`, `reclaim` and `ps --explain` themselves are the C command's
(cli/cmd_agent.c, cli/cmd_reclaim.c, cli/ps_explain.c: no interpreter's
start in front of the requests, every agent asked at once), and this
module's explain_main and release_main stand in for the --pid forms only
where the command is not installed. What a part of `ps --explain` is
stays Python's: the agent's server adds it to its answers as numbers
(gpureclaim/agent/_server.py flat_groups).
"""
from __future__ import annotations

import concurrent.futures as _futures
import json
import os
import sys
from typing import Any, Optional

from ..agent import _remote_start
from .. import agent as _agent
from ..agent._protocol import printable
from . import _Parser


def _positive(p: _Parser, name: str, v: float) -> None:
    if not v > 0:
        p.error(f"{name} must be positive")


def _fail(command: str, msg: str) -> int:
    sys.stderr.write(f"gpureclaim {command}: {printable(msg)}\n")
    return 1


def _lines(text: str) -> str:
    """An agent's report, each line printable() (src/out/text.h's rule)."""
    return "\n".join(printable(x) for x in text.split("\n"))


# -- explain --pid and release --pid ----------------------------------------

def explain_main(argv: list) -> int:
    p = _Parser("explain")
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
    if a.json:  # one line, as the C command prints it (json escapes)
        print(json.dumps(doc["result"], separators=(",", ":")))
    else:
        sys.stdout.write(_lines(str(doc.get("text")
                                    or json.dumps(doc["result"])))
                         .rstrip("\n") + "\n")
    return 0


def release_main(argv: list) -> int:
    p = _Parser("release")
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
        from .cluster import main as cluster_main

        return cluster_main("release", argv)
    sys.stderr.write("gpureclaim release: give --pid N (a process with an "
                     "agent) or --dask ADDRESS (a Dask cluster)\n"
                     "Run 'gpureclaim release --help' for the options.\n")
    return 2


def _parallel(fn, items: list, workers: int = 32) -> list:
    """[fn(x) for x in items], each in a thread of its own (at most
    `workers` at once), in the items' order."""
    if not items:
        return []
    with _futures.ThreadPoolExecutor(min(workers, len(items))) as ex:
        return list(ex.map(fn, items))


def _short(cmd: Optional[str], n: int = 60) -> str:
    if not cmd:
        return ""
    cmd = printable(" ".join(cmd.split()))
    return cmd if len(cmd) <= n else cmd[:n - 3] + "..."


def _drop_pid(msg: str, pid: int) -> str:
    p = f"process {pid}: "
    return msg[len(p):] if msg.startswith(p) else msg


# -- agent start / list ----------------------------------------------------

def agent_start(argv: list) -> int:
    p = _Parser("agent")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--timeout", type=float, default=10.0)
    a = p.parse_args(argv)
    _positive(p, "--timeout", a.timeout)
    try:
        print(_remote_start.start(a.pid, a.timeout))
    except _remote_start.Refused as e:
        return _fail("agent", str(e))
    return 0


def agent_list(argv: list) -> int:
    p = _Parser("agent")
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=float, default=5.0)
    a = p.parse_args(argv)
    found = list(_agent.discover())

    def one(item: tuple) -> dict:
        pid, path = item
        try:
            st = _agent.ask(pid, "status", timeout=a.timeout)
        except _agent.AgentError as e:
            return {"pid": pid, "socket": path, "kind": e.kind,
                    "error": str(e)}
        if not (isinstance(st, dict)
                and isinstance(st.get("python", ""), str)
                and all(isinstance(st.get(k) or [], list)
                        for k in ("frameworks", "argv"))):
            return {"pid": pid, "socket": path, "kind": "bad_answer",
                    "error": f"process {pid}'s agent answered a status "
                             f"that is not the protocol's"}
        return {"pid": pid, "socket": path, "status": st}

    rows = _parallel(one, found)
    if a.json:
        print(json.dumps({"agents": rows}, indent=2))
        return 0
    if not rows:
        print("no agents (start one: GPURECLAIM_AGENT=1, gpureclaim run "
              "--agent, gpureclaim.agent.start())")
        return 0
    # what each agent said is its process's word: printable() (and its
    # shape checked: a bad one is that agent's bad_answer line)
    print(f"  {'PID':>7} {'PYTHON':<8} {'FRAMEWORKS':<16} SOCKET / COMMAND")
    for r in rows:
        st = r.get("status")
        if st is None:
            print(f"  {r['pid']:>7} {r['kind']}: "
                  f"{printable(_drop_pid(r['error'], r['pid']))}")
            continue
        fw = ",".join(str(x) for x in st.get("frameworks") or []) or "-"
        print(f"  {r['pid']:>7} {printable(str(st.get('python', '?'))):<8} "
              f"{printable(fw):<16} {printable(r['socket'])}  "
              f"{_short(' '.join(str(x) for x in st.get('argv') or []))}")
    return 0


def agent_main(argv: list) -> int:
    if not argv:
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
