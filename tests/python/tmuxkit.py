"""A real terminal for `gpureclaim top`'s tests: a tmux server of the
test's own (its socket in a folder of the test's, no configuration file
read), one window of a given size running a shell that records the
terminal's modes (stty -a) before and after the command and its exit
status, then waits. The screen is read with capture-pane, keys sent with
send-keys; every wait is for what the screen shows, bounded by a guard
that only a hang reaches (never a measure of speed).

Used by tests/python/test_top.py and tests/hardware/test_top.py."""
import os
import shlex
import shutil
import subprocess
import time

#: a wait longer than this is a hang, not a slow machine
HANG_S = 60


class Tmux:
    def __init__(self, folder, argv, env, cols=80, rows=24):
        if not shutil.which("tmux"):
            raise AssertionError(
                "tmux is not installed (scripts/install-deps.sh check)")
        self.dir = str(folder)
        self.sock = os.path.join(self.dir, "tmux.sock")
        self.env = dict(env)
        inner = " ".join(shlex.quote(str(a)) for a in argv)
        d = shlex.quote(self.dir)
        # the shell outlives a Ctrl-C as an interactive one does (a trap,
        # not an ignored signal: the command starts with SIGINT default)
        script = (f"trap : INT; stty -a > {d}/before; "
                  f"{inner} 2> {d}/stderr; "
                  f"echo $? > {d}/rc.tmp; stty -a > {d}/after; "
                  f"mv {d}/rc.tmp {d}/rc; exec sleep 3600")
        self.tmux("new-session", "-d", "-s", "t", "-x", str(cols), "-y",
                  str(rows), "sh", "-c", script)
        self.pid = None

    def tmux(self, *args, check=True):
        p = subprocess.run(["tmux", "-f", "/dev/null", "-S", self.sock,
                            *args], env=self.env, capture_output=True,
                           text=True, timeout=HANG_S)
        if check and p.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {p.stderr}")
        return p.stdout

    def screen(self, escapes=False):
        """The window's lines as shown (with -e: with their SGR)."""
        args = ["capture-pane", "-p", "-t", "t"]
        if escapes:
            args.append("-e")
        return self.tmux(*args).split("\n")[:-1]

    def text(self):
        return "\n".join(self.screen())

    def wait(self, test, what):
        """Waits until test(lines) holds; the lines then."""
        end = time.monotonic() + HANG_S
        while True:
            lines = self.screen()
            if test(lines):
                return lines
            if time.monotonic() > end:
                raise AssertionError(f"the screen never showed {what}:\n"
                                     + "\n".join(lines))
            time.sleep(0.05)

    def wait_text(self, s):
        return self.wait(lambda lines: s in "\n".join(lines), repr(s))

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "t", *keys)

    def resize(self, cols, rows):
        self.tmux("resize-window", "-t", "t", "-x", str(cols), "-y",
                  str(rows))

    def flag(self, name):
        """A pane's format variable (alternate_on, cursor_flag)."""
        return self.tmux("display-message", "-p", "-t", "t",
                         "#{" + name + "}").strip()

    def top_pid(self):
        """The pid of the command the shell runs."""
        shell = int(self.tmux("display-message", "-p", "-t", "t",
                              "#{pane_pid}").strip())
        # the shell's children, from /proc (no pgrep: a test run may
        # preload a sanitizer's runtime into every program it starts)
        path = f"/proc/{shell}/task/{shell}/children"
        end = time.monotonic() + HANG_S
        while time.monotonic() < end:
            with open(path) as f:
                kids = list(map(int, f.read().split()))
            for pid in kids:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        argv0 = c.read().split(b"\0")[0]
                except OSError:  # it ended meanwhile
                    continue
                if os.path.basename(argv0) != b"stty":
                    return pid
            time.sleep(0.05)
        raise AssertionError("the command did not start")

    def exit_status(self):
        """The command's exit status, once it ended."""
        rc = os.path.join(self.dir, "rc")
        end = time.monotonic() + HANG_S
        while not os.path.exists(rc):
            if time.monotonic() > end:
                raise AssertionError("the command did not end:\n"
                                     + self.text())
            time.sleep(0.05)
        return int(open(rc).read())

    def modes_restored(self):
        """Whether the terminal is as it was before the command: the same
        stty modes, the main screen, the cursor shown."""
        before = open(os.path.join(self.dir, "before")).read()
        after = open(os.path.join(self.dir, "after")).read()
        return (before == after, self.flag("alternate_on"),
                self.flag("cursor_flag"))

    def stderr(self):
        try:
            return open(os.path.join(self.dir, "stderr")).read()
        except OSError:
            return ""

    def signal(self, sig):
        os.kill(self.top_pid(), sig)

    def close(self):
        self.tmux("kill-server", check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

