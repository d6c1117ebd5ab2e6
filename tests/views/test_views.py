"""Every notebook view (Release, explain(), the out-of-memory post-mortem,
the trace report, the three
cluster reports), rendered on the simulated driver by views.py, is
well-formed, self-contained HTML whose bars carry every part's exact bytes
(check_html.py); its text form shows the same figures in binary units."""
import json
import os
import re
import subprocess
import sys

import pytest

from check_html import check

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VIEWS = ["release", "explain", "oom", "trace", "trace-sample", "cluster-release",
         "cluster-explain", "cluster-ps"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("views")
    p = subprocess.run([sys.executable, os.path.join(HERE, "views.py"),
                        str(out)], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return out, json.loads((out / "expect.json").read_text())


@pytest.mark.parametrize("name", VIEWS)
def test_view_is_valid_self_contained_and_shows_its_figures(rendered, name):
    out, expect = rendered
    html = (out / f"{name}.html").read_text()
    assert html.startswith('<div class="gpr"><style>')
    assert check(html, expect[name]) == []
    assert any(expect[name]), "the scenario gave the view no bar"
    if name == "trace":
        page = (out / "trace-page.html").read_text()
        assert page.startswith("<!DOCTYPE html>\n<!-- gpureclaim report -->")
        assert check(page, expect[name]) == []
    if name.startswith("trace"):
        assert "<svg" in html  # the plot, inline


@pytest.mark.parametrize("name", [v for v in VIEWS
                                  if not v.startswith("trace")])
def test_text_form_is_in_binary_units(rendered, name):
    out, _ = rendered
    text = (out / f"{name}.txt").read_text()
    assert re.search(r"\d\.\d (KiB|MiB|GiB)", text)
    assert not re.search(r"\d (GB|MB|KB)\b", text), text


def test_the_checker_fails_what_it_must():
    ok = '<div class="gpr"><div class="gpr-bar"><div class="gpr-seg" ' \
         'title="live: 1.0 KiB (1024 bytes, 100%)">x</div></div></div>'
    assert check(ok, [[1024]]) == []
    assert check(ok, [[2048]])  # a figure missing
    assert check(ok.replace("</div></div></div>", "</div></div>"), [[1024]])
    assert check(ok + "<script>alert(1)</script>", [[1024]])
    assert check(ok + '<img src="https://x/y.png">', [[1024]])
    assert check(ok + '<a href="//x/y">y</a>', [[1024]])
    assert check(ok + '<span onclick="f()">y</span>', [[1024]])
    assert check(ok + '<span style="background:url(http://x)">y</span>',
                 [[1024]])
    assert check(ok + '<p></span></p>', [[1024]])
