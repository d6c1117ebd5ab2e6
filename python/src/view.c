/*
 * The Python package's views, rendered by the C output toolkit so that
 * every figure a person reads has one format (src/out/fmt.h: binary units)
 * and every notebook view the same building blocks (src/out/html.h):
 *
 * - report_text/report_json/report_html(handle): a release's report (the
 *   handle release() returns) by the core's own renderers, the same text
 *   and JSON as gpr_report_text/gpr_report_json;
 * - render(view, form): a view that Python describes as plain data (the
 *   explanation, the cluster reports), as text or as HTML;
 * - format_bytes(n), format_seconds(s): the one byte and duration format.
 *
 * A view is (title, blocks); each block is a tuple:
 *   ("p", text)                     a line of text
 *   ("warn", text)                  a line that warns
 *   ("h", text)                     a heading (a blank line before, in text)
 *   ("bar", caption, parts)         parts: [(label, bytes, colour or None)];
 *                                   HTML only (the tables carry the figures)
 *   ("table", caption, cols, rows)  cols: [(head, kind)], kind one of
 *                                   "text" (a name: left-aligned, on one
 *                                   line), "prose" (sentences: left-aligned,
 *                                   wrapped in HTML), "num" (a figure
 *                                   as text or int), "bytes" (an int, or
 *                                   None for unknown), "share" (a fraction,
 *                                   shown as a percentage), "secs" (seconds);
 *                                   a str cell is shown as given in any
 *                                   column; a row is a sequence of cells, with
 *                                   one more item, a list of lines shown
 *                                   under it, when it has more items than
 *                                   columns; a cell (text, colour) has a
 *                                   swatch of that colour in HTML
 *   ("notes", [text])               the notes
 * caption may be None. Strings are shown by the toolkit's rules: the
 * terminal-safe one in text, escaped in HTML.
 */
#include "ext.h"

#include <stdlib.h>
#include <string.h>

#include "out/buf.h"
#include "out/fmt.h"
#include "out/html.h"
#include "out/table.h"
#include "out/text.h"

/* ---------------------------------------------------------- the handle */

#define REPORT_CAPSULE "gpureclaim._gpureclaim.report"

static void report_destructor(PyObject *capsule)
{
	gpr_report_free(PyCapsule_GetPointer(capsule, REPORT_CAPSULE));
}

PyObject *gpr_py_report_handle(gpr_report *rep)
{
	PyObject *h = PyCapsule_New(rep, REPORT_CAPSULE, report_destructor);
	if (!h)
		gpr_report_free(rep);
	return h;
}

/* A C string the library allocated, as str (freed here). */
static PyObject *take_str(char *s)
{
	if (!s)
		return PyErr_NoMemory();
	PyObject *o = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
	gpr_free(s);
	return o;
}

static const gpr_report *report_of(PyObject *handle)
{
	return PyCapsule_GetPointer(handle, REPORT_CAPSULE);
}

/* One of the core's renderings of the handle's report, as str. */
static PyObject *rendered(PyObject *handle, char *(*fn)(const gpr_report *))
{
	const gpr_report *r = report_of(handle);
	return r ? take_str(fn(r)) : NULL;
}

PyObject *gpr_py_report_text(PyObject *module, PyObject *handle)
{
	(void)module;
	return rendered(handle, gpr_report_text);
}

PyObject *gpr_py_report_json(PyObject *module, PyObject *handle)
{
	(void)module;
	return rendered(handle, gpr_report_json);
}

PyObject *gpr_py_report_html(PyObject *module, PyObject *handle)
{
	(void)module;
	return rendered(handle, gpr_report_html);
}

/* ------------------------------------------------------------- formats */

PyObject *gpr_py_format_bytes(PyObject *module, PyObject *arg)
{
	(void)module;
	if (arg == Py_None)
		return PyUnicode_FromString("-");
	char h[32];
	/* the sums reports print reach 2**64 - 1 (16.0 EiB): all of them */
	if (PyLong_Check(arg)) {
		int over = 0;
		long long v = PyLong_AsLongLongAndOverflow(arg, &over);
		if (v == -1 && !over && PyErr_Occurred())
			return NULL;
		if (!over)
			return PyUnicode_FromString(
			    gpr__fmt_sbytes((int64_t)v, h, sizeof h));
		unsigned long long u =
		    over > 0 ? PyLong_AsUnsignedLongLong(arg) : 0;
		if (over < 0 ||
		    (u == (unsigned long long)-1 && PyErr_Occurred())) {
			PyErr_Clear();
			PyErr_Format(PyExc_OverflowError,
				     "format_bytes() takes bytes from -2**63 "
				     "to 2**64 - 1, not %R",
				     arg);
			return NULL;
		}
		return PyUnicode_FromString(
		    gpr__fmt_bytes((uint64_t)u, h, sizeof h));
	}
	int64_t v;
	if (gpr_py_i64(arg, &v))
		return NULL;
	return PyUnicode_FromString(gpr__fmt_sbytes(v, h, sizeof h));
}

