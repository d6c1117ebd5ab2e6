/*
 * The parts of an explanation, appended by every framework's explainer and
 * by explain.c: gpr_py_xpart and gpr_py_xnote.
 */
#include "ext.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gpr_py_xpart(struct gpr_py_xgpu *g, const char *kind, const char *source,
		 int64_t bytes, int known, const char *how, PyObject *detail)
{
	PyObject *d = Py_BuildValue("{s:s,s:s,s:L,s:O,s:s,s:O}", "kind", kind,
				    "source", source, "bytes", (long long)bytes,
				    "known", known ? Py_True : Py_False, "how",
				    how, "detail", detail ? detail : Py_None);
	int rc = d ? PyList_Append(g->parts, d) : -1;
	Py_XDECREF(d);
	if (rc == 0 && known)
		g->sum += bytes;
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
