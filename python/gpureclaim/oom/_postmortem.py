"""The out-of-memory post-mortem (docs/oom.md): what it holds
(:func:`build`, at the moment of the error, without a garbage collection),
how it reads (:class:`PostMortem`'s views: a short text for stderr, the
whole as text and as HTML, by the C renderer's blocks), its file
(:func:`write_new`: created in a folder, never replacing anything) and
``gpureclaim report FILE.json`` (:func:`main`).

The document is plain JSON, exact bytes, keyed as docs/oom.md's table
says; it begins with :data:`SIGNATURE`, by which ``gpureclaim report``
tells it from a trace log (cli/cmd_report.c).
"""
from __future__ import annotations

import gc
import json
import os
import stat
import sys
import tempfile
import time
from typing import Any, Optional

FORMAT = "gpureclaim-oom"
VERSION = 1
#: the first bytes of every post-mortem file (cli/cmd_report.c checks
#: them; tests/python/test_oom.py checks that the two agree)
SIGNATURE = '{\n "format": "gpureclaim-oom",'
#: the first bytes of the HTML page `report --html` writes (render's
#: "document")
PAGE_SIGNATURE = "<!DOCTYPE html>\n<!-- gpureclaim -->\n"
#: live Torch blocks kept, largest first; other processes shown in the
#: short text; frames kept per block
TOP_BLOCKS = 5
SHORT_ROWS = 3
MAX_READ = 64 << 20

# who holds a releasable part, in the sentence on fitting
_OWNERS = {"torch": "Torch's cache", "cupy": "CuPy's cache",
           "cupy (async pool)": "CuPy's stream-ordered pool",
           "cuFFT plans (cupy)": "CuPy's cuFFT plans",
           "rmm": "RMM's pool"}


def _fmt(n: Optional[int]) -> str:
    from .. import _gpureclaim as _c

    return _c.format_bytes(n)


def _plain(x: Any) -> Any:
    """x as JSON values (tuples as lists, anything else as its str)."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return str(x)


def _error_text(e: Optional[BaseException]) -> Optional[str]:
    if e is None:
        return None
    try:
        msg = str(e)
    except Exception:
        msg = "?"
    return f"{type(e).__qualname__}: {msg}"[:4000]


# ------------------------------------------------------------------ build

def build(framework: str, device: Optional[int], nbytes: int, *,
          requested: Optional[int] = None, exact: bool = True,
          error: Optional[BaseException] = None,
          facts: Optional[dict] = None) -> dict:
    """The post-mortem of one out-of-memory error, as a plain dict: read
    now, with the garbage collector held off (no collection runs while it
    is made). A part that cannot be read is a note; the rest stays."""
    t0 = time.perf_counter()
    enabled = gc.isenabled()
    gc.disable()
    try:
        doc = _build(framework, device, nbytes, requested, exact, error,
                     facts)
    finally:
        if enabled:
            gc.enable()
    doc["seconds"] = time.perf_counter() - t0
    return doc


def _build(framework, device, nbytes, requested, exact, error, facts):
    notes: list = []
    doc: dict = {
        "format": FORMAT, "version": VERSION,
        "pid": os.getpid(), "time": time.time(),
        "argv": [str(a)[:256] for a in _own_argv()[:32]],
        "framework": framework,
        "request": {"bytes": int(nbytes), "exact": bool(exact),
                    "device": device, "requested": requested},
        "error": _error_text(error),
        "framework_figures": _plain(facts or {}),
    }
    if device is None:
        device = _guess_device(framework, notes)
        doc["request"]["device"] = device
    gpu, procs = _section(notes, "the GPU", _gpu, device, default=(None, []))
    doc["gpu"] = gpu
    call, expl = _section(notes, "explain()", _explained, device,
                          default=(None, None))
    doc["process"] = _process(expl, device)
    doc["others"], doc["unlisted"] = _others(procs, gpu, notes)
    doc["release"] = _fit(doc)
    doc["blocks"] = _section(notes, "Torch's blocks", _blocks, call, device,
                             default=[])
    doc["trace"] = _section(notes, "the trace", _trace, device, default=None)
    doc["advice"] = _advice(doc)
    doc["rescue"] = []
    doc["notes"] = notes
    return doc


def _section(notes: list, what: str, fn: Any, *args: Any,
             default: Any = None) -> Any:
    try:
        return fn(*args)
    except Exception as e:
        notes.append(f"{what} could not be read: {type(e).__name__}: {e}")
        return default


def _guess_device(framework: str, notes: list) -> Optional[int]:
    """The GPU of an error that names none: the only one in use, or the
    first on which JAX holds its pool."""
    from .. import _gpureclaim as _c
    from ..frameworks import jax

    have = _c.devices_in_use()
    if len(have) == 1:
        return have[0]
    for d in have:
        if framework == "jax" and jax._find(d) is not None:
            notes.append(f"the error names no GPU: GPU {d}, the first on "
                         f"which JAX holds a pool")
            return d
    notes.append("the error names no GPU, and this process uses "
                 f"{len(have)}: the figures of a GPU are left out")
    return None


def _gpu(device: Optional[int]) -> tuple:
    """NVML's figures of the GPU and its process list [(pid, bytes)]."""
    from .. import _gpureclaim as _c

    if device is None:
        return None, []
    for g in _c.gpus():
        if g.get("device") == device:
            keep = ("device", "nvml_index", "uuid", "name", "pci_bus_id",
                    "total", "used", "free", "error")
            return {k: g.get(k) for k in keep}, list(g.get("processes") or ())
    return None, []