PyObject *gpr_py_format_seconds(PyObject *module, PyObject *arg)
{
	(void)module;
	double s = PyFloat_AsDouble(arg);
	if (s == -1.0 && PyErr_Occurred())
		return NULL;
	char h[32];
	return PyUnicode_FromString(gpr__fmt_secs(s, h, sizeof h));
}

/* -------------------------------------------------------------- render */

/* Objects the render keeps alive while C holds pointers into them. */
struct keep {
	PyObject *list;
};

/* obj as UTF-8, valid while keep lives; lone surrogates replaced. NULL
 * with an error set. */
static const char *utf8(struct keep *k, PyObject *obj)
{
	PyObject *s = PyUnicode_Check(obj) ? Py_NewRef(obj) : PyObject_Str(obj);
	if (!s)
		return NULL;
	PyObject *bytes = PyUnicode_AsEncodedString(s, "utf-8", "replace");
	Py_DECREF(s);
	if (!bytes)
		return NULL;
	if (PyList_Append(k->list, bytes)) {
		Py_DECREF(bytes);
		return NULL;
	}
	Py_DECREF(bytes);
	return PyBytes_AsString(bytes);
}

/* item i of a sequence (new reference) as a string kept alive. */
static const char *item_str(struct keep *k, PyObject *seq, Py_ssize_t i)
{
	PyObject *o = PySequence_GetItem(seq, i);
	if (!o)
		return NULL;
	const char *s = o == Py_None ? "" : utf8(k, o);
	Py_DECREF(o);
	return s;
}

static int bad(const char *what)
{
	PyErr_Format(PyExc_TypeError, "render(): %s", what);
	return -1;
}

static enum gpr__col_kind col_kind(const char *s, int *extra)
{
	*extra = 0;
	if (!strcmp(s, "text"))
		return GPR__COL_TEXT;
	if (!strcmp(s, "bytes"))
		return GPR__COL_BYTES;
	if (!strcmp(s, "prose"))
		return GPR__COL_PROSE;
	if (!strcmp(s, "share"))
		*extra = 1;
	else if (!strcmp(s, "secs"))
		*extra = 2;
	else if (strcmp(s, "num"))
		*extra = -1;
	return GPR__COL_NUM;
}

/* One cell of column kind (kind, extra) from obj. */
static int add_cell(struct keep *k, struct gpr__table *t,
		    enum gpr__col_kind kind, int extra, PyObject *obj)
{
	PyObject *colour = NULL;
	if (PyTuple_Check(obj) && PyTuple_Size(obj) == 2) {
		colour = PyTuple_GetItem(obj, 1);
		obj = PyTuple_GetItem(obj, 0);
	}
	if (obj == Py_None) {
		gpr__table_cell(t, "-");
	} else if (PyUnicode_Check(obj)) { /* as given, in any column */
		const char *s = utf8(k, obj);
		if (!s)
			return -1;
		gpr__table_cell(t, s);
	} else if (kind == GPR__COL_BYTES) {
		int64_t v;
		if (gpr_py_i64(obj, &v))
			return -1;
		gpr__table_sbytes(t, 1, v);
	} else if (extra == 1 || extra == 2) {
		double d = PyFloat_AsDouble(obj);
		if (d == -1.0 && PyErr_Occurred())
			return -1;
		char h[32];
		gpr__table_cell(t, extra == 1
				       ? gpr__fmt_percent(d * 100, h, sizeof h)
				       : gpr__fmt_secs(d, h, sizeof h));
	} else {
		const char *s = utf8(k, obj);
		if (!s)
			return -1;
		gpr__table_cell(t, s);
	}
	if (colour && colour != Py_None) {
		const char *c = utf8(k, colour);
		if (!c)
			return -1;
		gpr__table_swatch(t, c);
	}
	return 0;
}

