"""gpureclaim {ps,release,explain} --dask ADDRESS (python -m gpureclaim is
the same program): the cluster reports from the command line, with the
usage errors in the C command's style (the help is the C command's:
cli/help_python.c).

Exit status: 0 every worker answered; 1 the scheduler could not be
reached (or another runtime error); 2 usage; 3 the report was printed
but some workers gave none (they are listed with the reason).
"""
from __future__ import annotations

import argparse
import json
import sys

from . import _Parser


def _parser(command: str) -> argparse.ArgumentParser:
    p = _Parser(command)
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
    from ..cluster import dask as gdask

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