def _explained(device: Optional[int]) -> tuple:
    import gpureclaim

    from .._explain import _parts as _explain

    call = _explain.Call(False)
    raw = _explain.explain(None if device is None else [device], False, call)
    return call, gpureclaim.Explanation(raw)


def _process(expl: Any, device: Optional[int]) -> Optional[dict]:
    """explain()'s parts of the GPU, as plain values."""
    if expl is None:
        return None
    from .._explain._views import _kind

    g = next((x for x in expl.gpus if x.device == device), None)
    out: dict = {"driver": None, "source": None, "consistent": None,
                 "parts": [], "notes": list(expl.notes),
                 "explain_seconds": expl.seconds}
    if g is None:
        return out
    out.update(driver=g.driver, source=g.source, consistent=g.consistent)
    for p in g.parts:
        out["parts"].append({
            "kind": p.kind, "label": _kind(p.kind)[0], "source": p.source,
            "bytes": p.bytes, "known": p.known, "exact": p.exact,
            "evidence": p.evidence, "advice_key": p.advice_key,
            "advice": p.advice, "hint_key": p.hint_key, "hint": p.hint,
            "how": p.how, "detail": _plain(p.detail)})
    return out


def _proc_user(pid: int) -> Optional[str]:
    try:
        import pwd

        uid = os.stat(f"/proc/{pid}").st_uid
    except (OSError, ImportError):
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _own_argv() -> list:
    """This process's command line as the kernel has it (`python3 -c ...`,
    `python3 train.py`), where sys.argv would say `-c`; sys.argv where
    /proc cannot be read."""
    try:
        with open("/proc/self/cmdline", "rb") as f:
            raw = f.read(65536)
    except OSError:
        return list(sys.argv)
    words = raw.rstrip(b"\0").split(b"\0")
    return [w.decode("utf-8", "replace") for w in words if w] or sys.argv


