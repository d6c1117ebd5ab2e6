"""Every example of README.md and docs/*.md, by the one runner (docs.py):
each block that runs without a GPU runs here, on the simulated driver,
with the environment docs/sim.md tells a user to set; each other block is
marked (GPU-only: scripts/gpu-check.sh docs; cluster engines:
tests/cluster/test_docs.py; not code). And the report's field table,
printed in docs/c-api.md and docs/python.md, is the keys the code emits."""
import glob
import json
import os
import re
import shutil
import subprocess

import pytest

import docs

BLOCKS = docs.all_blocks()


def checkout_status():
    """git status of the checkout, one entry a path; None without git."""
    try:
        out = subprocess.run(
            ["git", "-C", docs.ROOT, "status", "--porcelain", "-z",
             "--untracked-files=all"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {e for e in out.decode(errors="replace").split("\0") if e}


#: the checkout before any example ran (the last test compares)
BEFORE = checkout_status()


def test_every_block_says_what_it_is():
    assert [p for b in BLOCKS for p in docs.problems_of(b)] == []
    env = [b for b in BLOCKS if b.where == "env"]
    assert [b.id for b in env] == [b.id for b in env if "sim.md" in b.id]
    assert len(env) == 1


def test_the_sim_environment_is_each_shells_own():
    """docs/sim.md's environment gives each shell a simulated machine of
    its own: two shells that set it never share a GPU's tables, nor use
    the `default` state every other program on the machine uses."""
    [env] = [b for b in BLOCKS if b.where == "env"]
    states = set()
    for _ in range(2):
        p = subprocess.run(["bash", "-c", env.body + '\necho "$GPURECLAIM_SIM"'],
                           cwd=docs.ROOT, capture_output=True, text=True,
                           check=True)
        sim = p.stdout.strip()
        m = re.search(r"(?:^|;)state=([^;]+)", sim)
        assert m and m.group(1) != "default", sim
        states.add(m.group(1))
    assert len(states) == 2, states


def test_the_sim_environment_needs_only_what_make_demo_builds(tmp_path):
    """docs/sim.md's environment works after `make demo` alone (a build
    set up as the Makefile's demo rule sets it up: no test suites): every
    file and folder it names in build/ is made by that build, the fake
    torch's stand-in libraries included (issue 33)."""
    make = open(os.path.join(docs.ROOT, "Makefile")).read()
    [opts] = re.findall(r"^demo: BUILD_SETUP = (.*)$", make, re.M)
    build = tmp_path / "build"
    subprocess.run(["bash", os.path.join(docs.ROOT, "scripts",
                                         "meson-setup.sh"), str(build),
                    os.environ.get("CC", "cc"), *opts.split()],
                   cwd=docs.ROOT, check=True, capture_output=True)
    p = subprocess.run(["meson", "introspect", str(build), "--targets"],
                       capture_output=True, text=True, check=True)
    made = {f for t in json.loads(p.stdout) for f in t["filename"]}
    folders = {os.path.dirname(f) for f in made} | {
        os.path.dirname(os.path.dirname(f)) for f in made}
    [env_block] = [b for b in BLOCKS if b.where == "env"]
    p = subprocess.run(["bash", "-c", env_block.body + "\nenv -0\n"],
                       cwd=tmp_path, capture_output=True, check=True,
                       env=os.environ.copy())
    env = dict(kv.split("=", 1) for kv in p.stdout.decode().split("\0")
               if "=" in kv)
    named = []
    for k in ("GPURECLAIM_CUDA_LIBRARY", "GPURECLAIM_NVML_LIBRARY"):
        assert env[k] in made, (k, env[k])
        named.append(k)
    for k in ("LD_LIBRARY_PATH", "PYTHONPATH", "PATH", "GPR_FAKES_BUILD"):
        for d in env[k].split(":"):
            if d.startswith(str(build) + "/"):
                assert d in folders, (k, d)
                named.append(k)
    fakes = env["GPR_FAKES_BUILD"]
    for layout in ("2.11", "2.13"):  # the fake torch's FAKE_TORCH_LAYOUT
        assert os.path.join(fakes, f"libtorch_cuda-{layout}.so") in made
    assert len(set(named)) == 6, named


def test_the_files_the_docs_cite_are_here():
    """A path in backticks that begins with a folder of the checkout names
    a file of the checkout or of the build folder (the build's outputs are
    written as their paths there: `src/libgpureclaim.a`); a document a page
    cites (.md, .txt) is in the checkout: a reader can open what is cited
    (issue 33: explain.md cited a reference file the repository lacks)."""
    top = {d for d in os.listdir(docs.ROOT)
           if os.path.isdir(os.path.join(docs.ROOT, d)) and d != "build"
           and not d.startswith(".")}
    build = docs.build_dir()
    missing = []
    for page in docs.docs():
        text = open(page, encoding="utf-8").read()
        for p in re.findall(r"`([A-Za-z_][\w.-]*/[\w./-]*\.[A-Za-z]\w*)`",
                            text):
            first = p.split("/")[0]
            if first not in top and not p.endswith((".md", ".txt")):
                continue
            here = [os.path.join(docs.ROOT, p), os.path.join(build, p),
                    os.path.join(os.path.dirname(page), p)]
            if not any(os.path.exists(h) for h in here):
                missing.append((os.path.relpath(page, docs.ROOT), p))
    assert missing == []


# the words docs/naming.md retired ("Words"): one word for one thing
RETIRED = re.compile(r"returnable|reclaimable|given back|gave back|"
                     r"came back|RETURNED|WOULD RETURN")


def test_no_page_says_a_retired_word():
    """README, docs/ and the dashboard say the words of docs/naming.md's
    "Words"; a retired one stands only there, and as a key (in backticks)
    where a page names the old keys still written for one release."""
    pages = docs.docs() + sorted(glob.glob(os.path.join(docs.ROOT, "docs",
                                                        "*.json")))
    found = []
    for page in pages:
        if page.endswith("naming.md"):
            continue
        for n, line in enumerate(open(page, encoding="utf-8"), 1):
            prose = re.sub(r"`[^`]*`", "", line)
            if RETIRED.search(prose):
                found.append(f"{os.path.relpath(page, docs.ROOT)}:{n}: "
                             f"{line.strip()[:100]}")
    assert found == []


def test_a_duration_in_ms_may_be_seconds_on_a_slow_machine():
    """'in ... ms' in a transcript is a duration: a release that took over
    a second on a loaded machine prints '1.20 s' (out/fmt.c), and that is
    no reason for an example to fail."""
    want = ["released 0 B (0 bytes) in ... ms; nothing was measured"]
    assert docs.matches(want, ["released 0 B (0 bytes) in 0.4 ms; "
                               "nothing was measured"])
    assert docs.matches(want, ["released 0 B (0 bytes) in 1.20 s; "
                               "nothing was measured"])
    assert not docs.matches(want, ["released 0 B (0 bytes) in 1.2 GiB; "
                                   "nothing was measured"])
    assert not docs.matches(["took 3 ms"], ["took 3 s"])


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.where == "sim"],
                         ids=lambda b: b.id)