/* A ("table", caption, cols, rows) block into t (cols kept in *cols). */
static int build_table(struct keep *k, PyObject *blk, struct gpr__table *t,
		       struct gpr__col *cols, int *extra, size_t max_cols,
		       const char **caption)
{
	PyObject *cap = PySequence_GetItem(blk, 1);
	PyObject *cs = PySequence_GetItem(blk, 2);
	PyObject *rows = PySequence_GetItem(blk, 3);
	int rc = -1;
	if (!cap || !cs || !rows)
		goto done;
	*caption = cap == Py_None ? NULL : utf8(k, cap);
	if (cap != Py_None && !*caption)
		goto done;
	Py_ssize_t nc = PySequence_Size(cs);
	if (nc <= 0 || (size_t)nc > max_cols) {
		bad("a table has 1 to 64 columns");
		goto done;
	}
	for (Py_ssize_t c = 0; c < nc; c++) {
		PyObject *col = PySequence_GetItem(cs, c);
		const char *head = col ? item_str(k, col, 0) : NULL;
		const char *kind = col && head ? item_str(k, col, 1) : NULL;
		Py_XDECREF(col);
		if (!kind)
			goto done;
		cols[c].head = head;
		cols[c].kind = col_kind(kind, &extra[c]);
		if (extra[c] < 0) {
			bad("a column's kind is text, prose, num, bytes, "
			    "share or secs");
			goto done;
		}
	}
	gpr__table_init(t, cols, (size_t)nc);
	Py_ssize_t nr = PySequence_Size(rows);
	if (nr < 0)
		goto done;
	for (Py_ssize_t r = 0; r < nr; r++) {
		PyObject *row = PySequence_GetItem(rows, r);
		if (!row)
			goto done;
		Py_ssize_t n = PySequence_Size(row);
		int ok = n == nc || n == nc + 1;
		for (Py_ssize_t c = 0; ok && c < nc; c++) {
			PyObject *cell = PySequence_GetItem(row, c);
			ok = cell &&
			     !add_cell(k, t, cols[c].kind, extra[c], cell);
			Py_XDECREF(cell);
		}
		PyObject *sub =
		    ok && n == nc + 1 ? PySequence_GetItem(row, nc) : NULL;
		Py_ssize_t ns = sub ? PySequence_Size(sub) : 0;
		for (Py_ssize_t i = 0; ok && i < ns; i++) {
			const char *line = item_str(k, sub, i);
			ok = line != NULL;
			if (ok)
				gpr__table_sub(t, line);
		}
		Py_XDECREF(sub);
		Py_DECREF(row);
		if (!ok) {
			if (!PyErr_Occurred())
				bad("a row has one cell per column (and "
				    "optionally a list of lines)");
			goto done;
		}
	}
	rc = 0;
done:
	Py_XDECREF(cap);
	Py_XDECREF(cs);
	Py_XDECREF(rows);
	return rc;
}

static int render_bar(struct keep *k, struct gpr__buf *b, PyObject *blk)
{
	PyObject *cap = PySequence_GetItem(blk, 1);
	PyObject *parts = PySequence_GetItem(blk, 2);
	struct gpr__html_part *p = NULL;
	int rc = -1;
	Py_ssize_t n = parts ? PySequence_Size(parts) : -1;
	const char *caption = cap && cap != Py_None ? utf8(k, cap) : NULL;
	if (n < 0 || !cap || (cap != Py_None && !caption))
		goto done;
	p = PyMem_Calloc(n ? (size_t)n : 1, sizeof *p);
	if (!p) {
		PyErr_NoMemory();
		goto done;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *it = PySequence_GetItem(parts, i);
		PyObject *bytes = it ? PySequence_GetItem(it, 1) : NULL;
		PyObject *colour = bytes ? PySequence_GetItem(it, 2) : NULL;
		int64_t v = 0;
		int ok = colour && (p[i].label = item_str(k, it, 0)) &&
			 !gpr_py_i64(bytes, &v) &&
			 (colour == Py_None || (p[i].colour = utf8(k, colour)));
		Py_XDECREF(it);
		Py_XDECREF(bytes);
		Py_XDECREF(colour);
		if (!ok)
			goto done;
		p[i].bytes = v > 0 ? (uint64_t)v : 0; /* a bar adds up */
	}
	gpr__html_bar(b, caption, p, (size_t)n);
	rc = 0;
done:
	PyMem_Free(p);
	Py_XDECREF(cap);
	Py_XDECREF(parts);
	return rc;
}