def _shown(path: str) -> str:
    """A path as the user can type it from here: relative when below the
    current folder, else whole (as make demo's lines are written)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def _proc_command(pid: int) -> Optional[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return None
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    return text[:512] or None


def _others(procs: list, gpu: Optional[dict], notes: list) -> tuple:
    """The other processes NVML lists on the GPU, largest first, and the
    bytes in use that no process is listed for."""
    me = os.getpid()
    rows, listed, mine = [], 0, False
    for pid, nbytes in procs:
        if nbytes is not None:
            listed += nbytes
        if pid == me:
            mine = True
            continue
        rows.append({"pid": pid, "bytes": nbytes, "user": _proc_user(pid),
                     "command": _proc_command(pid)})
    rows.sort(key=lambda r: -(r["bytes"] or 0))
    if procs and not mine:
        notes.append("this process is not in NVML's list of the GPU (a pid "
                     "namespace): it may be listed under its host pid")
    used = gpu.get("used") if gpu else None
    known = all(b is not None for _, b in procs)
    unlisted = used - listed if used is not None and known else None
    return rows, unlisted


def _releasable(parts: list, keys: tuple) -> list:
    return [(p["source"], p["bytes"]) for p in parts
            if p["known"] and p["bytes"] > 0 and p["advice_key"] in keys]


def _jax_pool_limited(doc: dict) -> bool:
    """JAX allocates from the pool it took at start: unless it was told
    not to preallocate, free GPU memory does not help it."""
    return doc["framework"] == "jax" and os.environ.get(
        "XLA_PYTHON_CLIENT_PREALLOCATE", "").strip().lower() != "false"


def _part(parts: list, kind: str, source: str) -> int:
    return sum(p["bytes"] for p in parts
               if p["known"] and p["kind"] == kind and p["source"] == source)


def _fit(doc: dict) -> dict:
    """Whether the request would fit after release(): the GPU's free
    bytes plus what is releasable (the parts whose checked advice is
    release()), against the bytes asked for."""
    need = doc["request"]["bytes"]
    gpu = doc["gpu"] or {}
    parts = (doc["process"] or {}).get("parts") or []
    free = gpu.get("free")
    by = _releasable(parts, ("release",))
    releasable = sum(b for _, b in by)
    ws = sum(b for _, b in _releasable(
        parts, ("release_workspaces", "release_workspaces_pins")))
    # "returnable": the key of the release before (docs/naming.md, "Words")
    out: dict = {"request": need, "free": free, "releasable": releasable,
                 "returnable": releasable,
                 "by": [{"source": s, "bytes": b} for s, b in by],
                 "workspaces": ws, "free_after": None, "fits": None,
                 "fits_with_workspaces": None, "short": None,
                 "limited_by": "gpu"}
    err = doc.get("error") or ""
    if doc["framework"] == "cupy" and "limit set to:" in err:
        out["limited_by"] = "cupy limit"
    elif _jax_pool_limited(doc):
        out["limited_by"] = "jax pool"
        out["pool_free"] = _part(parts, "pool", "jax")
        out["pool_fits"] = out["pool_free"] >= need
    if free is None:
        return out
    after = free + releasable
    out.update(free_after=after, short=max(0, need - after))
    if out["limited_by"] == "gpu":
        out["fits"] = after >= need
        out["fits_with_workspaces"] = after + ws >= need
    else:
        out["fits"] = out["fits_with_workspaces"] = False
    return out


def _owners(by: list) -> str:
    names = [(_OWNERS.get(x["source"], f"{x['source']}'s cache"),
              x["bytes"]) for x in by]
    if len(names) == 1:
        return names[0][0]
    return ", ".join(f"{n} {_fmt(b)}" for n, b in names)


def fit_sentence(doc: dict) -> str:
    """"release() would release 97.5 GiB (CuPy's cache); 69.6 GiB would
    then fit", or why it would not."""
    r = doc["release"]
    need, free, back = r["request"], r["free"], r.get(
        "releasable", r.get("returnable"))  # a post-mortem of before
    d = doc["request"]["device"]
    if r["limited_by"] == "jax pool":
        return (f"JAX allocates from its own pool, {_fmt(r['pool_free'])} "
                f"of it free: release() would release {_fmt(back)} of the "
                f"other "
                f"frameworks' caches, outside that pool, and cannot make "
                f"room in it for {_fmt(need)}")
    if r["limited_by"] == "cupy limit":
        return ("CuPy's own limit (MemoryPool.set_limit, or "
                "CUPY_GPU_MEMORY_LIMIT) refused it before the driver was "
                "asked: raise the limit")
    if free is None:
        return ("the GPU's free memory is not known (NVML gives no figure "
                "here): whether it would fit cannot be said")
    if back > 0:
        head = (f"release() would release {_fmt(back)} "
                f"({_owners(r['by'])}); ")
        if r["fits"]:
            return (f"{head}{_fmt(need)} would then fit "
                    f"({_fmt(r['free_after'])} free)")
        return (f"{head}{_fmt(need)} would still not fit "
                f"({_fmt(r['free_after'])} free, {_fmt(r['short'])} short)")
    where = f" on GPU {d}" if d is not None else ""
    if need > free:
        return (f"release() would release nothing{where} (no cache of "
                f"this process there is releasable): {_fmt(need)} needs "
                f"{_fmt(need - free)} more than the {_fmt(free)} free")
    return (f"release() would release nothing{where}, and the "
            f"{_fmt(free)} free "
            f"now would hold {_fmt(need)}: memory was freed since the "
            f"allocator failed")


