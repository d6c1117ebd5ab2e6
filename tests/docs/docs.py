"""The one runner of the documentation's examples: every fenced block of
README.md and docs/*.md runs, or says why it does not, so no example can
go stale.

A block's info string says what it is, and an HTML comment on the line
before it may say where it runs:

  ```console   a transcript: each `$ ` line is a command (a line ending in
               `\\` goes on, a here-document to its end marker), the lines
               after it its output (stdout and stderr), matched line by
               line; `...` in a line matches any text, a line `...` alone
               any number of lines
  ```sh        a script, run by bash with errexit and pipefail
  ```python    a script, run by python3
  ```c         a program (or, without main(), the body of one), built with
               the C API (-Iinclude, build/src/libgpureclaim.a) and run
  ```text      not code: a synopsis, a file format, a sample; it must hold
               no command line (`$ `) and no output of a command
  <!-- gpu -->                 runs only on a GPU machine:
                               scripts/gpu-check.sh docs; `<!-- gpu: CMD -->`
                               runs it by CMD (the block is example.py,
                               example.sh or example.c in the folder CMD
                               runs in), e.g. under `gpureclaim trace`
  <!-- skip: REASON -->        does not run: only for `make check` (the
                               suite itself), `scripts/fuzz-long.sh` (forty
                               minutes; make check runs every fuzz target
                               briefly), `pip install` and `make install`
                               (they change the machine; tests/install runs
                               both into scratch places), and a block that
                               starts with one of those installs and then
                               uses what it installed
  <!-- cluster -->             on real engines (a Dask LocalCluster,
                               torchrun, a local Ray): the block's first line
                               `# example: NAME` names the case of
                               tests/cluster/test_docs.py that runs it
  <!-- python3.14 -->          on the simulated driver, with a `python3.14`
                               on PATH: the one scripts/python-remote-exec.sh
                               made (a Python with sys.remote_exec, which
                               install-deps fetches); skipped, saying so,
                               where there is none
  <!-- sim-environment -->     the environment of every example on the
                               simulated driver (docs/sim.md): sourced
                               before each block that runs here

Blocks run from a scratch folder holding links to the checkout's top
folders (so `build/...`, `examples/...` resolve and outputs stay out of
the tree; `build` there is the build folder under test: $GPR_DOCS_BUILD,
which the `docs` suite sets to its Meson build folder, else the checkout's
build/), with the environment docs/sim.md tells a user to set, and with
a GPURECLAIM_SIM state of their own (each `GPURECLAIM_SIM='...'` a block
sets gets `;state=...` added): the sim's tables are shared only within a
block. Whatever a block leaves running is ended with it.

  python3 tests/docs/docs.py [--gpu] [--list] [FILE:LINE...]
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNABLE = {"console", "sh", "python", "c"}
KINDS = RUNNABLE | {"text"}
SKIPPABLE = ("make check", "pip install", "make install",
             "scripts/fuzz-long.sh")
INSTALLS = ("pip install", "make install")
TIMEOUT = 300


class Block:
    def __init__(self, path, line, info, body, marker):
        self.path, self.line, self.info = path, line, info
        self.body, self.marker = body, marker

    @property
    def id(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"

    @property
    def where(self):
        """"sim" (make check), "gpu", "skip", "none" (not code), "env"."""
        if self.marker == "sim-environment":
            return "env"
        if self.marker == "gpu" or self.marker.startswith("gpu:"):
            return "gpu"
        if self.marker == "cluster":
            return "cluster"
        if self.marker.startswith("skip:"):
            return "skip"
        return "sim" if self.info in RUNNABLE else "none"


def docs():
    return [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "*.md")))


FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")


def blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, info = i, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mk = MARKER.match(lines[k]) if k >= 0 else None
        out.append(Block(path, start + 1, info, "\n".join(lines[i + 1:j]),
                         mk.group(1) if mk else ""))
        i = j + 1
    return out


def all_blocks():
    return [b for p in docs() for b in blocks(p)]


def problems_of(b):
    """What is wrong with a block as written (before running it)."""
    if b.info not in KINDS:
        return [f"{b.id}: info string {b.info!r}: give every block one of "
                f"{', '.join(sorted(KINDS))}"]
    if b.marker and not (b.marker in ("gpu", "sim-environment", "cluster",
                                      "python3.14")
                         or b.marker.startswith(("skip:", "gpu:"))):
        return [f"{b.id}: unknown marker <!-- {b.marker} -->"]
    if b.where == "skip":
        cmds = [c for c in (ln.split("#")[0].strip()
                            for ln in b.body.splitlines()) if c]
        bad = [c for c in cmds if not c.startswith(SKIPPABLE)]
        if cmds and cmds[0].startswith(INSTALLS):
            bad = []  # the rest uses what the install put in place
        if bad:
            return [f"{b.id}: only {' and '.join(SKIPPABLE)} may be skipped, "
                    f"not {bad[0]!r}"]
    if b.where == "cluster":
        m = re.match(r"# example: ([\w-]+)\n", b.body)
        harness = open(os.path.join(ROOT, "tests", "cluster",
                                    "test_docs.py")).read()
        if not m or f'"{m.group(1)}"' not in harness:
            return [f"{b.id}: a cluster example starts with `# example: "
                    "NAME`, a case of tests/cluster/test_docs.py"]
    if b.where == "sim" and re.search(r"\bmeson test\b|\bmake check\b",
                                      b.body):
        # it would run suites inside this one, and meson test would
        # rewrite the log of the run in progress (meson-logs/testlog.json)
        return [f"{b.id}: a block that runs here must not run the test "
                "suites (meson test, make check): mark it or make it text"]
    if b.info == "text":
        for ln in b.body.splitlines():
            if ln.startswith("$ "):
                return [f"{b.id}: a command line in a text block: make it "
                        "a console transcript"]
    if b.where in ("gpu", "skip", "env") and b.info == "text":
        return [f"{b.id}: a text block is not run: no marker"]
    return []


# ------------------------------------------------------------ environment

def sim_environment(state, cwd):
    """The variables docs/sim.md's sim-environment block sets, from `cwd`
    (a scratch folder: its build/ is the build under test), with
    GPURECLAIM_SIM made to use `state`."""
    [env_block] = [b for b in all_blocks() if b.where == "env"]
    script = with_state(env_block.body, state) + "\nenv -0\n"
    p = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True,
                       check=True, env=os.environ.copy())
    env = dict(kv.split("=", 1) for kv in
               p.stdout.decode().split("\0") if "=" in kv)
    env["GPURECLAIM_SIM"] = env.get("GPURECLAIM_SIM", "") + f";state={state}"
    return env


def with_state(text, state):
    """Every GPURECLAIM_SIM='...' in text with ;state=STATE added."""
    return re.sub(r"GPURECLAIM_SIM=(['\"])(.*?)\1",
                  lambda m: f"GPURECLAIM_SIM={m.group(1)}{m.group(2)};"
                            f"state={state}{m.group(1)}", text)


def remove_state(state):
    for f in glob.glob(f"/dev/shm/gpureclaim-sim-*-{state}"):
        try:
            os.unlink(f)
        except OSError:
            pass


def build_dir():
    """The build folder the docs' `build/...` stand for."""
    return os.path.abspath(os.environ.get("GPR_DOCS_BUILD")
                           or os.path.join(ROOT, "build"))


