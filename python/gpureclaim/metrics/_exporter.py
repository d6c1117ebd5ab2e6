"""`gpureclaim exporter`: the host's GPU memory as a Prometheus endpoint
(gpureclaim/metrics/'s HostCollector, docs/metrics.md). The command (C)
hands it to this module, as it hands `run`.

A reading (NVML, /proc, the agents) is taken every --interval seconds in
the main thread and encoded once by prometheus_client (plain and
gzipped); a scrape sends those bytes. So a slow agent, a slow NVML or a
host of a thousand processes never makes a scrape slow, and scrapes from
several servers do not multiply the readings.

Its connections are bounded (issue 34): a request must arrive within
IDLE_SECONDS (and the answer be taken as long), a peer address holds at
most PER_PEER connections and the server MAX_CONNECTIONS (well below the
descriptor limit); past a bound, the oldest connection that has not yet
sent its request is closed for the new one. So a client holding a
thousand idle connections neither takes the descriptors (accept() then
failed in a loop, at 100% of a core) nor stops the scrapes.
"""
from __future__ import annotations

import gzip
import ipaddress
import json
import signal
import socket
import sys
import threading

DEFAULT_LISTEN = "127.0.0.1:9835"
#: seconds a connection may wait for its request line (and each read or
#: write of the exchange after it)
IDLE_SECONDS = 10.0
#: connections at once from one peer address, and in all (a scrape needs
#: one; Prometheus servers are few)
PER_PEER = 16
MAX_CONNECTIONS = 64


def _usage_error(msg: str) -> int:
    sys.stderr.write(f"gpureclaim exporter: {msg}\n"
                     "Run 'gpureclaim exporter --help' for the options.\n")
    return 2


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT or [V6]:PORT -> (host, port); ValueError saying why."""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"'{text}' is not [ADDRESS]:PORT")
        port = rest[1:]
    else:
        host, sep, port = text.rpartition(":")
        if not sep or ":" in host:
            raise ValueError(f"'{text}' is not HOST:PORT (an IPv6 address "
                             f"goes in brackets: [::1]:9835)")
    if not host:
        raise ValueError(f"'{text}' names no host (0.0.0.0 for every "
                         f"interface, 127.0.0.1 for this machine only)")
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"bad port '{port}' (0 to 65535)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Every address the host name resolves to is a loopback one."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addrs = {i[4][0] for i in infos}
    return bool(addrs) and all(
        ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def _seconds(opt: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not v > 0 or v != v or v == float("inf"):
        raise ValueError(f"{opt} needs a positive number of seconds, not "
                         f"'{text}'")
    return v


def _parse(argv: list) -> dict:
    opts = {"listen": DEFAULT_LISTEN, "interval": 10.0, "agent_timeout": 2.0,
            "once": False, "json": False}
    args = list(argv)
    while args:
        a = args.pop(0)
        name, eq, val = a.partition("=")
        if a == "--once":
            opts["once"] = True
        elif a == "--json":
            opts["json"] = True
        elif name in ("--listen", "--interval", "--agent-timeout"):
            if not eq:
                if not args:
                    raise ValueError(f"{name} needs a value")
                val = args.pop(0)
            key = name[2:].replace("-", "_")
            opts[key] = val if key == "listen" else _seconds(name, val)
        elif a.startswith("-"):
            raise ValueError(f"unknown option '{a}'")
        else:
            raise ValueError(f"unexpected argument '{a}'")
    if opts["json"] and not opts["once"]:
        raise ValueError("--json needs --once (the endpoint serves the "
                         "Prometheus text format)")
    opts["host"], opts["port"] = parse_listen(opts["listen"])
    return opts


def main(argv: list) -> int:
    try:
        opts = _parse(argv)
    except ValueError as e:
        return _usage_error(str(e))
    from .. import metrics

    try:
        prometheus_client, _ = metrics._prometheus()
    except ImportError as e:
        sys.stderr.write(f"gpureclaim exporter: {e}\n")
        return 1
    collector = metrics.HostCollector(agent_timeout=opts["agent_timeout"])
    if opts["once"]:
        r = collector.read()
        if opts["json"]:
            sys.stdout.write(json.dumps(r.to_dict(), indent=1) + "\n")
        else:
            sys.stdout.buffer.write(metrics.exposition(collector))
        collector.close()
        return 0
    return _serve(opts, collector, prometheus_client)


class Latest:
    """The latest reading's exposition, encoded once per reading."""

    def __init__(self, collector, prometheus_client):
        self.collector = collector
        self.registry = prometheus_client.CollectorRegistry(
            auto_describe=False)
        self.registry.register(collector)
        self.generate = prometheus_client.generate_latest
        self.type = getattr(prometheus_client.exposition,
                            "CONTENT_TYPE_PLAIN_0_0_4",
                            "text/plain; version=0.0.4; charset=utf-8")
        self.body = self.gz = b""
        self.lock = threading.Lock()

    def refresh(self) -> None:
        self.collector.read()
        body = self.generate(self.registry)
        gz = gzip.compress(body, compresslevel=1)
        with self.lock:
            self.body, self.gz = body, gz

    def app(self, environ, start_response):
        """The WSGI app: /metrics (and /) send the latest exposition,
        gzipped when the scraper accepts it (Prometheus does)."""
        if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"gpureclaim exporter: the metrics are at /metrics\n"]
        with self.lock:
            body, gz = self.body, self.gz
        headers = [("Content-Type", self.type)]
        if "gzip" in environ.get("HTTP_ACCEPT_ENCODING", ""):
            body = gz
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(len(body))))
        start_response("200 OK", headers)
        return [body]


