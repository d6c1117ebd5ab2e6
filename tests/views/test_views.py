"""Every notebook view (Release, explain(), the out-of-memory post-mortem,
the trace report, the three
cluster reports), rendered on the simulated driver by views.py, is
well-formed, self-contained HTML whose bars carry every part's exact bytes
(check_html.py); its text form shows the same figures in binary units."""
import json
from html import unescape
import os
import re
import subprocess
import sys

import pytest

from check_html import check

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VIEWS = ["release", "explain", "explain-holders", "oom", "trace", "trace-sample", "cluster-release",
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
    # the seed scenario's trace: one library that freed everything, no bar
    assert any(expect[name]) or name == "trace", "the scenario gave no bar"
    if name.startswith("trace"):
        # no bar of one part: it would say only what its caption says
        assert all(len(parts) > 1 for parts in expect[name]), expect[name]
    if name == "trace":
        page = (out / "trace-page.html").read_text()
        assert page.startswith("<!DOCTYPE html>\n<!-- gpureclaim report -->")
        assert check(page, expect[name]) == []
    if name.startswith("trace"):
        assert "<svg" in html  # the plot, inline


@pytest.mark.parametrize("name", ["free-plan", "free-report"])
def test_the_free_views_are_valid_and_self_contained(rendered, name):
    """free_plan()'s and free()'s views: a table of statements, no bar."""
    out, _ = rendered
    html = (out / f"{name}.html").read_text()
    assert html.startswith('<div class="gpr"><style>')
    assert check(html, []) == []
    assert "<table" in html and "del total" in unescape(html)
    text = (out / f"{name}.txt").read_text()
    assert "released" in text if name == "free-report" else \
        "releasable" in text


@pytest.mark.parametrize("name", [v for v in VIEWS
                                  if not v.startswith("trace")] +
                         ["free-plan", "free-report"])
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


UUID0 = "GPU-5111a000-0000-4000-8000-000000000000"
SHORT0 = "GPU-5111a000\u20260000"


@pytest.mark.parametrize("name", ["cluster-release", "cluster-explain",
                                  "cluster-ps"])
def test_cluster_views_name_a_gpu_by_a_short_uuid(rendered, name):
    """A 40-character UUID made the tables too wide: rows and captions
    name a GPU by a short form, the whole UUID on a line under its row."""
    out, _ = rendered
    html = (out / f"{name}.html").read_text()
    text = (out / f"{name}.txt").read_text()
    for form in (html, text):
        assert SHORT0 in form, form
        assert form.count(UUID0) == 1, form  # under its per-GPU row only


def test_the_holders_table_names_each_holder(rendered):
    out, _ = rendered
    html = unescape((out / "explain-holders.html").read_text())
    text = (out / "explain-holders.txt").read_text()
    for name in ("weights['embed']", "Out[3]",
                 "sys.last_traceback: frame train() local 'batch'"):
        assert name in html and name in text, name
    assert "Who holds the largest live allocations" in text


def test_the_cluster_explain_bar_says_what_it_spans(rendered):
    out, _ = rendered
    html = (out / "cluster-explain.html").read_text()
    assert re.search(SHORT0 + r" \(\w+\): where the workers&#39; [0-9.]+ "
                     r"[KMG]iB go \(the GPU has 80\.0 GiB\):", html) or \
        re.search(SHORT0 + r" \(\w+\): where the workers' [0-9.]+ [KMG]iB go "
                  r"\(the GPU has 80\.0 GiB\):", html), html


@pytest.mark.parametrize("name", ["release", "cluster-release"])
def test_release_views_free_is_the_tables(rendered, name):
    """The GPU bar's free part is the free memory after the release, the
    table's figure (no "free before" beside a table's "free"); what was
    released is drawn at the process's own scale."""
    out, _ = rendered
    html = (out / f"{name}.html").read_text()
    assert "free before" not in html
    assert "released" in html and "still held" in html
    assert "given back" not in html
