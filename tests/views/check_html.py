"""What every notebook view must be (make check runs it on each one):
well-formed HTML, self-contained (no script, no event handler, nothing
loaded from elsewhere: no http(s) or protocol-relative src/href, no
<link>, <iframe>, <object> or <embed>), and showing its figures: the
exact bytes of every part of its bars in the title or label of a segment.

    problems = check(html, parts)   # [] when all is well
"""
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
        "meta", "source", "track", "wbr"}
# SVG's own elements that may close themselves (<rect .../>)
SVG_EMPTY = {"rect", "line", "polyline", "path", "circle", "polygon",
             "ellipse", "stop", "use"}
FORBIDDEN = {"script", "link", "iframe", "object", "embed", "base", "frame"}


class _Checker(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.problems = [], []
        self.seg_titles, self.seg_texts = [], []
        self._in_seg = 0

    def handle_starttag(self, tag, attrs):
        self._start(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self._start(tag, attrs)
        if tag not in VOID and tag not in SVG_EMPTY:
            self.problems.append(f"<{tag}/> is not an element that may "
                                 "close itself")

    def _start(self, tag, attrs):
        if tag in FORBIDDEN:
            self.problems.append(f"<{tag}> in a view")
        a = dict(attrs)
        for k, v in attrs:
            if k.startswith("on"):
                self.problems.append(f"event handler {k}= on <{tag}>")
            if k in ("src", "href", "xlink:href", "action", "srcset") and v:
                low = v.strip().lower()
                if (low.startswith(("http:", "https:", "//", "javascript:"))
                        or "://" in low):
                    self.problems.append(f"{k}={v!r} loads from elsewhere")
            if k == "style" and v and "url(" in v.replace(" ", "").lower():
                self.problems.append(f"style with url() on <{tag}>")
        cls = (a.get("class") or "").split()
        if "gpr-seg" in cls or "gpr-ol" in cls:
            self.seg_titles.append(a.get("title") or "")
            self._in_seg = len(self.stack) + (tag not in VOID)
            self.seg_texts.append("")

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes "
                                 f"{'<' + self.stack[-1] + '>' if self.stack else 'nothing'}")
            if tag in self.stack:
                while self.stack.pop() != tag:
                    pass
            return
        self.stack.pop()
        if self._in_seg and len(self.stack) < self._in_seg:
            self._in_seg = 0

    def handle_data(self, data):
        if self._in_seg and self.seg_texts:
            self.seg_texts[-1] += data


def check(html, parts):
    """Problems of one view's HTML; parts: for each bar in order, the
    exact bytes of its parts (every one must appear as "N bytes")."""
    c = _Checker()
    c.feed(html)
    c.close()
    problems = list(c.problems)
    if c.stack:
        problems.append(f"left open: {c.stack}")
    if "@import" in html:
        problems.append("a style imports from elsewhere")
    shown = " ".join(c.seg_titles + c.seg_texts)
    for bar in parts:
        for b in bar:
            if f"{b} bytes" not in shown:
                problems.append(f"a part of {b} bytes is in no bar's "
                                "segment title or label")
    n_bars = html.count('class="gpr-bar"')
    want = sum(1 for bar in parts if bar)
    if n_bars != want:
        problems.append(f"{n_bars} bars, {want} expected")
    return problems