def tracked_top():
    """The checkout's top entries that git knows, and .git (examples may
    ask git); None where git cannot say (not a checkout)."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {p.split(b"/", 1)[0].decode() for p in out.split(b"\0") if p} \
        | {".git"}


def scratch():
    """A folder with links to the checkout's top entries, `build` to the
    build under test. Only entries git knows are linked: an example that
    writes `hold.log` writes it in the scratch folder, never through a
    link into a file some earlier run left in the checkout."""
    d = tempfile.mkdtemp(prefix="gpr-docs-")
    tracked = tracked_top()
    for name in os.listdir(ROOT):
        if name != "build" and (tracked is None or name in tracked):
            os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    os.symlink(build_dir(), os.path.join(d, "build"))
    return d


# ---------------------------------------------------------------- running

def matches(want, got):
    """Expected lines (with ... wildcards) against the output's lines."""
    want = [w.rstrip() for w in want]
    got = [g.rstrip() for g in got]
    while want and not want[-1]:
        want.pop()
    while got and not got[-1]:
        got.pop()

    def line_ok(w, g):
        if "..." not in w:
            return w == g
        rx = ".*?".join(re.escape(part) for part in w.split("..."))
        # "... ms" is a duration: a slow machine prints "1.20 s" instead
        rx = rx.replace(r".*?\ ms", r".*?\ m?s")
        return re.fullmatch(rx, g) is not None

    def go(i, j):
        if i == len(want):
            return j == len(got)
        if want[i].strip() == "...":
            return any(go(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and line_ok(want[i], got[j]) and go(i + 1, j + 1)

    return go(0, 0)


def transcript(body):
    """[(command, [expected lines])] of a console block."""
    steps, cont, heredoc = [], False, None
    for ln in body.split("\n"):
        if heredoc is not None:
            steps[-1][0] += "\n" + ln
            if ln == heredoc:
                heredoc = None
        elif cont:
            steps[-1][0] += "\n" + ln
            cont = ln.endswith("\\")
        elif ln.startswith("$ "):
            steps.append([ln[2:], []])
            cont = ln.endswith("\\")
            # a here-document's marker starts with a letter: `1 << 30`
            # in a command is a shift
            m = re.search(r"<<-?\s*'?\"?([A-Za-z_]\w*)'?\"?", ln)
            heredoc = m.group(1) if m else None
        elif not steps:
            raise ValueError("a console block starts with a `$ ` line")
        else:
            steps[-1][1].append(ln)
    return [(cmd, out) for cmd, out in steps]


class Ran:
    def __init__(self, returncode, stdout):
        self.returncode, self.stdout = returncode, stdout


def run_shell(cmd, cwd, env, timeout=TIMEOUT):
    """bash -c cmd, stdout and stderr together; then everything it left
    running (its process group) is ended."""
    out = os.path.join(cwd, ".out")
    with open(out, "w") as f:
        p = subprocess.Popen(["bash", "-c", cmd], cwd=cwd, env=env,
                             stdin=subprocess.DEVNULL, stdout=f,
                             stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        finally:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except OSError:
                pass
            p.wait()
    return Ran(rc, open(out, errors="replace").read())


def c_program(body):
    """A block's C as a program: as it is when it has main(), else its
    includes, then the rest as the body of main()."""
    if re.search(r"\bint\s+main\s*\(", body):
        return body
    inc = [ln for ln in body.splitlines() if ln.startswith("#include")]
    rest = [ln for ln in body.splitlines() if not ln.startswith("#include")]
    body = "\n".join("\t" + ln if ln else ln for ln in rest)
    return "\n".join(inc) + "\n\nint main(void)\n{\n" + body + "\n\treturn 0;\n}\n"


def remote_exec_python():
    """The python3.14 of the blocks marked <!-- python3.14 -->, or None."""
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts",
                                             "python-remote-exec.sh"),
                        "--find"], capture_output=True, text=True,
                       timeout=60)
    return p.stdout.strip() if p.returncode == 0 else None


