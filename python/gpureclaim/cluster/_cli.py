"""python -m gpureclaim {ps,release,explain} --dask ADDRESS: the cluster
reports from the command line.

Exit status: 0 every worker answered; 1 the scheduler could not be
reached (or another runtime error); 2 usage; 3 the report was printed
but some workers gave none (they are listed with the reason).
"""
from __future__ import annotations

import argparse
import json
import sys

EXAMPLES = """\
examples:
  python -m gpureclaim ps --dask tcp://10.0.0.5:8786
  python -m gpureclaim release --dask tcp://10.0.0.5:8786 --json
  python -m gpureclaim explain --dask tcp://10.0.0.5:8786 --timeout 10

exit status: 0 every worker answered, 1 the scheduler could not be
reached, 2 usage, 3 some workers gave no report (listed with the reason)
"""

_WHAT = {
    "ps": "every GPU of the workers' hosts, once, and who holds what",
    "release": "give every worker's cached GPU memory back to the driver",
    "explain": "where each worker's GPU memory goes",
}


def _parser(command: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m gpureclaim {command}",
        description=f"{_WHAT[command]}, in every worker of a Dask "
        "cluster\n(through Client.run: the workers answer while tasks "
        "run).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dask", metavar="ADDRESS", required=True,
                   help="the Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--workers", metavar="ADDR", nargs="+",
                   help="only these workers (addresses); default: all")
    p.add_argument("--timeout", metavar="S", type=float, default=30.0,
                   help="seconds to connect, and for each worker to answer "
                   "(default 30)")
    p.add_argument("--json", action="store_true",
                   help="print the report as one JSON document (exact "
                   "bytes)")
    if command == "release":
        p.add_argument("--collect", choices=("auto", "always", "never"),
                       default="auto", help="when each worker runs "
                       "gc.collect() (default auto: only when live bytes "
                       "remain after its caches were emptied)")
        p.add_argument("--workspaces", action="store_true",
                       help="also free Torch's cuBLAS workspaces")
    return p


def main(command: str, argv: list[str]) -> int:
    args = _parser(command).parse_args(argv)
    if not args.timeout > 0:
        print("gpureclaim: --timeout must be positive", file=sys.stderr)
        return 2
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