def _advice(doc: dict) -> list:
    """What to do, as {key, text}: advice whose outcome the arithmetic
    shows (release, then the request fits; checked by the tests, as
    explain()'s advice is), and what only the next start or another
    process can change."""
    r = doc["release"]
    parts = (doc["process"] or {}).get("parts") or []
    need = r["request"]
    out: list = []

    def add(key, text):
        out.append({"key": key, "text": text})

    if r["limited_by"] == "jax pool":
        add("jax_pool",
            "JAX's pool is what ran out: start JAX with a larger "
            "XLA_PYTHON_CLIENT_MEM_FRACTION, or with "
            "XLA_PYTHON_CLIENT_PREALLOCATE=false so that it takes memory "
            "from the GPU as it needs it (then release() of the other "
            "frameworks' caches makes room for it)")
        return out
    if r["limited_by"] == "cupy limit":
        add("cupy_limit", "raise CuPy's pool limit (cupy.get_default_"
            "memory_pool().set_limit(...), CUPY_GPU_MEMORY_LIMIT)")
        return out
    if r["fits"]:
        text = (f"call gpureclaim.release() before this allocation (it "
                f"releases {_fmt(r['releasable'])}), or decorate the step "
                f"with @gpureclaim.retry_on_oom, which does it on this "
                f"error and calls the step again")
        if doc["framework"] == "cupy":
            text += ("; gpureclaim.watch_oom(rescue=True) does it inside "
                     "CuPy's allocator, and the program sees no error")
        add("release", text)
        return out
    if r["fits_with_workspaces"]:
        add("release_workspaces",
            f"gpureclaim.release(workspaces=True) also frees the cuBLAS "
            f"workspaces ({_fmt(r['workspaces'])}): then {_fmt(need)} "
            f"fits")
        return out
    after = r["free_after"]
    pool = _part(parts, "pool", "jax")
    if pool > 0:
        text = (f"JAX preallocated a pool that never shrinks "
                f"({_fmt(pool)} of it unused here): set "
                f"XLA_PYTHON_CLIENT_PREALLOCATE=false (or a smaller "
                f"XLA_PYTHON_CLIENT_MEM_FRACTION) before JAX starts")
        if after is not None and after + pool >= need:
            text += f"; without the preallocation {_fmt(need)} would fit"
        add("xla_preallocate", text)
    others = doc["others"]
    held = sum(o["bytes"] or 0 for o in others)
    if held > 0:
        big = others[0]
        cmd = f", {big['command'][:60]}" if big.get("command") else ""
        text = (f"other processes hold {_fmt(held)} of this GPU (the "
                f"largest: pid {big['pid']}, {_fmt(big['bytes'])}{cmd}): "
                f"only they can give it back (gpureclaim ps lists them)")
        if after is not None and after + held >= need:
            text += f"; without them {_fmt(need)} would fit"
        add("others", text)
    live = sum(p["bytes"] for p in parts if p["known"] and p["bytes"] > 0
               and p["advice_key"] == "free_arrays")
    if live > 0:
        add("free_arrays", f"this process's live arrays and tensors hold "
            f"{_fmt(live)}: delete those the next step does not need")
    frag = [p for p in parts if p["kind"] == "not_releasable"
            and p["bytes"] > 0
            and p["hint"]]
    if frag:
        add("expandable_segments", frag[0]["hint"])
    total = (doc["gpu"] or {}).get("total")
    if total is not None and need > total:
        add("too_large", f"the request ({_fmt(need)}) is larger than the "
            f"whole GPU ({_fmt(total)}): no release makes it fit; split "
            f"the work")
    if not out:
        add("none", "nothing this process holds would make room for it")
    return out


def _blocks(call: Any, device: Optional[int]) -> list:
    from ..frameworks import torch

    if call is None or device is None:
        return []
    return torch.largest_blocks(call, device, TOP_BLOCKS)


_KINDS = ("device", "host pinned", "VMM physical", "async pool")


def _trace(device: Optional[int]) -> Optional[dict]:
    """The tracer's live table (what each library allocated through the
    driver and has not freed) on the GPU, and its log, which holds every
    call: None when the process is not traced."""
    from .. import _gpureclaim as _c

    rows = _c._trace_live()
    if rows is None:
        return None
    status = _c._trace_status() or {}
    keep = [{"library": lib or "?", "kind": _KINDS[k & 3], "bytes": b,
             "allocations": n}
            for d, k, lib, b, n in rows if d == device]
    keep.sort(key=lambda r: -r["bytes"])
    return {"log": status.get("path") or None, "rows": keep[:16]}


# ------------------------------------------------- the outcome, afterwards

def rescued(pm: Any, how: str, released: Optional[int],
            ok: Optional[bool], why: str) -> None:
    """A rescue tried after the error: how ("allocator": inside CuPy's
    allocator; "retry_on_oom": the decorator's next call), what release()
    returned, whether the allocation then succeeded (None: not known
    yet)."""
    if pm is not None:
        pm.doc["rescue"].append({"how": how, "released": released, "ok": ok,
                                 "why": why})


