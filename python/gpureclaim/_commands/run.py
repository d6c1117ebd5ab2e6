"""`gpureclaim run [--oom[=PATH]] [--agent] [--resume-on-demand] -- CMD
[ARGS...]`: runs CMD with gpureclaim's features started in its processes
(docs/oom.md, "In a program you did not write"; docs/agent.md;
docs/suspend.md, "Resume on demand").

It sets each feature's variable (GPURECLAIM_OOM: 1, or PATH;
GPURECLAIM_AGENT: 1) and puts the
package's bootstrap folder (gpureclaim/_startup/_bootstrap, whose
sitecustomize calls the startup hook, gpureclaim/_startup/) first on
PYTHONPATH, so
that the hook runs in a build tree or an environment without the wheel's
.pth too, then execs CMD. The variables reach every Python process CMD
starts; a program that is not Python is run as it is, and `run` says so.
--resume-on-demand puts the interposer (libgpureclaim_trace.so) in front
of the driver of every process CMD starts, Python or not: dormant (it
records nothing) and in wake mode (GPURECLAIM_WAKE=1). The command (C)
finds the tracer and orders LD_PRELOAD as `gpureclaim trace` does, and
hands the value here in GPURECLAIM_RUN_PRELOAD (cli/cmd_python.c); run
from `python -m gpureclaim`, this module asks the command for it.
The command (C) hands `run` to this module, as it hands `explain`.
"""
from __future__ import annotations

import os
import shutil
import sys
from typing import Optional


def bootstrap_dir() -> str:
    """The folder whose sitecustomize.py starts gpureclaim in a child."""
    return os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "_startup", "_bootstrap")


def _usage_error(msg: str) -> int:
    sys.stderr.write(f"gpureclaim run: {msg}\n"
                     "Run 'gpureclaim run --help' for the options.\n")
    return 2


def _is_python(path: str) -> bool:
    """CMD is a Python interpreter, or a script whose #! line names one."""
    if os.path.basename(path).startswith("python"):
        return True
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


PRELOAD_VARIABLE = "GPURECLAIM_RUN_PRELOAD"


def environment(oom: Optional[str], base: dict,
                agent: Optional[str] = None,
                preload: Optional[str] = None) -> dict:
    """base with the variables of the features asked for and the
    bootstrap folder first on PYTHONPATH (once); with preload (the
    command's LD_PRELOAD for --resume-on-demand), the interposer in
    front, dormant and in wake mode."""
    env = dict(base)
    env.pop(PRELOAD_VARIABLE, None)
    if oom is not None:
        env["GPURECLAIM_OOM"] = oom
    if agent is not None:
        env["GPURECLAIM_AGENT"] = agent
    if preload is not None:
        env["LD_PRELOAD"] = preload
        env["GPURECLAIM_WAKE"] = "1"
        env["GPURECLAIM_TRACE_DORMANT"] = "1"
    boot = bootstrap_dir()
    old = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([boot] + [p for p in old
                                                  if p != boot])
    return env


def main(argv: list) -> int:
    oom = agent = None
    wake = False
    args = list(argv)
    while args:
        a = args[0]
        if a == "--":
            args.pop(0)
            break
        if not a.startswith("-"):
            break
        args.pop(0)
        if a == "--agent":
            agent = "1"
        elif a == "--resume-on-demand":
            wake = True
        elif a == "--oom":
            oom = "1"
        elif a.startswith("--oom="):
            oom = a[len("--oom="):]
            if not oom:
                return _usage_error("--oom= needs a path (or give --oom "
                                    "alone for the current folder)")
        else:
            return _usage_error(f"unknown option '{a}'")
    if not args:
        return _usage_error("expected a command after the options (-- CMD "
                            "ARGS...)")
    if oom is None and agent is None and not wake:
        return _usage_error("nothing to start: give --oom, --agent or "
                            "--resume-on-demand")
    preload = None
    if wake:
        preload = os.environ.get(PRELOAD_VARIABLE)
        if not preload:
            # python -m gpureclaim: the command finds the interposer
            from . import _exec_command

            return _exec_command(["run", *argv])
    cmd = args
    found = shutil.which(cmd[0]) if os.sep not in cmd[0] else cmd[0]
    if found is None or not os.path.exists(found):
        sys.stderr.write(f"gpureclaim run: {cmd[0]}: command not found\n")
        return 127
    if not os.path.isdir(found) and not os.access(found, os.X_OK):
        # the real reason, before any guess at what the file is (a shell
        # says "Permission denied", 126)
        opts = " ".join(argv[:len(argv) - len(cmd)]).replace(" --", "")
        sys.stderr.write(f"gpureclaim run: {cmd[0]} is not executable "
                         f"(chmod +x {cmd[0]}, or run it with its "
                         f"interpreter: gpureclaim run {opts.strip()} -- "
                         f"python3 {' '.join(cmd)})\n")
        return 126
    if not _is_python(found) and (oom is not None or agent is not None):
        names = " and ".join(v for v, on in (("GPURECLAIM_OOM", oom),
                                             ("GPURECLAIM_AGENT", agent))
                             if on is not None)
        sys.stderr.write(f"gpureclaim run: {cmd[0]} is not a Python "
                         f"program: {names} reach"
                         f"{'' if ' and ' in names else 'es'} only the "
                         f"Python processes it starts\n")
    env = environment(oom, os.environ, agent, preload)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as e:
        sys.stderr.write(f"gpureclaim run: cannot run {cmd[0]}: "
                         f"{e.strerror}\n")
        return 127
