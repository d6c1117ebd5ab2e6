"""`make demo`'s output (scripts/demo.sh) on the simulated driver, as a new
user reads it (issue 20): a heading for each part, no Markdown, the
driver's figure the same way in both parts, what stays held explained,
and the command it names runs as printed."""
import os
import re
import shlex
import subprocess

import pytest

from conftest import BIN, ROOT

SANITIZED = bool(os.environ.get("GPR_SANITIZED"))
BUILD = BIN.parent.parent  # <build>/cli/gpureclaim


@pytest.fixture(scope="module")
def demo():
    if SANITIZED:
        pytest.skip("the demo's Python cannot import a sanitized build's "
                    "extension (the gcc build runs it)")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPURECLAIM", "PYTHONPATH"))}
    p = subprocess.run(["bash", str(ROOT / "scripts/demo.sh"),
                        os.path.relpath(BUILD, ROOT)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def test_both_parts_have_a_heading(demo):
    heads = re.findall(r"^== (.*)$", demo.stdout, re.M)
    assert len(heads) == 2, demo.stdout
    assert heads[0].startswith("Part 1: ") and heads[1].startswith("Part 2: ")


def test_no_markdown_and_no_jargon(demo):
    out = demo.stdout
    assert "|---" not in out and not re.search(r"^\|", out, re.M), out
    for word in ("CUPTI", "schedstat", "perf page", "libffi",
                 "design record", "context_created", "interposer"):
        assert word not in out, word


def test_the_figures_are_the_drivers_in_both_parts(demo):
    out = demo.stdout
    part1, part2 = out.split("== Part 2: ")
    # the same figure, the same format: the driver's per-process bytes
    # with the context (512 MiB on the sim), in binary units
    rows = {m[0]: m[1:] for m in re.findall(
        r"^  (\S.*?\)) +(\S+ \S+) +(\S+ \S+) +(\S+ \S+) +\S+ \S+$", part1, re.M)}
    assert rows["torch.cuda.empty_cache() + free_all_blocks()"] == \
        ("2.5 GiB", "1.5 GiB", "1.0 GiB"), rows
    assert rows["gpureclaim.release_cached_memory()"] == \
        ("2.5 GiB", "512.0 MiB", "2.0 GiB"), rows
    assert "returns 2.147483648: its figure is in units of 1e9 bytes" in \
        " ".join(part1.split())
    assert "1 GiB in CuPy: 2.5 GiB" in part2
    assert "gpureclaim.release(): 512.0 MiB (1.0 GiB released)" in part2
    assert not re.search(r"\d\.\d{3} GiB", out), out  # one decimal


def test_what_stays_held_is_explained(demo):
    text = " ".join(demo.stdout.split())
    assert "What stays held, 512.0 MiB, is what the process held before " \
        "the scenario: the CUDA context" in text
    # the trace's 0 B at the end next to the driver's 512 MiB
    assert "allocated and not freed at the end: 0 B." in text
    assert "the trace does not count it" in text


def test_the_command_it_names_runs_as_printed(demo):
    lines = demo.stdout.splitlines()
    i = lines.index("Every call, by library and device:")
    cmd = shlex.split(lines[i + 1])
    assert cmd[1:3] == ["report", os.path.relpath(BUILD, ROOT) +
                        "/demo-seed.trace"], cmd
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "demo-seed.trace" in p.stdout, p