static int render_notes(struct keep *k, struct gpr__buf *b, PyObject *blk,
			int html)
{
	PyObject *notes = PySequence_GetItem(blk, 1);
	Py_ssize_t n = notes ? PySequence_Size(notes) : -1;
	const char **v =
	    n >= 0 ? PyMem_Calloc(n ? (size_t)n : 1, sizeof *v) : NULL;
	int rc = -1;
	if (!v)
		goto done;
	for (Py_ssize_t i = 0; i < n; i++)
		if (!(v[i] = item_str(k, notes, i)))
			goto done;
	if (html)
		gpr__html_notes(b, v, (size_t)n);
	else
		gpr__text_notes(b, v, (size_t)n);
	rc = 0;
done:
	PyMem_Free(v);
	Py_XDECREF(notes);
	return rc;
}

static int render_block(struct keep *k, struct gpr__buf *b, PyObject *blk,
			int html)
{
	const char *what = item_str(k, blk, 0);
	if (!what)
		return -1;
	if (!strcmp(what, "p") || !strcmp(what, "warn") || !strcmp(what, "h")) {
		const char *text = item_str(k, blk, 1);
		if (!text)
			return -1;
		if (!html) {
			if (!strcmp(what, "h"))
				gpr__buf_puts(b, "\n");
			gpr__text_put(b, text, 0, 0);
			gpr__buf_puts(b, "\n");
		} else if (!strcmp(what, "h")) {
			gpr__html_heading(b, text);
		} else {
			gpr__html_p(b, text, !strcmp(what, "warn"));
		}
		return 0;
	}
	if (!strcmp(what, "bar"))
		return html ? render_bar(k, b, blk) : 0;
	if (!strcmp(what, "notes"))
		return render_notes(k, b, blk, html);
	if (strcmp(what, "table"))
		return bad("a block is p, warn, h, bar, table or notes");
	struct gpr__col cols[64];
	int extra[64];
	const char *caption = NULL;
	struct gpr__table t;
	memset(&t, 0, sizeof t);
	int rc = build_table(k, blk, &t, cols, extra, 64, &caption);
	if (!rc && html) {
		gpr__html_table(b, caption, &t);
	} else if (!rc && gpr__table_rows(&t)) {
		if (caption) {
			gpr__text_put(b, caption, 0, 0);
			gpr__buf_puts(b, ":\n");
		}
		gpr__table_text(b, &t, 2);
	}
	gpr__table_free(&t);
	return rc;
}

PyObject *gpr_py_render(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *view;
	const char *form;
	if (!PyArg_ParseTuple(args, "Os:render", &view, &form))
		return NULL;
	int html = !strcmp(form, "html"), doc = !strcmp(form, "document");
	if (!html && !doc && strcmp(form, "text")) {
		PyErr_SetString(PyExc_ValueError,
				"render(): form is text, html or document");
		return NULL;
	}
	struct keep k = {PyList_New(0)};
	struct gpr__buf b = {0};
	PyObject *blocks = NULL, *out = NULL;
	const char *title = k.list ? item_str(&k, view, 0) : NULL;
	if (!title || !(blocks = PySequence_GetItem(view, 1)))
		goto done;
	if (doc)
		gpr__html_document_begin(&b, title, "gpureclaim");
	else if (html)
		gpr__html_view_begin(&b, title);
	else if (*title) {
		gpr__text_put(&b, title, 0, 0);
		gpr__buf_puts(&b, "\n");
	}
	Py_ssize_t n = PySequence_Size(blocks);
	if (n < 0)
		goto done;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *blk = PySequence_GetItem(blocks, i);
		int rc = blk ? render_block(&k, &b, blk, html || doc) : -1;
		Py_XDECREF(blk);
		if (rc)
			goto done;
	}
	if (doc)
		gpr__html_document_end(&b);
	else if (html)
		gpr__html_view_end(&b);
	char *s = gpr__buf_finish(&b);
	if (!s) {
		PyErr_NoMemory();
		goto done;
	}
	size_t len = strlen(s);
	if (!html && !doc && len && s[len - 1] == '\n')
		len--; /* a repr ends without a newline */
	out = PyUnicode_DecodeUTF8(s, (Py_ssize_t)len, "replace");
	free(s);
done:
	if (!out && !PyErr_Occurred())
		bad("a view is (title, [blocks])");
	gpr__buf_free(&b);
	Py_XDECREF(blocks);
	Py_XDECREF(k.list);
	return out;
}
