"""A fake agent that serves one recorded exchange (exchanges.py says
how): it prints "ready PID" once the client may ask PID, takes one
connection, writes the bytes of the request it got to REQUEST_OUT (an
empty file when the client sent none), answers the recorded bytes and
does what "then" says, until it is killed.

Usage: fake_agent.py EXCHANGE.json FOLDER REQUEST_OUT
"""
import json
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exchanges import answer_bytes  # noqa: E402


def wrote(path, data):
    with open(path + ".part", "wb") as f:
        f.write(data)
    os.replace(path + ".part", path)


def read_request(c):
    """Up to the request's newline, or until the client closes."""
    got = b""
    while b"\n" not in got and len(got) <= 64 << 10:
        chunk = c.recv(1 << 16)
        if not chunk:
            break
        got += chunk
    return got


def main(exchange, folder, out):
    with open(exchange, encoding="utf-8") as f:
        x = json.load(f)
    how = x.get("agent", "answers")
    pid = os.getpid()
    if how == "another":  # a process that runs no agent: its socket is ours
        parent, child = os.getpid(), os.fork()
        if child == 0:  # it ends with the fake
            while os.getppid() == parent:
                time.sleep(0.1)
            os._exit(0)
        pid = child
    path = os.path.join(folder, f"{pid}.sock")
    s = socket.socket(socket.AF_UNIX)
    if how == "link":
        os.symlink(os.path.join(folder, "elsewhere"), path)
    elif how != "none":
        s.bind(path)
        os.chmod(path, 0o600)
        s.listen(1)
    if how == "stale":
        s.close()
    print("ready", pid, flush=True)
    if how in ("none", "stale", "link"):
        wrote(out, b"")
        signal.pause()
    c, _ = s.accept()
    wrote(out, read_request(c))
    then = x.get("then", "close")
    if then == "exit":
        os._exit(0)
    try:
        c.sendall(answer_bytes(x))
    except OSError:
        pass  # the client refused it (too large) and closed
    if then == "close":
        c.close()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(*sys.argv[1:4])
