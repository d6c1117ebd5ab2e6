/* The trace report's sink (log_sink.h). */
#include "log_sink.h"

#include <errno.h>

void gpr_trace_sink_flush(struct gpr_trace_sink *k, size_t at_least)
{
	struct gpr__buf *b = k->b;
	if (!k->f || k->err || b->oom || b->len < at_least || !b->len)
		return;
	errno = 0;
	if (fwrite(b->data, 1, b->len, k->f) != b->len)
		k->err = errno ? errno : EIO;
	gpr__buf_reset(b);
}