def retried(pm: Any, ok: bool) -> None:
    """The outcome of the call that @retry_on_oom made after its
    release."""
    if pm is None:
        return
    for r in reversed(pm.doc["rescue"]):
        if r["ok"] is None:
            r["ok"] = ok
            return


# ------------------------------------------------------------- the views

def _headline(doc: dict) -> str:
    req, gpu = doc["request"], doc["gpu"] or {}
    d = req["device"]
    where = f" on GPU {d}" if d is not None else ""
    if gpu.get("name"):
        where += f" ({gpu['name']})"
    about = "" if req["exact"] else "about "
    line = (f"{doc['framework']} asked for {about}{_fmt(req['bytes'])} "
            f"({req['bytes']} bytes){where}")
    if gpu.get("free") is not None:
        line += (f": {_fmt(gpu['free'])} free of {_fmt(gpu['total'])} "
                 f"(NVML)")
    return line


def _rescue_lines(doc: dict) -> list:
    out = []
    for r in doc["rescue"]:
        back = ("release() failed" if r["released"] is None
                else f"release() released {_fmt(r['released'])}")
        if r["how"] == "allocator":
            if r["ok"]:
                out.append(f"rescued: {back}, and the allocation tried again "
                           f"inside CuPy's allocator succeeded: the program "
                           f"saw no error")
            else:
                out.append(f"not rescued: {back}; the allocation tried again "
                           f"inside CuPy's allocator failed ({r['why']}): "
                           f"the program got the error")
        else:
            then = {True: "the next call succeeded",
                    False: "the next call failed",
                    None: "the next call is running"}[r["ok"]]
            out.append(f"@retry_on_oom: {back}; {then}")
    return out


def _bar(doc: dict) -> tuple:
    from .._explain._views import _colour

    proc = doc["process"] or {}
    gpu = doc["gpu"] or {}
    parts = [(f"{p['label']} ({p['source']})", p["bytes"],
              _colour(p["kind"], p["source"]))
             for p in proc.get("parts") or [] if p["known"] and p["bytes"] > 0]
    held = sum(o["bytes"] or 0 for o in doc["others"])
    if held:
        parts.append(("other processes", held, "@others"))
    if doc["unlisted"]:
        parts.append(("in use, no process listed", doc["unlisted"],
                      "@unlisted"))
    if gpu.get("free"):
        parts.append(("free", gpu["free"], "@free"))
    d = doc["request"]["device"]
    total = gpu.get("total")
    # its shares are of the GPU, the table's of this process: said apart
    caption = ((f"GPU {d}" if d is not None else "the GPU") +
               (f", of its {_fmt(total)}:" if total else ":"))
    return ("bar", caption, parts)


def _parts_table(doc: dict, short: bool) -> Optional[tuple]:
    from .._explain._views import _colour

    proc = doc["process"]
    if not proc or proc["driver"] is None:
        return None
    src = ("the driver's per-process figure" if proc["source"] == "driver"
           else "the sum of the allocators' figures")
    rows = []
    for p in proc["parts"]:
        if not p["known"] or (p["bytes"] == 0 and p["kind"] != "rest"):
            continue
        share = p["bytes"] / proc["driver"] if proc["driver"] else None
        row = [(p["label"], _colour(p["kind"], p["source"])), p["source"],
               p["bytes"], share, p["advice"]]
        if not short:
            row.append([x for x in (p["how"], p["hint"]) if x])
        rows.append(row)
    rows.append(["total", "", proc["driver"], "", ""])
    cols = [("part", "text"), ("source", "text"), ("bytes", "bytes"),
            ("of process", "share"), ("what to do", "prose")]
    return ("table", f"this process: {_fmt(proc['driver'])} ({src})", cols,
            rows)


def _others_block(doc: dict, short: bool) -> tuple:
    d = doc["request"]["device"]
    others = doc["others"]
    if not others:
        return ("p", f"no other process holds memory on GPU {d}"
                if d is not None else "no other process")
    held = sum(o["bytes"] or 0 for o in others)
    shown = others[:SHORT_ROWS] if short else others
    rows = [[str(o["pid"]), o["user"] or "?", o["bytes"],
             o["command"] or "?"] for o in shown]
    caption = f"other processes on GPU {d}: {_fmt(held)}"
    if len(shown) < len(others):
        caption += f" ({len(others) - len(shown)} more in the file)"
    cols = [("pid", "num"), ("user", "text"), ("bytes", "bytes"),
            ("command", "prose")]
    return ("table", caption, cols, rows)


