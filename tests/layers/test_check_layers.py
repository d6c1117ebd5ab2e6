"""scripts/check-layers.py's Python part on fixture trees: a package laid
out in wings passes, and an import that goes up or sideways, an import
loop (also one inside a wing, also one through a function's import), an
import of a module the package lacks and a module of no wing each fail,
so the check of python/gpureclaim/ cannot pass silently."""
import importlib.util
import os
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "check_layers", os.path.join(ROOT, "scripts", "check-layers.py"))
layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layers)

TABLE = [("pkg._ext", 0), ("pkg.low", 1), ("pkg.side", 1), ("pkg", 2),
         ("pkg.high", 3)]

# a tree that keeps every rule: the API (pkg/__init__.py) uses what is
# below it and offers the wing above it by name only
GOOD = {
    "pkg/__init__.py": "from . import _ext\nfrom .low import thing\n"
                       "def __getattr__(n):\n"
                       "    import importlib\n"
                       "    return importlib.import_module('.high', __name__)\n",
    "pkg/_ext.pyi": "def f() -> int: ...\n",
    "pkg/low/__init__.py": "from .. import _ext\nfrom ._part import thing\n",
    "pkg/low/_part.py": "import os\nthing = os.sep\n",
    "pkg/side.py": "from pkg import _ext\n",
    "pkg/high/__init__.py": "import pkg\nfrom ..low import _part\n"
                            "def f():\n    from . import _more\n",
    "pkg/high/_more.py": "from .. import side, low\nimport json\n",
}


def check(tmp_path, files, table=TABLE):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    found = sorted(str(p) for p in tmp_path.rglob("*.py*"))
    errors = []
    crossings, count = layers.check_python(found, str(tmp_path), table,
                                           errors)
    return errors, crossings, count


def test_a_tree_in_wings_passes(tmp_path):
    errors, crossings, count = check(tmp_path, GOOD)
    assert errors == []
    assert count == len(GOOD)
    assert ("pkg.high", "pkg") in crossings
    assert ("pkg.high", "pkg.side") in crossings


@pytest.mark.parametrize("where,text,says", [
    # the API reaching up to a wing that uses it
    ("pkg/__init__.py", "from . import high\n",
     "pkg/__init__.py:1: imports pkg.high (pkg.high, layer 3) from pkg "
     "(layer 2): imports go down only"),
    # up, inside a function
    ("pkg/low/_part.py", "def f():\n    import pkg\n",
     "pkg/low/_part.py:2: imports pkg (pkg, layer 2) from pkg.low (layer 1)"),
    # sideways, to a wing on the same layer
    ("pkg/side.py", "from .low import thing\n",
     "pkg/side.py:1: imports pkg.low (pkg.low, layer 1) from pkg.side "
     "(layer 1)"),
    # a module the package does not have
    ("pkg/high/_more.py", "import json\nfrom .gone import x\n",
     "pkg/high/_more.py:2: imports pkg.high.gone, which the package does "
     "not have"),
])
def test_an_import_up_or_sideways_fails(tmp_path, where, text, says):
    errors, _, _ = check(tmp_path, dict(GOOD, **{where: text}))
    assert any(says in e for e in errors), errors


def test_an_import_loop_fails_inside_a_wing_and_through_a_function(tmp_path):
    files = dict(GOOD)
    files["pkg/high/_more.py"] = "def f():\n    from . import _other\n"
    files["pkg/high/_other.py"] = "from ._more import f\n"
    errors, _, _ = check(tmp_path, files)
    assert errors == ["import loop between pkg.high._more, pkg.high._other"]


def test_a_module_of_no_wing_fails(tmp_path):
    errors, _, _ = check(tmp_path, dict(GOOD, **{"pkg/stray.py": ""}))
    assert len(errors) == 1
    assert errors[0].endswith("module pkg.stray is in no wing of the layer "
                              "table (scripts/check-layers.py, PY_LAYERS)")


def test_the_packages_own_table_covers_it():
    """Every module of python/gpureclaim/ is in a wing of PY_LAYERS and
    the check passes there (what `make check` runs)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        errors = []
        _, count = layers.check_python(layers.tracked_python(),
                                       layers.PY_PACKAGE_DIR,
                                       layers.PY_LAYERS, errors)
    finally:
        os.chdir(cwd)
    assert errors == []
    assert count > 30
