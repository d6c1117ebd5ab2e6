/*
 * Exports of a trace: a Chrome/Perfetto JSON timeline and an SVG plot of
 * the device bytes held over time by library.
 */
#ifndef GPR_TRACE_LOG_EXPORT_H
#define GPR_TRACE_LOG_EXPORT_H

#include <stdio.h>

#include "log_read.h"

/*
 * Writes the Chrome trace-event JSON of t to f: a slice per call (thread =
 * calling thread) and a counter track of device bytes held per library and
 * in total. 0, GPR_E_NOMEM or GPR_E_IO (write error on f).
 */
int gpr_trace_export_chrome(const struct gpr_trace *t, FILE *f);

/*
 * Writes an SVG plot of device bytes held over time: the total and the
 * libraries with the highest peaks. 0, GPR_E_NOMEM or GPR_E_IO.
 */
int gpr_trace_export_svg(const struct gpr_trace *t, FILE *f);

#endif /* GPR_TRACE_LOG_EXPORT_H */