def _where(frames: list, short: bool) -> list:
    """The frames shown under a block: Python's first (the user's code),
    else the first ones."""
    py = [f for f in frames if f["filename"].endswith(".py")]
    use = (py or frames)[:1 if short else 6]
    return [f"{f['filename']}:{f['line']} {f['name']}" for f in use]


def _blocks_block(doc: dict, short: bool) -> Optional[tuple]:
    blocks = doc["blocks"]
    if not blocks:
        return None
    shown = blocks[:SHORT_ROWS] if short else blocks
    rows = []
    for b in shown:
        at = _where(b["frames"], short)
        rows.append([f"{b['address']:#x}", b["size"],
                     at[0] if at else "(no stack: Torch records none)",
                     at[1:]])
    caption = "the largest live blocks (torch)"
    if not any(b["frames"] for b in blocks):
        caption += ("; torch.cuda.memory._record_memory_history() records "
                    "their stacks")
    cols = [("address", "text"), ("bytes", "bytes"),
            ("allocated at", "prose")]
    return ("table", caption, cols, rows)


def _trace_block(doc: dict, short: bool) -> Optional[tuple]:
    t = doc["trace"]
    if t is None:
        return None
    log = t["log"]
    calls = f"; every call: gpureclaim report {log}" if log else ""
    if short or not t["rows"]:
        total = sum(r["bytes"] for r in t["rows"])
        return ("p", f"traced: {_fmt(total)} live through the driver on this "
                     f"GPU, {len(t['rows'])} libraries{calls}")
    rows = [[r["library"], r["kind"], r["bytes"], str(r["allocations"])]
            for r in t["rows"]]
    cols = [("library", "text"), ("kind", "text"), ("bytes", "bytes"),
            ("allocations", "num")]
    return ("table", f"traced: live driver allocations by library{calls}",
            cols, rows)


def view(doc: dict, short: bool = False, path: Optional[str] = None,
         write_error: Optional[str] = None) -> tuple:
    """The post-mortem as a view of the C renderer (python/src/view.c):
    short (stderr: one screen) or whole (report, notebook)."""
    blocks: list = [("warn", _headline(doc))]
    blocks += [("p", line) for line in _rescue_lines(doc)]
    if not short:
        blocks.append(_bar(doc))
    for b in (_parts_table(doc, short), ("p", fit_sentence(doc)),
              _others_block(doc, short), _blocks_block(doc, short),
              _trace_block(doc, short)):
        if b is not None:
            blocks.append(b)
    for a in doc["advice"]:
        blocks.append(("p", f"what to do: {a['text']}"))
    if path:
        path = _shown(path)
        blocks.append(("p", f"post-mortem: {path} (gpureclaim report "
                            f"{path})"))
    elif write_error:
        blocks.append(("warn", f"post-mortem not written: {write_error}"))
    if not short:
        if doc.get("error"):
            blocks.append(("p", f"the error: {doc['error'][:600]}"))
        notes = list(doc["notes"]) + list((doc["process"] or {}).get(
            "notes") or [])
        blocks.append(("notes", notes))
        blocks.append(("p", f"made in {_secs(doc['seconds'])} without a "
                            f"garbage collection; pid {doc['pid']}: "
                            f"{' '.join(doc['argv'])[:200]}"))
    title = ("gpureclaim: out of memory" if short else
             "gpureclaim: out-of-memory post-mortem")
    return title, blocks


def _secs(s: float) -> str:
    from .. import _gpureclaim as _c

    return _c.format_seconds(s)


