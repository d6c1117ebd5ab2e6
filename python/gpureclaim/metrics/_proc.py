"""What /proc says about another process, for labels: its user, its
command line and its container (the exporter, gpureclaim/metrics/).

Everything here reads /proc only and never raises: a process that is gone,
hidden (hidepid) or in another pid namespace gives empty strings. The
facts of a pid are kept while the process is the same one (the ctime of
/proc/PID, which the kernel sets when the process starts), so a reading of
1000 processes costs one stat() each after the first.
"""
from __future__ import annotations

import os
import re
import threading
from typing import NamedTuple, Optional

from ..agent._protocol import printable

#: label values are cut to this many characters (Prometheus: bounded
#: label values); the cut ends in "..."
COMMAND_CHARS = 64
_CGROUP_BYTES = 8192
_CMDLINE_BYTES = 4096


class ProcFacts(NamedTuple):
    user: str       # the user name, the uid where it has no name, or ""
    command: str    # the command line (the program's name without its
    # folder), cut and made printable, or ""
    container: str  # the container id as the runtime writes it, or ""
    pod_uid: str    # the Kubernetes pod's uid (with dashes), or ""


_EMPTY = ProcFacts("", "", "", "")


def label_value(text: str, limit: int = COMMAND_CHARS) -> str:
    """A label value from anything a process may put in its command line:
    printable() of it (agent/_protocol.py), and a value longer than `limit` cut, its last three
    characters "...". prometheus_client then escapes the backslashes and
    quotes, so no command can break the exposition."""
    out = printable(text[:limit + 1])
    if len(out) > limit:
        out = out[:limit - 3] + "..."
    return out


def _read(path: str, limit: int) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


# cgroup paths of containers, as the runtimes write them:
#   systemd driver: .../kubepods-burstable-pod<uid, _ for ->.slice/
#                   cri-containerd-<id>.scope (crio-, docker-, libpod-)
#   cgroupfs driver: /kubepods/burstable/pod<uid>/<id>, /docker/<id>
_POD = re.compile(r"pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}"
                  r"[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})(?:\.slice)?$")
_SCOPE = re.compile(r"^(?:[a-z0-9]+-)*?(?:cri-containerd|containerd|crio|"
                    r"docker|libpod)-([0-9a-f]{12,128})\.scope$")
_BARE_ID = re.compile(r"^[0-9a-f]{64}$")


def container_of(cgroup: str) -> tuple[str, str]:
    """(container id, pod uid) from the text of /proc/PID/cgroup; "" for
    what the path does not name. The cgroup v2 line (0::) is read first,
    else the memory controller's, else the first line."""
    lines = [ln.split(":", 2) for ln in cgroup.splitlines()]
    lines = [p for p in lines if len(p) == 3]
    if not lines:
        return "", ""
    pick = next((p for p in lines if p[0] == "0" and p[1] == ""), None) or \
        next((p for p in lines if "memory" in p[1].split(",")), lines[0])
    container = pod = ""
    for part in pick[2].split("/"):
        m = _POD.search(part)
        if m:
            pod = m.group(1).replace("_", "-").lower()
            continue
        m = _SCOPE.match(part)
        if m:
            container = m.group(1)
        elif _BARE_ID.match(part):
            container = part
    return label_value(container, 128), pod


class ProcCache:
    """The facts of pids, kept while each pid is the same process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: dict[int, tuple[int, ProcFacts]] = {}
        self._users: dict[int, str] = {}

    def _user(self, uid: int) -> str:
        name = self._users.get(uid)
        if name is None:
            try:
                import pwd

                name = pwd.getpwuid(uid).pw_name
            except (KeyError, ImportError):
                name = str(uid)
            self._users[uid] = name
        return name

    def facts(self, pid: int) -> ProcFacts:
        try:
            st = os.stat(f"/proc/{pid}")
        except (OSError, ValueError):
            return _EMPTY
        with self._lock:
            hit = self._facts.get(pid)
            if hit and hit[0] == st.st_ctime_ns:
                return hit[1]
        raw = _read(f"/proc/{pid}/cmdline", _CMDLINE_BYTES) or b""
        argv = raw.rstrip(b"\0").split(b"\0")
        # the program by its name, not its path (the label is cut: the
        # arguments matter more than the folder)
        argv[0] = argv[0].rsplit(b"/", 1)[-1]
        command = b" ".join(argv).decode("utf-8", "replace")
        if not command:  # a kernel thread, a zombie: its name
            command = (_read(f"/proc/{pid}/comm", 64) or b"").decode(
                "utf-8", "replace").strip()
            command = f"[{command}]" if command else ""
        cg = (_read(f"/proc/{pid}/cgroup", _CGROUP_BYTES) or b"").decode(
            "utf-8", "replace")
        container, pod = container_of(cg)
        with self._lock:
            f = ProcFacts(self._user(st.st_uid), label_value(command),
                          container, pod)
            self._facts[pid] = (st.st_ctime_ns, f)
        return f

    def keep(self, pids) -> None:
        """Forgets the pids not in `pids` (processes no GPU lists now)."""
        live = set(pids)
        with self._lock:
            for pid in [p for p in self._facts if p not in live]:
                del self._facts[pid]
