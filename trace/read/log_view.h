/*
 * The report of a trace as one view: every figure, sentence, table, bar
 * and note that `gpureclaim report` shows, built once from a log and its
 * statistics (log_view.c) and rendered as text and JSON (log_report.c) and
 * as HTML (log_report_html.c), as the core's report is built once
 * (src/report_view.c) and memray's reporters all start from one snapshot.
 * A renderer reads the view only, so the three forms never disagree.
 *
 * A table is a source of rows, not a copy of them: its columns say how
 * each cell is shown (text and HTML through the toolkit's table, JSON by
 * its member name), and `row` fills the cells of row i from the
 * statistics when a renderer asks. JSON streams every row it lists; text
 * and HTML show at most GPR_TRACE_VIEW_MAX_ROWS of a list (and say how
 * many more there are), so no --top makes the report's memory grow past
 * the statistics it is read from (docs/trace.md, the memory bound).
 */
#ifndef GPR_TRACE_LOG_VIEW_H
#define GPR_TRACE_LOG_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "../format/log_read.h"
#include "log_stats.h"
#include "out/buf.h"
#include "out/html.h"
#include "out/table.h"

/* The most rows a list shows in text and HTML; --json lists up to --top. */
#define GPR_TRACE_VIEW_MAX_ROWS 1000

/* How a column's cells are shown. */
enum gpr_trace_vkind {
	GPR_TRACE_VK_NAME,   /* s: a name, left-aligned; JSON a string */
	GPR_TRACE_VK_FIGURE, /* s: a figure made of words, right-aligned */
	GPR_TRACE_VK_COUNT,  /* u: a count */
	GPR_TRACE_VK_BYTES,  /* u: binary units, the exact bytes on hover */
	GPR_TRACE_VK_NS,     /* u: a duration in ns (gpr_trace_fmt_ns) */
	GPR_TRACE_VK_AT,     /* u: ns since tracing began, as a duration */
	GPR_TRACE_VK_DEVICE, /* i: a device ordinal, "?" for -1 */
	GPR_TRACE_VK_SHARE,  /* d: a fraction from 0 to 1 */
	GPR_TRACE_VK_INT,    /* i: an integer */
	GPR_TRACE_VK_BOOL,   /* u: 0 or 1 */
};

/* A column: its heading in text and HTML (NULL: JSON only) and its JSON
 * member (NULL: text and HTML only). */
struct gpr_trace_vcol {
	const char *head;
	const char *key;
	enum gpr_trace_vkind kind;
};

/* One cell: the member its column's kind names; buf holds words made
 * for it (s may point there). */
struct gpr_trace_vcell {
	uint64_t u;
	int64_t i;
	double d;
	const char *s;
	char buf[48];
};

#define GPR_TRACE_VCOLS 12 /* the most columns of a table */

struct gpr_trace_view;

struct gpr_trace_vtable {
	const char *key;   /* its JSON member */
	char caption[256]; /* its heading in text and HTML */
	const char *empty; /* text and HTML when it has no row, or NULL */
	char more[128];	   /* under it when text and HTML show less, or "" */
	const struct gpr_trace_vcol *cols;
	size_t n_cols;
	size_t rows;	  /* shown in text and HTML */
	size_t json_rows; /* listed in JSON */
	int full_only;	  /* left out of a brief report (the trace summary) */
	int no_colon;	  /* the text heading is a sentence of its own */
	void (*row)(const struct gpr_trace_view *v, size_t i,
		    struct gpr_trace_vcell *cells);
};

/* Which of the tables each is (gpr_trace_view.tables). */
enum {
	GPR_TRACE_VT_OPS,
	GPR_TRACE_VT_LIBS,
	GPR_TRACE_VT_DEVS,
	GPR_TRACE_VT_LIVE,
	GPR_TRACE_VT_SITES,
	GPR_TRACE_VT_N
};

#define GPR_TRACE_VIEW_NOTES 8
#define GPR_TRACE_VIEW_BAR 10 /* parts of a bar: 9 libraries, the rest */

/* A bar of the HTML view: its caption and parts (labels borrowed). */
struct gpr_trace_vbar {
	char caption[160];
	struct gpr__html_part parts[GPR_TRACE_VIEW_BAR + 1];
	size_t n;
};

struct gpr_trace_view {
	/* the log and its statistics, which the rows are read from */
	const struct gpr_trace *t;
	const struct gpr_trace_stats *s;
	int brief;

	/* the headline */
	const char *path;
	unsigned format_version;
	uint32_t pid;
	int complete;
	enum gpr_trace_cut cut;
	uint64_t cut_at, size;
	uint64_t start_realtime_ns;
	uint64_t records, errors, dropped, unmatched_frees, implied_frees;
	int saturated;	      /* a figure stopped at its limit */
	uint64_t duration_ns; /* first call's entry to last call's exit */
	uint64_t traced_ns;   /* the start of tracing to its end */
	uint64_t peak, peak_at, held_end, host_peak, host_end;
	uint64_t never_freed, never_freed_bytes, never_freed_host;
	const char *backend, *wait; /* META values, or NULL */
	const struct gpr_trace_kv *meta;
	uint32_t n_meta;
	/* "Recorded by ...": what the META lines say recorded the log */
	struct gpr__buf recorded_by;
	/* the state of the log in words, "" when closed cleanly */
	char state[160];

	struct gpr_trace_vtable tables[GPR_TRACE_VT_N];

	/* notes: sentences (the cut, failed calls, lost records ...) */
	char notes[GPR_TRACE_VIEW_NOTES][384];
	size_t n_notes;

	/* the HTML view's bars: what each library allocated and held */
	struct gpr_trace_vbar bars[2];
	size_t n_bars;
};

/*
 * Builds the view of t (read from `path`, its statistics s; both must
 * outlive the view): `top` bounds the lists of libraries (text and HTML),
 * allocations never freed and call sites; `brief` leaves the last two out
 * (the summary of `gpureclaim trace`). Free with gpr_trace_view_free.
 */
void gpr_trace_view_build(struct gpr_trace_view *v, const char *path,
			  const struct gpr_trace *t,
			  const struct gpr_trace_stats *s, int top, int brief);
void gpr_trace_view_free(struct gpr_trace_view *v);

/*
 * Table `which` of v as the toolkit's table (table.h), the columns that
 * text and HTML show and their rows; free it with gpr__table_free. The
 * cols array (at least GPR_TRACE_VCOLS) must live as long as the table.
 */
void gpr_trace_view_table(const struct gpr_trace_view *v, int which,
			  struct gpr__col *cols, struct gpr__table *out);

/*
 * A duration for people, the one form of every time the trace report
 * shows: "850 ns", "1.2 µs", then the toolkit's gpr__fmt_secs ("3.4 ms",
 * "1.25 s").
 */
char *gpr_trace_fmt_ns(uint64_t ns, char *out, size_t len);

#endif /* GPR_TRACE_LOG_VIEW_H */
