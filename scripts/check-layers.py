#!/usr/bin/env python3
"""Checks the layering of the C tree and of the Python package
(docs/naming.md, "Layers").

Every tracked .c/.h file belongs to a folder of LAYERS. A file may include
files of its own folder and of folders on a lower layer, never of a folder
on its own layer or above. Includes are resolved as the compiler does
(the including file's folder, then -Iinclude -Isrc -Isrc/driver); an
include that resolves to no tracked file fails too.

It also fails on an include loop between files, and, given --objects
BUILD (a Meson build folder, after a build), on a loop of calls between
files (a global symbol of A used by B and one of B used by A, through any
chain) or a call into a higher layer, read from `nm` of each tracked
source's objects (BUILD/compile_commands.json says which they are).

The Python package (python/gpureclaim/) is checked the same way from its
sources: every module belongs to a wing of PY_LAYERS, and each import of
one of the package's modules (every `import` and `from` statement, those
inside functions too) goes to the module's own wing or to a wing on a
lower layer; an import of a module the package does not have fails, and
so does a loop of imports between modules.

Usage: check-layers.py [--objects BUILD]
"""
import ast
import json
import os
import re
import subprocess
import sys

# (folder, layer): a file belongs to the longest folder that holds it.
LAYERS = [
    ("include", 0),        # the public headers
    ("src/out", 0),        # the output toolkit
    ("src/driver", 1),     # dlopen of libcuda and NVML, vendor ABI headers
    ("trace/format", 1),   # the trace log: format, operations, its codec
    ("src", 2),            # the core library
    ("trace/inject", 2),   # the injection library
    ("trace/read", 2),     # the trace reader and its renderers
    ("sim", 2),            # the simulated driver
    ("cli", 3),            # the command
    ("python/src", 3),     # the CPython extension
    ("tests", 4),
    ("bench", 4),
    ("examples", 4),
]

INCLUDE_DIRS = ["include", "src", "src/driver"]

# The Python package, one wing a row (module, layer): a module belongs to
# the longest row that is it or a package above it; the package itself
# ("gpureclaim", its __init__.py: the API) is its own row only. The API
# imports what lies below it; the wings above it use the API and are
# offered by it on first use (its __getattr__, by name: no import
# statement), so nothing below ever reaches up.
PY_PACKAGE_DIR = "python"
PY_LAYERS = [
    ("gpureclaim._gpureclaim", 0),  # the C extension (python/src/)
    ("gpureclaim.frameworks", 1),   # one module per framework
    ("gpureclaim._startup", 1),     # the startup hook: its starters (by
                                    # name) and the import hook
    ("gpureclaim._explain", 2),     # explain(): its parts, holders, views
    ("gpureclaim._trace", 2),       # tracing from inside
    ("gpureclaim", 3),              # the API (__init__.py)
    ("gpureclaim.agent", 4),        # the agent: client, server, protocol
    ("gpureclaim.oom", 4),          # the watch, the retry, the post-mortem
    ("gpureclaim.metrics", 5),      # the reading (asks agents), exporter
    ("gpureclaim.cluster", 6),      # Dask, torch.distributed, Ray
    ("gpureclaim._ipython", 6),     # %load_ext: the trace's magic, agent
    ("gpureclaim._commands", 7),    # the subcommands handed to Python
    ("gpureclaim.__main__", 8),     # python -m gpureclaim: the dispatch
]

# Call loops tolerated for now, each a tuple of files to be cut by named
# work (none today: issue 10 cut the last ones). A listed loop that is gone
# fails the check until its line is removed.
KNOWN_CALL_LOOPS: set = set()

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# Vendors' names, which a file of the tree may define in their place: the
# simulated driver and bench/fakecuda.c (cuInit, nvmlInit_v2...), the
# tracer's interposer (dlsym, cuMemAlloc_v2...). A use of one is a call to
# the vendor's library, whichever stands in, not a call between our files.
VENDOR_RE = re.compile(r"^(cu[A-Z]\w*|nvml[A-Z]\w*|dlsym)$")


def folder_of(path):
    best = None
    for folder, layer in LAYERS:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best[0]):
                best = (folder, layer)
    return best


