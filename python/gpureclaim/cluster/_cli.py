"""gpureclaim {ps,release,explain} --dask ADDRESS (python -m gpureclaim is
the same program): the cluster reports from the command line, with the
help and the usage errors in the C command's style.

Exit status: 0 every worker answered; 1 the scheduler could not be
reached (or another runtime error); 2 usage; 3 the report was printed
but some workers gave none (they are listed with the reason).
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap

_WHAT = {
    "ps": "List every GPU of the workers' hosts, once, and who holds what "
          "on it,",
    "release": "Give every worker's cached GPU memory back to the driver,",
    "explain": "Say where each worker's GPU memory goes,",
}

_COMMON_OPTIONS = """\
    --dask ADDRESS      the Dask scheduler, e.g. tcp://host:8786
    --workers ADDR...   only these workers (addresses); default: all
    --timeout SECONDS   to connect, and for each worker to answer (default 30)
    --json              the report as one JSON document (exact bytes)
"""

_RELEASE_OPTIONS = """\
    --collect WHEN      when each worker runs gc.collect(): auto (the default:
                        only when live bytes remain after its caches were
                        emptied), always, never
    --workspaces        also free Torch's cuBLAS workspaces
"""

_TAIL = """\
    -h, --help          show this help

EXAMPLES:
    gpureclaim ps --dask tcp://10.0.0.5:8786
    gpureclaim release --dask tcp://10.0.0.5:8786 --json
    gpureclaim explain --dask tcp://10.0.0.5:8786 --timeout 10

Exit status: 0 every worker answered, 1 the scheduler could not be reached,
2 bad usage, 3 some workers gave no report (listed with the reason).
"""


def usage(command: str) -> str:
    """The help of `gpureclaim COMMAND --dask`, in the command's own style
    (cli/: USAGE, OPTIONS, EXAMPLES, exit status)."""
    head = f"USAGE: gpureclaim {command} "
    forms = ["--dask ADDRESS [--workers ADDR...]", "[--timeout SECONDS] [--json]"]
    if command == "release":
        forms.append("[--collect auto|always|never] [--workspaces]")
    text = head + ("\n" + " " * len(head)).join(forms) + "\n\n"
    what = (f"{_WHAT[command]} in every worker of a Dask cluster (through "
            "Client.run: the workers answer while tasks run), each about its "
            "own process (docs/cluster.md).")
    text += textwrap.fill(what, 72) + "\n\nOPTIONS:\n" + _COMMON_OPTIONS
    if command == "release":
        text += _RELEASE_OPTIONS
    return text + _TAIL


class _Parser(argparse.ArgumentParser):
    """argparse with the command's voice: its help is usage(), an error is
    the two lines every usage error of gpureclaim prints."""

    def __init__(self, command: str):
        super().__init__(prog=f"gpureclaim {command}", add_help=False)
        self.command = command

    def format_help(self) -> str:
        return usage(self.command)

    def error(self, message: str):
        sys.stderr.write(f"gpureclaim {self.command}: {message}\n"
                         f"Run 'gpureclaim {self.command} --help' for the "
                         "options.\n")
        sys.exit(2)


def _parser(command: str) -> argparse.ArgumentParser:
    p = _Parser(command)
    p.add_argument("-h", "--help", action="help")
    p.add_argument("--dask", metavar="ADDRESS", required=True)
    p.add_argument("--workers", metavar="ADDR", nargs="+")
    p.add_argument("--timeout", metavar="S", type=float, default=30.0)
    p.add_argument("--json", action="store_true")
    if command == "release":
        p.add_argument("--collect", choices=("auto", "always", "never"),
                       default="auto")
        p.add_argument("--workspaces", action="store_true")
    return p


def main(command: str, argv: list[str]) -> int:
    p = _parser(command)
    args = p.parse_args(argv)
    if not args.timeout > 0:
        p.error("--timeout must be positive")
    try:
        from distributed import Client
    except ImportError:
        print("gpureclaim: --dask needs the distributed package: pip "
              "install 'gpureclaim[dask]'", file=sys.stderr)
        return 1
    from . import dask as gdask

    try:
        client = Client(args.dask, timeout=args.timeout,
                        set_as_default=False)
    except Exception as e:
        print(f"gpureclaim: cannot reach the Dask scheduler at "
              f"{args.dask}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    kw = dict(workers=args.workers, timeout=args.timeout)
    if command == "release":
        kw.update(collect={"auto": "auto", "always": True,
                           "never": False}[args.collect],
                  workspaces=args.workspaces)
    try:
        report = getattr(gdask, command)(client, **kw)
    except Exception as e:
        print(f"gpureclaim: {command} failed: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    finally:
        client.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report)
    return 3 if report.failed else 0
