"""The documentation's command lines that use a build folder, run as
written against the build under test: README.md's, docs/ps.md's and
docs/sim.md's `GPURECLAIM_SIM=... LD_LIBRARY_PATH=build/sim
build/cli/gpureclaim ps` lines (with "build/" replaced by that folder and a
sim state of their own), and the README's build-folder compile of
examples/minimal.c."""
import os
import re
import subprocess

import pytest

from conftest import BIN, ROOT

BUILD = BIN.parent.parent  # <build>/cli/gpureclaim
LINE = re.compile(r"^(?:\$ )?(GPURECLAIM_SIM='[^']*' LD_LIBRARY_PATH=build/sim "
                  r"build/cli/gpureclaim ps[^;]*)$")


def doc_lines():
    found = []
    for page in ("README.md", "docs/ps.md", "docs/sim.md"):
        for n, line in enumerate((ROOT / page).read_text().splitlines(), 1):
            m = LINE.match(line)
            if m:
                found.append(pytest.param(m[1], id=f"{page}:{n}"))
    return found


def test_the_pages_still_hold_such_lines():
    assert len(doc_lines()) >= 4


@pytest.mark.parametrize("line", doc_lines())
def test_doc_ps_line_runs(line, tmp_path):
    state = f"docs-{os.getpid()}-{tmp_path.name}"
    cmd = re.sub(r"GPURECLAIM_SIM='([^']*)'",
                 lambda m: f"GPURECLAIM_SIM='{m[1]};state={state}'", line)
    cmd = cmd.replace("build/", f"{BUILD}/")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPURECLAIM", "LD_LIBRARY_PATH"))}
    try:
        p = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True,
                           text=True, timeout=30)
    finally:
        for f in os.listdir("/dev/shm"):
            if f.startswith("gpureclaim-sim-") and f.endswith(state):
                os.unlink(f"/dev/shm/{f}")
    # a broken GPU is a runtime error (exit 1), the others are still listed
    assert p.returncode == (1 if "fault=broken" in line else 0), p
    assert "Simulated GPU" in p.stdout, p.stdout


@pytest.mark.skipif(bool(os.environ.get("GPR_SANITIZED")),
                    reason="a sanitized build's library needs the sanitizers")
def test_readme_build_folder_compile(tmp_path):
    text = (ROOT / "README.md").read_text()
    m = re.search(r"# from a build folder: (cc examples/minimal\.c .*)$", text,
                  re.M)
    assert m, "README.md lost its build-folder compile line"
    exe = tmp_path / "minimal"
    cmd = m[1].replace("build/", f"{BUILD}/") + f" -o {exe}"
    subprocess.run(["sh", "-c", cmd], cwd=ROOT, check=True)
    p = subprocess.run([exe], capture_output=True, text=True)
    assert "released 0 B (0 bytes)" in p.stdout, p
