/*
 * The parts of an explanation, appended by every framework's explainer and
 * by explain.c: gpr_py_xadd and gpr_py_xnote.
 */
#include "ext.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A str, or None for NULL (new reference). */
static PyObject *str_or_none(const char *s)
{
	return s ? PyUnicode_FromString(s) : Py_NewRef(Py_None);
}

PyObject *gpr_py_part_dict(const struct gpr_py_part *p)
{
	PyObject *advice = str_or_none(p->advice);
	PyObject *hint = str_or_none(p->hint);
	PyObject *d =
	    advice && hint
		? Py_BuildValue(
		      "{s:s,s:s,s:L,s:O,s:O,s:s,s:O,s:O,s:s,s:O}", "kind",
		      p->kind, "source", p->source, "bytes",
		      (long long)p->bytes, "known",
		      p->known ? Py_True : Py_False, "exact",
		      p->exact && p->known ? Py_True : Py_False, "evidence",
		      p->evidence ? p->evidence : "counter", "advice_key",
		      advice, "hint_key", hint, "how", p->how, "detail",
		      p->detail ? p->detail : Py_None)
		: NULL;
	Py_XDECREF(advice);
	Py_XDECREF(hint);
	return d;
}

int gpr_py_xadd(struct gpr_py_xgpu *g, const struct gpr_py_part *p)
{
	PyObject *d = gpr_py_part_dict(p);
	int rc = d ? PyList_Append(g->parts, d) : -1;
	Py_XDECREF(d);
	if (rc == 0 && p->known)
		g->sum += p->bytes;
	return rc;
}

int gpr_py_xnote(struct gpr_py_xgpu *g, const char *fmt, ...)
{
	char buf[640];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	PyObject *s =
	    PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strlen(buf), "replace");
	int rc = s ? PyList_Append(g->notes, s) : -1;
	Py_XDECREF(s);
	return rc;
}
