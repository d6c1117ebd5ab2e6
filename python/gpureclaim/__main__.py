"""python -m gpureclaim: the `gpureclaim` command.

`python -m gpureclaim ARGS` and `gpureclaim ARGS` are one program: ps,
trace, report, version and the help are the command's own (C, installed
beside the interpreter's scripts: this module runs it), and the command
hands explain and demo to this module. So the help, the output and the exit
status are the same either way. $GPURECLAIM_BIN names the command where it
is not installed (a build folder).
A Dask cluster's reports (ps --dask, explain --dask, release --dask:
gpureclaim/_commands/cluster.py, docs/cluster.md) are this module's too.

This module only dispatches; each subcommand is a module of
gpureclaim/_commands/ or a wing's own:

explain SCRIPT: gpureclaim/_commands/explain.py.
demo: the design record's scenario, before and after
(gpureclaim/_commands/demo.py).
agent, and the --pid forms of the agent's commands:
gpureclaim/_commands/agent.py.
run: CMD with the startup hook's features on (gpureclaim/_commands/run.py).
exporter: Prometheus metrics of the host's GPU memory
(gpureclaim/metrics/_exporter.py, docs/metrics.md).
report of an out-of-memory post-mortem (gpureclaim/oom/_postmortem.py): the
command hands it here, as the file's first bytes say.
"""
import sys

from ._commands import _command, _exec_command
from ._commands.demo import _demo, _demo_trace, _fail, _run
from ._commands.explain import _explain


def _for_cluster(argv):
    """A Dask cluster's report: ps given --dask, explain whose first
    argument is --dask (else it names a script). release goes to
    gpureclaim/_commands/agent.py, which hands --dask on. cli/main.c
    hands the same to this module."""
    if argv[:1] == ["ps"]:
        opts = argv[1:argv.index("--")] if "--" in argv else argv[1:]
        return any(a.startswith("--dask") for a in opts)
    return argv[:1] == ["explain"] and argv[1:2] != [] and \
        argv[1].startswith("--dask")


def _ps_explain(argv):
    """`ps` given --explain (before any --): the agents' parts."""
    opts = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    return argv[:1] == ["ps"] and "--explain" in opts


def _agent_client(argv):
    """`release --pid N` and `explain --pid N` (not their help): the
    command's own, in C (cli/cmd_agent.c), where it is installed."""
    opts = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    return (argv[:1] in (["release"], ["explain"])
            and any(a == "--pid" or a.startswith("--pid=") for a in opts)
            and not any(a in ("-h", "--help") for a in opts)
            and _command() is not None)


def _help_asked(argv):
    """Whether argv asks for the help of a subcommand this package runs:
    -h or --help among its options (for explain SCRIPT and run, before
    SCRIPT or CMD, whose own options follow). The command says it, in C
    (cli/help_python.c, by the same rule): one text, whichever way asked,
    and none that needs Python."""
    cmd, rest = (argv[0], argv[1:]) if argv else (None, [])
    opts = rest[:rest.index("--")] if "--" in rest else rest
    helps = {"-h", "--help"}
    if cmd == "explain" and not any(
            a.startswith(("--pid", "--dask")) for a in opts):
        i = 0
        while i < len(opts) and opts[i] in ("--holders", "--json"):
            i += 1
        return i < len(opts) and opts[i] in helps
    if cmd == "run":
        for a in rest:
            if a == "--" or not a.startswith("-"):
                return False
            if a in helps:
                return True
        return False
    ours = cmd in ("explain", "release", "reclaim", "agent", "demo",
                   "exporter", "report") or (cmd == "ps" and any(
                       a.startswith(("--dask", "--explain")) for a in opts))
    return ours and bool(helps & set(opts))


def main(argv):
    if _help_asked(argv):
        return _exec_command(argv)
    if _agent_client(argv):
        return _exec_command(argv)
    if argv[:1] == ["release"]:
        from gpureclaim._commands.agent import release_entry

        return release_entry(argv[1:])
    if argv[:1] == ["explain"] and argv[1:2] and \
            argv[1].startswith("--pid"):
        from gpureclaim._commands.agent import explain_main

        return explain_main(argv[1:])
    if _ps_explain(argv) or argv[:1] == ["reclaim"]:
        # the command's own (cli/ps_explain.c, cli/cmd_reclaim.c)
        return _exec_command(argv)
    if argv[:1] == ["agent"]:
        from gpureclaim._commands.agent import agent_main

        return agent_main(argv[1:])
    if _for_cluster(argv):
        from gpureclaim._commands.cluster import main as cluster_main

        return cluster_main(argv[0], argv[1:])
    if argv[:1] == ["explain"]:
        return _explain(argv[1:])
    if len(argv) >= 2 and argv[0] == "_demo-run":
        try:
            return _run(argv[1])
        except Exception as e:  # one line, no traceback
            return _fail(f"{type(e).__name__}: {e}")
    if argv[:1] == ["demo"]:
        return _demo(argv[1:])
    if argv[:1] == ["run"]:
        from gpureclaim._commands.run import main as run_main

        return run_main(argv[1:])
    if argv[:1] == ["exporter"]:
        from gpureclaim.metrics._exporter import main as exporter_main

        return exporter_main(argv[1:])
    if argv[:1] == ["report"] and _postmortem_named(argv[1:]):
        from gpureclaim.oom._postmortem import main as report_main

        return report_main(argv[1:])
    if len(argv) == 3 and argv[0] == "_demo-trace":
        return _demo_trace(argv[1:])
    return _exec_command(argv)


def _postmortem_named(args):
    """`report` of an out-of-memory post-mortem: a FILE that begins with
    its signature (the command checks the same bytes and hands it here;
    a trace log goes to the command)."""
    from gpureclaim.oom._postmortem import is_postmortem

    return any(is_postmortem(a) for a in args if not a.startswith("-"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