def tracked_sources():
    out = subprocess.run(["git", "ls-files", "*.c", "*.h"], check=True,
                         capture_output=True, text=True).stdout
    return sorted(p for p in out.splitlines() if os.path.exists(p))


def resolve(src, name, known):
    for base in [os.path.dirname(src)] + INCLUDE_DIRS:
        p = os.path.normpath(os.path.join(base, name))
        if p in known:
            return p
    return None


def strongly_connected(graph):
    """Tarjan's components of more than one node, iteratively."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(tuple(sorted(comp)))
    return comps


def down_only(own, other, crossings, errors, say):
    """A use from own's (folder or wing, layer) into other's: noted when
    it crosses to another, an error (say(other)) unless it goes down."""
    if other is None or other[0] == own[0]:
        return
    crossings.add((own[0], other[0]))
    if other[1] >= own[1]:
        errors.append(say(other))


def check_includes(files, errors):
    known = set(files)
    graph = {}
    crossings = set()
    for src in files:
        own = folder_of(src)
        if own is None:
            errors.append(f"{src}: its folder is not in the layer table "
                          "(scripts/check-layers.py, LAYERS)")
            continue
        with open(src, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for name in INCLUDE_RE.findall(text):
            dst = resolve(src, name, known)
            if dst is None:
                errors.append(f'{src}: #include "{name}" is no tracked file')
                continue
            graph.setdefault(src, set()).add(dst)
            down_only(own, folder_of(dst), crossings, errors, lambda o: (
                f'{src}: #include "{name}" reaches {o[0]}/ (layer {o[1]}) '
                f"from {own[0]}/ (layer {own[1]}): includes go down only"))
    for comp in strongly_connected(graph):
        errors.append("include loop between " + ", ".join(comp))
    return crossings


def nm_symbols(obj):
    out = subprocess.run(["nm", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRCWV":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] in "Uw":
            used.add(parts[1])
    return defined, used


def objects_of(builddir):
    """{tracked source path: [its object files]} from Meson's compilation
    database (a source compiled for several targets has several)."""
    db = os.path.join(builddir, "compile_commands.json")
    if not os.path.exists(db):
        return None
    # the checkout the sources really lie in (run from a folder of links
    # to it, as the docs runner does, "." is not it)
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    objs = {}
    with open(db) as f:
        for entry in json.load(f):
            d = entry["directory"]
            src = os.path.relpath(os.path.realpath(
                os.path.join(d, entry["file"])), root)
            objs.setdefault(src, []).append(os.path.join(d, entry["output"]))
    return objs


# Test stand-ins that interpose another library's functions (libc's _exit
# and clone, torch's workspace maps, the tracer's live query): what they
# define belongs to that library, so calling it is no call into tests/.
STAND_INS = ("tests/fixtures/",)


def check_calls(files, objdir, errors):
    objs = objects_of(objdir)
    if objs is None:
        errors.append(f"no {objdir}/compile_commands.json: --objects takes "
                      "a Meson build folder")
        return
    owner, uses = {}, {}
    for src in files:
        if not src.endswith(".c"):
            continue
        built = [o for o in objs.get(src, ()) if os.path.exists(o)]
        if not built:
            continue
        used = set()
        for obj in built:
            d, u = nm_symbols(obj)
            if not src.startswith(STAND_INS):
                for sym in d:
                    owner.setdefault(sym, set()).add(src)
            used |= u
        uses[src] = used
    if not uses:
        errors.append(f"no object of a tracked source under {objdir}")
        return
    graph = {}
    for src, used in uses.items():
        for sym in used:
            if VENDOR_RE.match(sym):
                continue
            for dst in owner.get(sym, ()):
                if dst == src:
                    continue
                graph.setdefault(src, set()).add(dst)
                a, b = folder_of(src), folder_of(dst)
                if a and b and a[0] != b[0] and b[1] >= a[1]:
                    errors.append(f"{src} calls {sym} of {dst}: calls go "
                                  "down only")
    loops = set(strongly_connected(graph))
    for comp in sorted(loops - KNOWN_CALL_LOOPS):
        errors.append("call loop between " + ", ".join(comp))
    for comp in sorted(KNOWN_CALL_LOOPS - loops):
        if not all(f in uses for f in comp):
            continue  # not built here (the extension needs Python.h)
        errors.append("the known call loop of " + ", ".join(comp) +
                      " is gone: remove it from KNOWN_CALL_LOOPS")
    for comp in sorted(KNOWN_CALL_LOOPS & loops):
        print("layers: known call loop, to be cut: " + ", ".join(comp))


def py_module_of(path, base):
    """The module a file under base is ('gpureclaim.agent' for
    gpureclaim/agent/__init__.py), and whether it is a package."""
    rel = os.path.relpath(path, base)
    parts = rel[:rel.rindex(".")].split(os.sep)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def py_wing_of(module, layers):
    """(wing, layer) of a module, or None."""
    best = None
    for wing, layer in layers:
        top = "." not in wing
        if module == wing or (not top and module.startswith(wing + ".")):
            if best is None or len(wing) > len(best[0]):
                best = (wing, layer)
    return best


def py_imports(tree, module, is_package):
    """The modules an import statement names, anywhere in the tree (a
    function's body too): [(line, module, names imported from it)]."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module if is_package else module.rpartition(".")[0]
                up = pkg.split(".")
                if node.level > 1:
                    up = up[:-(node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            out.append((node.lineno, base,
                        tuple(a.name for a in node.names)))
    return out


def check_python(files, base, layers, errors):
    """The Python part: files are the package's .py/.pyi files under base
    (the folder that holds the package). Returns the pairs of wings that
    an import crosses."""
    modules = {}
    for path in files:
        name, is_package = py_module_of(path, base)
        modules[name] = (path, is_package)
    tops = {m.split(".")[0] for m in modules}
    graph, crossings = {}, set()
    for module, (path, is_package) in sorted(modules.items()):
        own = py_wing_of(module, layers)
        shown = path
        if own is None:
            errors.append(f"{shown}: module {module} is in no wing of the "
                          "layer table (scripts/check-layers.py, PY_LAYERS)")
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for line, target, names in py_imports(tree, module, is_package):
            if target.split(".")[0] not in tops:
                continue  # the standard library, a framework, the user's
            # `from P import m` of a module m imports P.m, else P's names
            dsts = [f"{target}.{n}" for n in names
                    if f"{target}.{n}" in modules] or [target]
            for dst in dsts:
                if dst not in modules:
                    errors.append(f"{shown}:{line}: imports {dst}, which "
                                  "the package does not have")
                    continue
                if dst != module:
                    graph.setdefault(module, set()).add(dst)
                down_only(own, py_wing_of(dst, layers), crossings, errors,
                          lambda o: (
                              f"{shown}:{line}: imports {dst} ({o[0]}, "
                              f"layer {o[1]}) from {own[0]} (layer "
                              f"{own[1]}): imports go down only"))
    for comp in strongly_connected(graph):
        errors.append("import loop between " + ", ".join(comp))
    return crossings, len(modules)


def tracked_python():
    out = subprocess.run(["git", "ls-files", f"{PY_PACKAGE_DIR}/*.py",
                          f"{PY_PACKAGE_DIR}/*.pyi"], check=True,
                         capture_output=True, text=True).stdout
    return sorted(p for p in out.splitlines()
                  if os.path.exists(p) and not p.startswith(
                      os.path.join(PY_PACKAGE_DIR, "src") + "/"))


def main(argv):
    objdir = None
    if len(argv) == 2 and argv[0] == "--objects":
        objdir = argv[1]
    elif argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    files = tracked_sources()
    errors = []
    crossings = check_includes(files, errors)
    if objdir:
        check_calls(files, objdir, errors)
    py_crossings, py_count = check_python(tracked_python(), PY_PACKAGE_DIR,
                                          PY_LAYERS, errors)
    for e in errors:
        print("layers: " + e, file=sys.stderr)
    if errors:
        return 1
    print(f"layers: {len(files)} files, includes down only across "
          f"{len(crossings)} folder pairs, no include loop"
          + (", no new call loop" if objdir else "")
          + f"; {py_count} Python modules, imports down only across "
          f"{len(py_crossings)} wing pairs, no import loop")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