def test_block_runs_as_written(block):
    if block.marker == "python3.14" and docs.remote_exec_python() is None:
        pytest.skip("no python3.14 (scripts/python-remote-exec.sh)")
    failure = docs.run_block(block)
    assert failure is None, failure  # whole: pytest cuts a long repr


def field_table(page):
    """The key paths of the table between <!-- report-fields --> and the
    next blank line of a page."""
    text = open(os.path.join(docs.ROOT, "docs", page)).read()
    start = text.index("<!-- report-fields -->")
    table = text[start:].split("\n\n", 1)[0]
    keys = re.findall(r"^\| `([^`]+)` \|", table, re.M)
    return table.split("\n", 1)[1], keys


def key_paths(value, prefix=""):
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out.append(prefix + k)
            out += key_paths(v, prefix + k + ".")
        return out
    if isinstance(value, list):
        out = [prefix[:-1] + "[]"] if prefix else []
        for item in value[:1]:
            out += key_paths(item, prefix[:-1] + "[].")
        return out
    return []


def test_one_field_table_is_the_keys_of_every_form():
    c_table, c_keys = field_table("c-api.md")
    py_table, py_keys = field_table("python.md")
    assert c_table == py_table  # the same table on both pages
    d = docs.scratch()
    env = docs.sim_environment("docs-fields", d)
    try:
        demo = subprocess.run(
            [os.path.join(d, "build", "examples", "release_demo"),
             "--json"], env=env, capture_output=True, text=True, check=True)
        code = ("import json, torch, gpureclaim\n"
                "t = torch.empty(1 << 20, dtype=torch.uint8, device='cuda')\n"
                "x = torch.empty(1 << 20, dtype=torch.uint8, device='cuda'); del x\n"
                "print(json.dumps(gpureclaim.release().to_dict()))\n")
        py = subprocess.run(["python3", "-c", code], env=env, check=True,
                            capture_output=True, text=True)
    finally:
        docs.remove_state("docs-fields")
        shutil.rmtree(d, ignore_errors=True)
    c_doc, py_doc = json.loads(demo.stdout), json.loads(py.stdout)
    assert sorted(set(key_paths(c_doc))) == sorted(c_keys)
    assert sorted(set(key_paths(py_doc))) == sorted(c_keys)


def test_the_examples_wrote_nothing_into_the_checkout():
    """Runs last: no example wrote into the checkout (a file an example
    writes, `hold.log` say, that is also a file of the checkout would be
    written through the scratch folder's link, and an earlier run's copy
    read by the next: docs/suspend.md's example once read a stale
    "holding" that way)."""
    after = checkout_status()
    if BEFORE is None or after is None:
        pytest.skip("not a git checkout")
    assert sorted(after - BEFORE) == []
