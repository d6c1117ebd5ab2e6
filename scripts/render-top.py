#!/usr/bin/env python3
"""Photographs `gpureclaim top` for docs/top.md: a real run on the
simulated driver, in a real terminal (tmux, 80x24, colours on), turned
into a picture.

The scene: four Python processes started the way a user starts them
(`gpureclaim run --agent -- python3 NAME.py`, the test suite's fake Torch
allocating through the simulated driver): a training job keeping GPU 0
busy, a notebook that was busy a moment ago and holds 14 GiB of cache, an
inference server on GPU 1, and an evaluation without an agent. The
notebook is selected and `r` pressed, so the bottom line asks the
question with its bytes. tmux's capture of the window with its
attributes (capture-pane -e) is drawn cell by cell with Pillow in DejaVu
Sans Mono into docs/img/top.png; docs/img/top.png.sha256 holds the hash
of the screen's text with its digits masked (pids, times and ages change
from run to run, the layout does not), so --check can tell a picture
older than what top shows now.

Needs tmux and, to draw, Debian's python3-pil and fonts-dejavu-core
(installed when missing and this runs as root).

  usage: python3 scripts/render-top.py [--check] [BUILD]   (default build)
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNG = os.path.join(ROOT, "docs", "img", "top.png")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
COLS, ROWS = 80, 24
HANG_S = 60

PROGRAM = """\
import ctypes, os, sys, torch
live = torch.empty({live} << 30, dtype=torch.uint8, device="cuda:{gpu}")
t = torch.empty({cached} << 30, dtype=torch.uint8, device="cuda:{gpu}")
del t
sim = ctypes.CDLL(os.environ["GPURECLAIM_CUDA_LIBRARY"])
sim.gprsim_busy({gpu}, {busy})
if {idle}:
    sim.gprsim_busy({gpu}, 0)