def _server(host: str, port: int, app):
    """A threading WSGI server of `app` on host:port, IPv4 or IPv6 as host
    is; quiet (no line per request); its connections bounded (the
    module's comment)."""
    import errno
    import resource
    import time
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, \
        make_server

    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    most = MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else \
        max(4, min(MAX_CONNECTIONS, soft // 4))

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = family
        request_queue_size = 128

        def server_activate(self):
            super().server_activate()
            self.conns: dict = {}  # socket -> [peer, request read], oldest first
            self.conns_lock = threading.Lock()

        def _drop(self, victim) -> None:
            """Closes an idle connection for a new one (its thread reads
            the end and finishes)."""
            self.conns.pop(victim, None)
            try:
                victim.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _idle(self, peer=None):
            return next((c for c, (p, busy) in self.conns.items()
                         if not busy and (peer is None or p == peer)), None)

        def get_request(self):
            try:
                return super().get_request()
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    with self.conns_lock:  # a descriptor back, no spin
                        victim = self._idle()
                        if victim is not None:
                            self._drop(victim)
                    time.sleep(0.05)
                raise

        def verify_request(self, request, client_address):
            peer = client_address[0]
            with self.conns_lock:
                mine = sum(1 for p, _ in self.conns.values() if p == peer)
                if mine >= PER_PEER:
                    victim = self._idle(peer)
                elif len(self.conns) >= most:
                    victim = self._idle()
                else:
                    victim = False
                if victim is None:  # every one at work: this one waits
                    return False
                if victim is not False:
                    self._drop(victim)
                self.conns[request] = [peer, False]
            return True

        def mark_busy(self, request) -> None:
            with self.conns_lock:
                if request in self.conns:
                    self.conns[request][1] = True

        def shutdown_request(self, request):
            with self.conns_lock:
                self.conns.pop(request, None)
            super().shutdown_request(request)

        def handle_error(self, request, client_address):
            pass  # a connection idle too long or closed: nothing to say

    class Quiet(WSGIRequestHandler):
        timeout = IDLE_SECONDS

        def parse_request(self):
            self.server.mark_busy(self.request)
            return super().parse_request()

        def log_message(self, format, *args):
            pass

    return make_server(host, port, app, Server, handler_class=Quiet)


def _serve(opts: dict, collector, prometheus_client) -> int:
    host, port = opts["host"], opts["port"]
    latest = Latest(collector, prometheus_client)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    latest.refresh()  # the first scrape finds a reading
    try:
        server = _server(host, port, latest.app)
    except OSError as e:
        sys.stderr.write(f"gpureclaim exporter: cannot listen on "
                         f"{opts['listen']}: {e.strerror or e}\n")
        return 1
    threading.Thread(target=server.serve_forever, daemon=True,
                     name="gpureclaim-exporter-http").start()
    bound = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/metrics"
    if is_loopback(host):
        print(f"gpureclaim exporter: serving {url} (loopback: this machine "
              f"only), a reading every {opts['interval']:g} s", flush=True)
    else:
        print(f"gpureclaim exporter: serving {url} on a non-loopback "
              f"address, as asked: other machines can read the GPU "
              f"processes' users and commands; a reading every "
              f"{opts['interval']:g} s", flush=True)
    try:
        while not stop.wait(opts["interval"]):
            latest.refresh()
    finally:
        server.shutdown()
        server.server_close()
        collector.close()
    return 0