class PostMortem:
    """One out-of-memory post-mortem: ``to_dict()`` the document (exact
    bytes; docs/oom.md lists its keys), ``str()`` the whole as text,
    ``short()`` the stderr text, ``_repr_html_()`` the notebook view;
    ``path`` the file it was written to (None if not), ``write_error``
    why not; ``call`` the name of the @retry_on_oom function whose call
    failed (None elsewhere)."""

    __slots__ = ("doc", "path", "write_error", "call")

    def __init__(self, doc: dict, path: Optional[str] = None):
        self.doc = doc
        self.path = path
        self.write_error: Optional[str] = None
        self.call: Optional[str] = None

    @property
    def framework(self) -> str:
        return self.doc["framework"]

    @property
    def bytes(self) -> int:
        return self.doc["request"]["bytes"]

    @property
    def device(self) -> Optional[int]:
        return self.doc["request"]["device"]

    @property
    def fits_after_release(self) -> Optional[bool]:
        return self.doc["release"]["fits"]

    @property
    def advice(self) -> list:
        return [a["key"] for a in self.doc["advice"]]

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self.doc))

    def to_json(self) -> str:
        """The file's text: begins with SIGNATURE."""
        return json.dumps(self.doc, indent=1) + "\n"

    def short(self) -> str:
        from .. import _gpureclaim as _c

        return _c.render(view(self.doc, True, self.path, self.write_error),
                         "text")

    def __str__(self) -> str:
        from .. import _gpureclaim as _c

        return _c.render(view(self.doc, False, self.path, self.write_error),
                         "text")

    __repr__ = __str__

    def _repr_html_(self) -> str:
        from .. import _gpureclaim as _c

        return _c.render(view(self.doc, False, self.path, self.write_error),
                         "html")


# --------------------------------------------------------------- the file

def _name(fixed: Optional[str], n: int) -> str:
    if fixed is None:
        return f"gpureclaim-oom-{os.getpid()}-{n}.json"
    if n == 1:
        return fixed
    stem, ext = os.path.splitext(fixed)
    return f"{stem}-{n}{ext}"


def write_new(pm: PostMortem, dest: tuple, start: int) -> tuple:
    """Writes pm into the folder of dest as the first free name from the
    start-th on: (path, n). Created with O_CREAT|O_EXCL|O_NOFOLLOW, mode
    0600, relative to the folder opened once: a name that exists (a file,
    a planted link, anything) is skipped, never opened, never replaced. A
    folder that every user may write to and that is not sticky is
    refused (anyone could replace the file after it is written)."""
    folder, fixed = dest
    data = pm.to_json().encode()
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        st = os.fstat(dfd)
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            raise OSError(f"{folder} is writable by every user and not "
                          f"sticky: a file there could be replaced; give "
                          f"watch_oom() (or GPURECLAIM_OOM) a path elsewhere")
        flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC)
        for n in range(start, start + 1000):
            name = _name(fixed, n)
            try:
                fd = os.open(name, flags, 0o600, dir_fd=dfd)
            except FileExistsError:
                continue
            try:
                view_ = memoryview(data)
                while view_:
                    view_ = view_[os.write(fd, view_):]
            except OSError:
                os.close(fd)
                os.unlink(name, dir_fd=dfd)
                raise
            os.close(fd)
            return os.path.join(folder, name), n
        raise OSError(f"{folder}: the names {_name(fixed, start)} to "
                      f"{_name(fixed, start + 999)} are all taken")
    finally:
        os.close(dfd)


def _notebook() -> Any:
    """The Jupyter kernel's shell when this runs in one (IPython is then
    imported already), else None."""
    get = getattr(sys.modules.get("IPython"), "get_ipython", None)
    try:
        shell = get() if get is not None else None
    except Exception:
        return None
    return shell if getattr(shell, "kernel", None) is not None else None


def rescued_line(pm: PostMortem) -> Optional[str]:
    """One line for stderr where a rescue worked (the program went on):
    the post-mortem's "out of memory" headline and its advice would tell
    a program that is fine to do what it did; None where none worked."""
    ok = [r for r in pm.doc["rescue"] if r["ok"]]
    if not ok:
        return None
    r = ok[-1]
    where = (f"post-mortem: {_shown(pm.path)}" if pm.path else
             "gpureclaim.oom.last() has the post-mortem")
    back = ("" if r["released"] is None
            else f" released {_fmt(r['released'])} and")
    if r["how"] == "retry_on_oom":
        return (f"gpureclaim: {pm.call or 'the call'}() ran out of GPU "
                f"memory; @retry_on_oom{back} the next call succeeded "
                f"({where})")
    return (f"gpureclaim: {pm.framework} ran out of GPU memory; "
            f"watch_oom(rescue=True){back} the allocation succeeded on its "
            f"second try ({where})")


def show(pm: PostMortem) -> None:
    """In a notebook the whole view (HTML, the short text as its plain
    form); elsewhere the short text on stderr, or one line where a rescue
    worked."""
    if _notebook() is not None:
        from IPython.display import display

        display({"text/html": pm._repr_html_(), "text/plain": pm.short()},
                raw=True)
        return
    err = sys.stderr
    if err is not None:
        err.write((rescued_line(pm) or pm.short()) + "\n")
        err.flush()