def run_block(b, gpu=False):
    """Runs one block; returns a failure message or None."""
    state = "docs-" + uuid.uuid4().hex[:10]
    d = scratch()
    env = dict(os.environ)
    if not gpu:
        env.update(sim_environment(state, d))
    env["TMPDIR"] = d
    if b.marker == "python3.14":
        py = remote_exec_python()
        if py is None:
            return (f"{b.id}: needs a python3.14: run "
                    f"scripts/python-remote-exec.sh")
        os.mkdir(os.path.join(d, ".bin"))
        os.symlink(py, os.path.join(d, ".bin", "python3.14"))
        env["PATH"] = os.path.join(d, ".bin") + os.pathsep + env["PATH"]
    try:
        if b.info == "console":
            # one shell for the whole transcript: what a command sets or
            # starts stays for the next, as in a terminal
            script, marks = [], []
            for n, (cmd, want) in enumerate(transcript(b.body)):
                mark = f"@@gpr-docs-step-{n}@@"
                marks.append((cmd, want, mark))
                script.append(f"echo {mark}")
                script.append(with_state(cmd, state) if not gpu else cmd)
            script.append("echo @@gpr-docs-end@@")
            p = run_shell("\n".join(script), d, env)
            text = p.stdout
            if "@@gpr-docs-end@@" not in text:
                return f"{b.id}: the transcript stopped:\n{text[-3000:]}"
            for i, (cmd, want, mark) in enumerate(marks):
                start = text.index(mark) + len(mark) + 1
                nxt = marks[i + 1][2] if i + 1 < len(marks) \
                    else "@@gpr-docs-end@@"
                got = text[start:text.index(nxt)].split("\n")
                if not matches(want, got):
                    return (f"{b.id}: `$ {cmd}` printed\n"
                            + "\n".join(got).rstrip()
                            + "\n--- the doc says ---\n" + "\n".join(want))
            return None
        if b.info == "sh":
            src = "set -eo pipefail\n" + (with_state(b.body, state)
                                          if not gpu else b.body)
            p = run_shell(src, d, env)
        elif b.marker.startswith("gpu:"):
            ext = {"python": "py", "sh": "sh", "c": "c"}[b.info]
            open(os.path.join(d, f"example.{ext}"), "w").write(b.body + "\n")
            p = run_shell(b.marker[4:].strip(), d, env)
        elif b.info == "python":
            f = os.path.join(d, "example.py")
            open(f, "w").write(b.body + "\n")
            p = run_shell(f"{sys.executable} example.py", d, env)
        elif b.info == "c":
            f = os.path.join(d, "example.c")
            open(f, "w").write(c_program(b.body))
            cc = os.environ.get("CC", "cc")
            p = run_shell(f"{cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror "
                          f"-Iinclude example.c build/src/libgpureclaim.a -ldl "
                          f"-lpthread -o example && ./example", d, env)
        else:
            return None
        if p.returncode != 0:
            return (f"{b.id}: exited {p.returncode}:\n"
                    + p.stdout[-4000:])
        return None
    except subprocess.TimeoutExpired as e:
        return f"{b.id}: still running after {e.timeout} s"
    finally:
        remove_state(state)
        shutil.rmtree(d, ignore_errors=True)


def main(argv):
    gpu = "--gpu" in argv
    want = [a for a in argv if not a.startswith("--")]
    chosen = [b for b in all_blocks()
              if (not want or b.id in want
                  or any(b.id.startswith(w + ":") for w in want))
              and b.where == ("gpu" if gpu else "sim")]
    if "--list" in argv:
        for b in all_blocks():
            print(f"{b.where:5} {b.info:8} {b.id}")
        return 0
    bad = [p for b in all_blocks() for p in problems_of(b)]
    fails = [f for f in (run_block(b, gpu) for b in chosen) if f]
    for f in bad + fails:
        print("FAIL", f, file=sys.stderr)
    print(f"docs: {len(chosen) - len(fails)} passed, {len(fails)} failed"
          + (f", {len(bad)} blocks not marked as they must be" if bad else ""))
    return 1 if fails or bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
