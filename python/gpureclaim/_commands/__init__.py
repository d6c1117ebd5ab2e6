"""The subcommands the C command hands to Python (cli/cmd_python.c), one
module each: demo.py, explain.py (explain SCRIPT), agent.py (agent
start|list, the --pid forms where the C command is missing), run.py; their
help is the C command's (cli/help_python.c), which __main__.py hands it
to. ``python -m gpureclaim`` (__main__.py)
dispatches to them, and to the wings' own commands: the exporter
(gpureclaim/metrics/_exporter.py), a post-mortem's report
(gpureclaim/oom/_postmortem.py) and a Dask cluster's reports
(cluster.py, which drives gpureclaim.cluster). What they share is here:
the usage error, argparse in the command's voice, and the C command
beside this package.
"""
import argparse
import os
import shutil
import sys
import sysconfig


def _usage_error(command, message):
    """The two lines of every usage error, exit status 2."""
    sys.stderr.write(f"gpureclaim {command}: {message}\n"
                     f"Run 'gpureclaim {command} --help' for the options.\n")
    return 2


class _Parser(argparse.ArgumentParser):
    """argparse with the command's voice: an error is the two lines of
    _usage_error; the help is the C command's (cli/help_python.c:
    python -m gpureclaim hands -h to it)."""

    def __init__(self, command: str):
        super().__init__(prog=f"gpureclaim {command}", add_help=False)
        self.command = command

    def error(self, message: str):
        sys.exit(_usage_error(self.command, message))


def _command():
    """The installed `gpureclaim` command: $GPURECLAIM_BIN, else the scripts
    folder of the installation scheme this package lies in (a virtual
    environment's bin, ~/.local/bin, /usr/local/bin), else bin/ beside the
    package (pip install --target), else a build folder's (<build>/cli
    beside <build>/python), else the PATH."""
    env = os.environ.get("GPURECLAIM_BIN")
    if env:
        return env
    site = os.path.realpath(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))
    dirs = []
    for scheme in sysconfig.get_scheme_names():
        try:
            paths = sysconfig.get_paths(scheme)
        except (KeyError, ValueError):
            continue
        if site in (os.path.realpath(paths.get("platlib", "")),
                    os.path.realpath(paths.get("purelib", ""))):
            dirs.append(paths["scripts"])
    dirs.append(os.path.join(site, "bin"))
    # a build folder's package (<build>/python) and its command
    # (<build>/cli), as the command finds the package (cli/cmd_python.c)
    dirs.append(os.path.join(os.path.dirname(site), "cli"))
    for d in dirs:
        p = os.path.join(d, "gpureclaim")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("gpureclaim")


def _exec_command(argv):
    cmd = _command()
    if not cmd:
        print("gpureclaim: the gpureclaim command is not installed beside "
              "this package (pip install . installs both); set "
              "GPURECLAIM_BIN to its path", file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(cmd, [cmd, *argv])
    except OSError as e:
        print(f"gpureclaim: cannot run {cmd}: {e.strerror}", file=sys.stderr)
        return 1