# ------------------------------------------------- gpureclaim report FILE

def is_postmortem(path: str) -> bool:
    """The file at path begins with SIGNATURE (as cli/cmd_report.c
    checks: a regular file, opened without blocking)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, len(SIGNATURE)) == SIGNATURE.encode()
    except OSError:
        return False
    finally:
        os.close(fd)


def load(path: str) -> PostMortem:
    """A saved post-mortem; ValueError (one line) when it is not one."""
    with open(path, "rb") as f:
        data = f.read(MAX_READ + 1)
    if len(data) > MAX_READ:
        raise ValueError(f"larger than {MAX_READ >> 20} MiB: not a "
                         f"post-mortem of gpureclaim")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError("not an out-of-memory post-mortem of gpureclaim")
    if doc.get("version") != VERSION:
        raise ValueError(f"a post-mortem of format version "
                         f"{doc.get('version')!r}; this gpureclaim reads "
                         f"version {VERSION}")
    try:
        str(PostMortem(doc))  # every key the views read is there
    except Exception as e:
        raise ValueError(f"malformed post-mortem ({type(e).__name__}: "
                         f"{e})") from None
    return PostMortem(doc)


_TRACE_ONLY = ("--chrome", "--svg", "--rmm-csv", "--max-events", "--top")


def _usage_error(msg: str) -> int:
    sys.stderr.write(f"gpureclaim report: {msg}\n"
                     "Run 'gpureclaim report --help' for the options.\n")
    return 2


def _export(path: str, text: str, force: bool) -> Optional[str]:
    """Writes the page at path by the exports' rule (cli/util_file.c):
    None, or why not."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        return f"cannot write {path}: {e.strerror}"
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            if not force:
                return (f"{path} is a symbolic link (--force replaces the "
                        f"link itself, never what it names)")
        elif not stat.S_ISREG(st.st_mode):
            return f"{path} is not a regular file"
        elif not force:
            if st.st_uid != os.getuid():
                return f"{path} belongs to another user (--force replaces it)"
            if st.st_size:
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW
                                 | os.O_NONBLOCK | os.O_CLOEXEC)
                    with os.fdopen(fd, "rb") as f:
                        head = f.read(len(PAGE_SIGNATURE))
                except OSError as e:
                    return f"cannot read {path}: {e.strerror}"
                if head != PAGE_SIGNATURE.encode():
                    return (f"{path} exists and is not a page of gpureclaim "
                            f"(--force replaces it)")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder,
                                   prefix=f".{os.path.basename(path)}.")
    except OSError as e:
        return f"cannot write {path}: {e.strerror}"
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return f"writing {path} failed: {e.strerror}"
    return None


def main(argv: list) -> int:
    """`gpureclaim report FILE.json ...`, handed over by the command when
    FILE begins with SIGNATURE (cli/cmd_report.c, __main__.py)."""
    from .. import _gpureclaim as _c

    path, html, as_json, force, as_text = None, None, False, False, False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--json":
            as_json = True
        elif a == "--text":
            as_text = True
        elif a == "--force":
            force = True
        elif a == "--html" or a.startswith("--html="):
            if a == "--html":
                if not args:
                    return _usage_error("this option needs a value: '--html'")
                html = args.pop(0)
            else:
                html = a[len("--html="):]
        elif a.split("=")[0] in _TRACE_ONLY:
            return _usage_error(f"'{a.split('=')[0]}' is for trace logs, and "
                                f"this is an out-of-memory post-mortem")
        elif a.startswith("-") and a != "-":
            return _usage_error(f"unknown option '{a}'")
        elif path is None:
            path = a
        else:
            return _usage_error(f"expected one file, not also '{a}'")
    if path is None:
        return _usage_error("expected one file")
    try:
        pm = load(path)
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        sys.stderr.write(f"gpureclaim report: {path}: {why}\n")
        return 1
    if html is not None:
        why = _export(html, _c.render(view(pm.doc), "document"), force)
        if why:
            sys.stderr.write(f"gpureclaim report: {why}\n")
            return 1
        # as a trace's exports (cli/cmd_report.c): the file said, the
        # report printed only when asked
        sys.stderr.write(f"gpureclaim report: wrote {html} (the "
                         f"post-mortem as a page)\n")
        if not (as_text or as_json):
            return 0
    out = json.dumps(pm.doc, indent=1) if as_json else str(pm)
    try:
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return 1
    return 0