print("ready", flush=True)
sys.stdin.read()
"""

#: name, GPU, live GiB, cached GiB, busy %, then idle, with an agent
SCENE = [
    ("train", 0, 20, 6, 87, False, True),
    ("notebook", 0, 2, 14, 35, True, True),
    ("serve", 1, 9, 3, 41, False, True),
    ("evaluate", 1, 4, 0, 0, False, False),
]


def env_of(build, work):
    agents = os.path.join(work, "agents")
    os.mkdir(agents, 0o700)
    state = f"render-top-{os.getpid()}"
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("GPURECLAIM_", "PYTHON", "NO_COLOR"))}
    e.update(
        GPURECLAIM_SIM=f"gpus=2;state={state}",
        GPURECLAIM_CUDA_LIBRARY=os.path.join(build, "sim", "libcuda.so.1"),
        GPURECLAIM_NVML_LIBRARY=os.path.join(build, "sim",
                                             "libnvidia-ml.so.1"),
        LD_LIBRARY_PATH=os.path.join(build, "sim"),
        PYTHONPATH=os.pathsep.join([os.path.join(build, "python"),
                                    os.path.join(ROOT, "tests", "python",
                                                 "fakes")]),
        GPR_FAKES_BUILD=os.path.join(build, "tests", "fixtures"),
        PATH=os.path.join(build, "cli") + os.pathsep + e.get("PATH", ""),
        GPURECLAIM_AGENT_DIR=agents, TERM="xterm-256color", LANG="C.UTF-8")
    return e, state


def start_scene(env, work):
    procs = []
    for name, gpu, live, cached, busy, idle, agent in SCENE:
        path = os.path.join(work, f"{name}.py")
        with open(path, "w") as f:
            f.write(PROGRAM.format(gpu=gpu, live=live, cached=cached,
                                   busy=busy, idle=idle))
        argv = ["python3", f"{name}.py"]
        if agent:
            argv = ["gpureclaim", "run", "--agent", "--"] + argv
        p = subprocess.Popen(argv, cwd=work, env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"render-top: {name}.py did not start")
        procs.append(p)
    return procs


class Window:
    def __init__(self, work, env):
        self.sock = os.path.join(work, "tmux.sock")
        self.env = env
        self.run("new-session", "-d", "-s", "t", "-x", str(COLS), "-y",
                 str(ROWS), "gpureclaim top; sleep 3600")

    def run(self, *args):
        return subprocess.run(["tmux", "-f", "/dev/null", "-S", self.sock,
                               *args], env=self.env, capture_output=True,
                              text=True, check=True).stdout

    def lines(self, escapes=False):
        # with its attributes, trailing blanks kept (a reverse bar's)
        args = ["capture-pane", "-p", "-t", "t"] + (["-e", "-N"]
                                                     if escapes else [])
        return self.run(*args).split("\n")[:ROWS]

    def wait(self, test, what):
        end = time.monotonic() + HANG_S
        while not test(self.lines()):
            if time.monotonic() > end:
                raise SystemExit(f"render-top: the screen never showed "
                                 f"{what}:\n" + "\n".join(self.lines()))
            time.sleep(0.05)

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"],
                       capture_output=True)


def ready(lines):
    """Every agent answered and the notebook shows as idle."""
    rows = [x for x in lines if re.match(r"^\S +\d+ ", x)]
    return (len(rows) == len(SCENE)
            and not any(" ... " in x for x in rows)
            and any("idle " in x and "notebook" in x for x in rows))


def capture(build, work):
    env, state = env_of(build, work)
    procs = start_scene(env, work)
    win = Window(work, env)
    try:
        win.wait(ready, "every agent's parts")
        pid = next(x.split()[1] for x in win.lines()
                   if "notebook.py" in x and re.match(r"^\S +\d+ ", x))
        for _ in range(len(SCENE)):  # the notebook selected
            if win.lines()[-2].startswith(f"{pid} on GPU"):
                break
            win.run("send-keys", "-t", "t", "j")
            win.wait(lambda ls: True, "")
        win.run("send-keys", "-t", "t", "r")
        win.wait(lambda ls: "y/n" in ls[-1], "the question")
        return win.lines(), win.lines(escapes=True)
    finally:
        win.close()
        for p in procs:
            p.stdin.close()
            p.wait(timeout=HANG_S)
        try:
            os.unlink(f"/dev/shm/gpureclaim-sim-{os.getuid()}-{state}")
        except OSError:
            pass


def screen_hash(lines):
    return hashlib.sha256(re.sub(r"[0-9]+", "0", "\n".join(lines))
                          .encode()).hexdigest()


# ---------------- drawing ----------------

PALETTE = [  # the 16 colours (Tango's, as many terminals' defaults)
    (0x2e, 0x34, 0x36), (0xcc, 0x00, 0x00), (0x4e, 0x9a, 0x06),
    (0xc4, 0xa0, 0x00), (0x34, 0x65, 0xa4), (0x75, 0x50, 0x7b),
    (0x06, 0x98, 0x9a), (0xd3, 0xd7, 0xcf), (0x55, 0x57, 0x53),
    (0xef, 0x29, 0x29), (0x8a, 0xe2, 0x34), (0xfc, 0xe9, 0x4f),
    (0x72, 0x9f, 0xcf), (0xad, 0x7f, 0xa8), (0x34, 0xe2, 0xe2),
    (0xee, 0xee, 0xec)]
FG, BG = (0xd3, 0xd7, 0xcf), (0x1c, 0x1c, 0x1c)


def colour256(n):
    if n < 16:
        return PALETTE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return steps[n // 36], steps[n // 6 % 6], steps[n % 6]
    v = 8 + 10 * (n - 232)
    return v, v, v


#: SGR parameters that set one attribute: (name, value)
SGR = {0: None, 1: ("bold", True), 2: ("dim", True), 7: ("rev", True),
       22: ("bold", False), 27: ("rev", False), 39: ("fg", None),
       49: ("bg", None)}
SGR.update({30 + i: ("fg", c) for i, c in enumerate(PALETTE[:8])})
SGR.update({90 + i: ("fg", c) for i, c in enumerate(PALETTE[8:])})
SGR.update({40 + i: ("bg", c) for i, c in enumerate(PALETTE[:8])})
SGR.update({100 + i: ("bg", c) for i, c in enumerate(PALETTE[8:])})
PLAIN = dict(fg=None, bg=None, bold=False, dim=False, rev=False)


def cells(line):
    """(char, fg, bg, bold, dim, reverse) per cell of a captured line."""
    st = dict(PLAIN)
    out = []
    for m in re.finditer(r"\x1b\[([0-9;]*)m|([^\x1b])", line):
        if m[2] is not None:
            out.append((m[2], st["fg"], st["bg"], st["bold"], st["dim"],
                        st["rev"]))
            continue
        ps = [int(p) if p else 0 for p in m[1].split(";")]
        i = 0
        while i < len(ps):
            p = ps[i]
            if p in (38, 48) and ps[i + 1:i + 2] == [5]:  # 256 colours
                st["fg" if p == 38 else "bg"] = colour256(ps[i + 2])
                i += 2
            elif p in (38, 48) and ps[i + 1:i + 2] == [2]:  # RGB
                st["fg" if p == 38 else "bg"] = tuple(ps[i + 2:i + 5])
                i += 4
            elif p in SGR:
                if SGR[p] is None:
                    st = dict(PLAIN)
                else:
                    st[SGR[p][0]] = SGR[p][1]
                if p == 22:
                    st["dim"] = False
            i += 1
    return out


def draw(escaped, path):
    from PIL import Image, ImageDraw, ImageFont

    font, bold = ImageFont.truetype(FONT, 15), ImageFont.truetype(BOLD, 15)
    w = round(font.getlength("M"))
    asc, desc = font.getmetrics()
    h = asc + desc + 2
    pad = 10
    img = Image.new("RGB", (COLS * w + 2 * pad, ROWS * h + 2 * pad), BG)
    d = ImageDraw.Draw(img)
    for y, line in enumerate(escaped[:ROWS]):
        for x, (ch, fg, bg, b, dim, rev) in enumerate(cells(line)[:COLS]):
            fg, bg = fg or FG, bg or BG
            if rev:
                fg, bg = bg, fg
            if dim:
                fg = tuple((c + b_) // 2 for c, b_ in zip(fg, bg))
            x0, y0 = pad + x * w, pad + y * h
            d.rectangle([x0, y0, x0 + w - 1, y0 + h - 1], fill=bg)
            if ch != " ":
                d.text((x0, y0 + 1), ch, font=bold if b else font, fill=fg)
    img.save(path, optimize=True)


def main():
    args = sys.argv[1:]
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    build = os.path.abspath(os.path.join(ROOT, args[0] if args else "build"))
    if not shutil.which("tmux"):
        raise SystemExit("render-top: needs tmux (apt-get install tmux)")
    if not check:
        try:
            import PIL  # noqa: F401
        except ImportError:
            if os.getuid() != 0 or not shutil.which("apt-get"):
                raise SystemExit("render-top: needs Debian's python3-pil "
                                 "and fonts-dejavu-core (as root: apt-get "
                                 "install python3-pil fonts-dejavu-core)")
            subprocess.run(["apt-get", "install", "-y", "-qq", "python3-pil",
                            "fonts-dejavu-core"], check=True,
                           stdout=subprocess.DEVNULL,
                           env=dict(os.environ,
                                    DEBIAN_FRONTEND="noninteractive"))
            os.execv(sys.executable, [sys.executable] + sys.argv)
    with tempfile.TemporaryDirectory(prefix="gpr-top-") as work:
        plain, escaped = capture(build, work)
    digest = screen_hash(plain)
    if check:
        try:
            old = open(PNG + ".sha256").read().strip()
        except OSError:
            old = ""
        if old != digest or not os.path.exists(PNG):
            print("render-top: docs/img/top.png is older than what top "
                  "shows now (python3 scripts/render-top.py)",
                  file=sys.stderr)
            return 1
        print("render-top: docs/img/top.png is what top shows")
        return 0
    draw(escaped, PNG)
    with open(PNG + ".sha256", "w") as f:
        f.write(digest + "\n")
    print("\n".join(plain))
    print("render-top: docs/img/top.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
