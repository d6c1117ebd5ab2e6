/*
 * The trace report's one view (log_view.h): the headline's figures and
 * words, the tables as row sources, the notes and the HTML view's bars,
 * all from the log and its statistics. Words about the log that may be
 * hostile (names, META values) are kept as they are: each renderer shows
 * them by its own rule (terminal-safe text, HTML escaping, JSON escaping).
 */
#include "log_view.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "out/fmt.h"

char *gpr_trace_fmt_ns(uint64_t ns, char *out, size_t len)
{
	if (ns < 1000)
		snprintf(out, len, "%" PRIu64 " ns", ns);
	else if (ns < 999950) /* 999.95 µs would print as "1000.0 µs" */
		snprintf(out, len, "%.1f \u00b5s", (double)ns / 1e3);
	else
		gpr__fmt_secs((double)ns / 1e9, out, len);
	return out;
}

static const char *str(const struct gpr_trace *t, uint32_t id)
{
	return gpr_trace_str(t, id, "[unknown]");
}

/* ------------------------------------------------------------ headline */

/* What a META value says, for the report's reader. */
static const char *backend_words(const char *v)
{
	if (!v) /* format 1.0: no META lines, and only CUPTI wrote it */
		return "CUPTI callbacks (a format 1.0 log, which names no "
		       "backend: only CUPTI wrote those)";
	if (strcmp(v, "interpose") == 0)
		return "the interposer (LD_PRELOAD)";
	if (strcmp(v, "cupti") == 0)
		return "CUPTI callbacks";
	return v;
}

static const char *wait_words(const char *v)
{
	if (!v)
		return "schedstat";
	/* the kernel's schedstat, read around a call only when the thread
	 * was switched out during it (the perf page or getrusage says so) */
	if (strcmp(v, "perf-gated") == 0 || strcmp(v, "getrusage-gated") == 0)
		return "the kernel's run-queue time (schedstat), read when the "
		       "thread was switched out during a call";
	if (strcmp(v, "none") == 0)
		return "not measured";
	return v;
}

/* "Recorded by ...; waiting time: ...", and any driver answers the
 * interposer left unwrapped or chained. */
static void recorded_by(struct gpr__buf *b, const struct gpr_trace *t)
{
	gpr__buf_puts(b, "Recorded by ");
	gpr__buf_puts(b, backend_words(gpr_trace_meta(t, "backend")));
	gpr__buf_puts(b, "; waiting time: ");
	gpr__buf_puts(b, wait_words(gpr_trace_meta(t, "wait")));
	const char *ch = gpr_trace_meta(t, "chained");
	if (ch && *ch) {
		gpr__buf_puts(b, "; through another interposer's functions "
				 "(HAMi-core's, say): ");
		gpr__buf_puts(b, ch);
	}
	const char *un = gpr_trace_meta(t, "unrecognised");
	if (un && *un) {
		gpr__buf_puts(b, "; not recorded (unknown driver answers): ");
		gpr__buf_puts(b, un);
	}
}

/* The log's state in the headline, and the note that tells the cut. */
static void state(struct gpr_trace_view *v)
{
	const struct gpr_trace *t = v->t;
	char n[64], m[64];
	if (t->cut == GPR_TRACE_CUT_CHUNK) {
		snprintf(v->state, sizeof v->state,
			 "log cut short at byte %" PRIu64
			 ": its last write did not finish",
			 t->cut_at);
		snprintf(v->notes[v->n_notes++], sizeof v->notes[0],
			 "the log is cut short: its last chunk, at byte "
			 "%" PRIu64 " of %" PRIu64
			 ", is incomplete (a full disk, a crash or kill -9, "
			 "or a log still being written); the report shows the "
			 "%s before it",
			 t->cut_at, t->size,
			 gpr__fmt_count(t->n_recs, "complete record",
					"complete records", n, sizeof n));
	} else if (t->cut == GPR_TRACE_CUT_BOUNDARY) {
		snprintf(v->state, sizeof v->state,
			 "log cut short at byte %" PRIu64
			 ": it holds less than its header counts",
			 t->cut_at);
		snprintf(
		    v->notes[v->n_notes++], sizeof v->notes[0],
		    "the log is cut short at byte %" PRIu64
		    ", on a chunk boundary: closed with %s and %" PRIu32
		    " strings, it holds %s and %" PRIu32
		    " (a copy cut off?); the report shows what is there",
		    t->cut_at,
		    gpr__fmt_count(t->hdr.record_count, "record", "records", n,
				   sizeof n),
		    t->hdr.string_count,
		    gpr__fmt_count(t->n_recs, "record", "records", m, sizeof m),
		    t->n_strs);
	} else if (!t->complete) {
		snprintf(v->state, sizeof v->state,
			 "log not closed: the program was killed or is still "
			 "running");
	}
}

/* The notes of the statistics, as sentences. */
static void notes(struct gpr_trace_view *v)
{
	const struct gpr_trace_stats *s = v->s;
	char n[64];
	size_t sz = sizeof v->notes[0];
	if (v->saturated)
		snprintf(v->notes[v->n_notes++], sz,
			 "some byte figures reached the largest value they "
			 "can hold and stopped there (the log holds sizes no "
			 "GPU has)");
	if (s->errors)
		snprintf(v->notes[v->n_notes++], sz,
			 "%s (counted in errors, no memory moved)",
			 gpr__fmt_count(s->errors, "call failed",
					"calls failed", n, sizeof n));
	if (s->unmatched_frees)
		snprintf(v->notes[v->n_notes++], sz,
			 "%s of memory allocated before tracing began",
			 gpr__fmt_count(s->unmatched_frees, "free", "frees", n,
					sizeof n));
	if (s->dropped)
		snprintf(v->notes[v->n_notes++], sz, "%s (buffers full)",
			 gpr__fmt_count(s->dropped, "record was lost",
					"records were lost", n, sizeof n));
	if (s->implied_frees)
		snprintf(v->notes[v->n_notes++], sz,
			 "%s from the log, inferred where the address or "
			 "handle was allocated again",
			 gpr__fmt_count(s->implied_frees, "free missing",
					"frees missing", n, sizeof n));
}

/* -------------------------------------------------------------- tables */

static const struct gpr_trace_vcol OPS[] = {
    {"operation", "op", GPR_TRACE_VK_NAME},
    {"calls", "calls", GPR_TRACE_VK_COUNT},
    {"errors", "errors", GPR_TRACE_VK_COUNT},
    {"bytes", "bytes", GPR_TRACE_VK_BYTES},
    {"p50", "p50_ns", GPR_TRACE_VK_NS},
    {"p90", "p90_ns", GPR_TRACE_VK_NS},
    {"p99", "p99_ns", GPR_TRACE_VK_NS},
    {"max", "max_ns", GPR_TRACE_VK_NS},
    {"waiting", NULL, GPR_TRACE_VK_FIGURE},
    {NULL, "wait_share", GPR_TRACE_VK_SHARE},
    {NULL, "tail_wait_share", GPR_TRACE_VK_SHARE}};

static void ops_row(const struct gpr_trace_view *v, size_t i,
		    struct gpr_trace_vcell *c)
{
	const struct gpr_trace_opstat *o = &v->s->ops[i];
	c[0].s = str(v->t, o->op);
	c[1].u = o->calls;
	c[2].u = o->errors;
	c[3].u = o->bytes;
	c[4].u = o->p50;
	c[5].u = o->p90;
	c[6].u = o->p99;
	c[7].u = o->max;
	/* a context made or ending is an event the driver reports, not a
	 * call: it moves no bytes and takes no time (text and HTML say "-";
	 * JSON keeps the zeros) */
	enum gpr_trace_kind k = gpr_trace_op_kind(c[0].s);
	if (k == GPR_K_CTX_CREATE || k == GPR_K_CTX_DESTROY)
		for (int j = 3; j <= 7; j++)
			c[j].s = "-";
	c[8].s = "-";
	if (o->waited_calls) {
		char a[16], b[16];
		snprintf(
		    c[8].buf, sizeof c[8].buf, "%s / %s",
		    gpr__fmt_percent(100 * o->wait_share, a, sizeof a),
		    gpr__fmt_percent(100 * o->tail_wait_share, b, sizeof b));
		c[8].s = c[8].buf;
	}
	c[9].d = o->wait_share;
	c[10].d = o->tail_wait_share;
}

static const struct gpr_trace_vcol LIBS[] = {
    {"library", "library", GPR_TRACE_VK_NAME},
    {"calls", "calls", GPR_TRACE_VK_COUNT},
    {NULL, "allocs", GPR_TRACE_VK_COUNT},
    {"allocated", "allocated_bytes", GPR_TRACE_VK_BYTES},
    {NULL, "frees", GPR_TRACE_VK_COUNT},
    {"freed", "freed_bytes", GPR_TRACE_VK_BYTES},
    {"peak held", "peak_bytes", GPR_TRACE_VK_BYTES},
    {"held at end", "held_at_end_bytes", GPR_TRACE_VK_BYTES}};

static void libs_row(const struct gpr_trace_view *v, size_t i,
		     struct gpr_trace_vcell *c)
{
	const struct gpr_trace_libstat *l = &v->s->libs[i];
	c[0].s = str(v->t, l->lib);
	c[1].u = l->calls;
	c[2].u = l->allocs;
	c[3].u = l->alloc_bytes;
	c[4].u = l->frees;
	c[5].u = l->freed_bytes;
	c[6].u = l->peak;
	c[7].u = l->held_end;
}

static const struct gpr_trace_vcol DEVS[] = {
    {"device", "device", GPR_TRACE_VK_DEVICE},
    {"calls", "calls", GPR_TRACE_VK_COUNT},
    {"allocated", "allocated_bytes", GPR_TRACE_VK_BYTES},
    {"freed", "freed_bytes", GPR_TRACE_VK_BYTES},
    {"peak", "peak_bytes", GPR_TRACE_VK_BYTES},
    {"peak at", NULL, GPR_TRACE_VK_AT},
    {"held at end", "held_at_end_bytes", GPR_TRACE_VK_BYTES}};

static void devs_row(const struct gpr_trace_view *v, size_t i,
		     struct gpr_trace_vcell *c)
{
	const struct gpr_trace_devstat *d = &v->s->devs[i];
	c[0].i = d->device;
	c[1].u = d->calls;
	c[2].u = d->alloc_bytes;
	c[3].u = d->freed_bytes;
	c[4].u = d->peak;
	c[5].u = gpr_trace_since_start(v->t, d->peak_t);
	c[6].u = d->held_end;
}

static const struct gpr_trace_vcol LIVE[] = {
    {"bytes", "bytes", GPR_TRACE_VK_BYTES},
    {"address", NULL, GPR_TRACE_VK_NAME},
    {NULL, "addr", GPR_TRACE_VK_COUNT},
    {"where", NULL, GPR_TRACE_VK_NAME},
    {NULL, "device", GPR_TRACE_VK_INT},
    {NULL, "vmm_handle", GPR_TRACE_VK_BOOL},
    {NULL, "host", GPR_TRACE_VK_BOOL},
    {"operation", "op", GPR_TRACE_VK_NAME},
    {"at", NULL, GPR_TRACE_VK_AT},
    {"library", "library", GPR_TRACE_VK_NAME}};

static void live_row(const struct gpr_trace_view *v, size_t i,
		     struct gpr_trace_vcell *c)
{
	const struct gpr_trace_live *l = &v->s->live[i];
	c[0].u = l->bytes;
	snprintf(c[1].buf, sizeof c[1].buf, "%s0x%" PRIx64,
		 l->vmm ? "handle " : "", l->addr);
	c[1].s = c[1].buf;
	c[2].u = l->addr;
	/* where the memory is: a device, or pinned host */
	if (l->host)
		snprintf(c[3].buf, sizeof c[3].buf, "host");
	else if (l->device < 0)
		snprintf(c[3].buf, sizeof c[3].buf, "dev ?");
	else
		snprintf(c[3].buf, sizeof c[3].buf, "dev %d", l->device);
	c[3].s = c[3].buf;
	c[4].i = l->device;
	c[5].u = l->vmm != 0;
	c[6].u = l->host != 0;
	c[7].s = str(v->t, l->op);
	c[8].u = gpr_trace_since_start(v->t, l->t_ns);
	c[9].s = str(v->t, l->owner);
}

static const struct gpr_trace_vcol SITES[] = {
    {"allocated", "allocated_bytes", GPR_TRACE_VK_BYTES},
    {"calls", "calls", GPR_TRACE_VK_COUNT},
    {NULL, "library", GPR_TRACE_VK_NAME},
    {"call site", "site", GPR_TRACE_VK_NAME}};

static void sites_row(const struct gpr_trace_view *v, size_t i,
		      struct gpr_trace_vcell *c)
{
	const struct gpr_trace_sitestat *x = &v->s->sites[i];
	c[0].u = x->bytes;
	c[1].u = x->calls;
	c[2].s = str(v->t, x->lib);
	c[3].s = str(v->t, x->site);
}

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/*
 * A table of `total` rows, `want` of them asked for (--top), `avail` of
 * them at hand (the statistics may list fewer allocations never freed
 * than there are): JSON lists what is asked and at hand, text and HTML at
 * most GPR_TRACE_VIEW_MAX_ROWS, saying so when that cuts the list.
 */
static void table(struct gpr_trace_vtable *x, const char *key,
		  const struct gpr_trace_vcol *cols, size_t n_cols,
		  void (*row)(const struct gpr_trace_view *, size_t,
			      struct gpr_trace_vcell *),
		  size_t total, size_t want, size_t avail)
{
	x->key = key;
	x->cols = cols;
	x->n_cols = n_cols;
	x->row = row;
	want = min_sz(want, total);
	x->json_rows = min_sz(want, avail);
	x->rows = min_sz(x->json_rows, GPR_TRACE_VIEW_MAX_ROWS);
	if (x->rows < want)
		snprintf(x->more, sizeof x->more,
			 "the first %zu of %zu shown (--json lists up to "
			 "--top)",
			 x->rows, total);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void tables(struct gpr_trace_view *v, int top)
{
	const struct gpr_trace_stats *s = v->s;
	size_t lim = top > 0 ? (size_t)top : 0;
	struct gpr_trace_vtable *x = v->tables;
	table(&x[GPR_TRACE_VT_OPS], "operations", OPS, N(OPS), ops_row,
	      s->n_ops, s->n_ops, s->n_ops);
	snprintf(x[GPR_TRACE_VT_OPS].caption, sizeof x[0].caption,
		 "By operation (latency; waiting: share of the call time "
		 "spent runnable but not running, all calls / slowest 1%%)");
	table(&x[GPR_TRACE_VT_LIBS], "libraries", LIBS, N(LIBS), libs_row,
	      s->n_libs, lim, s->n_libs);
	/* JSON lists every library, as it always has */
	x[GPR_TRACE_VT_LIBS].json_rows = s->n_libs;
	snprintf(x[GPR_TRACE_VT_LIBS].caption, sizeof x[0].caption,
		 "By library (allocated, calls: as the caller; freed, peak "
		 "and held: of the memory it allocated)");
	table(&x[GPR_TRACE_VT_DEVS], "devices", DEVS, N(DEVS), devs_row,
	      s->n_devs, s->n_devs, s->n_devs);
	snprintf(x[GPR_TRACE_VT_DEVS].caption, sizeof x[0].caption,
		 "By device");
	/* the statistics may list fewer than there are (the top ones) */
	table(&x[GPR_TRACE_VT_LIVE], "never_freed", LIVE, N(LIVE), live_row,
	      s->live_count, lim, s->n_live);
	char n[64], b[32], h[32];
	int k = snprintf(x[GPR_TRACE_VT_LIVE].caption, sizeof x[0].caption,
			 "Never freed: %s, %s of device memory",
			 gpr__fmt_count(s->live_count, "allocation",
					"allocations", n, sizeof n),
			 gpr__fmt_bytes(s->live_bytes, b, sizeof b));
	if (v->never_freed_host && k > 0 && (size_t)k < sizeof x[0].caption)
		snprintf(x[GPR_TRACE_VT_LIVE].caption + k,
			 sizeof x[0].caption - (size_t)k,
			 ", %s of pinned host memory",
			 gpr__fmt_bytes(v->never_freed_host, h, sizeof h));
	x[GPR_TRACE_VT_LIVE].full_only = 1;
	x[GPR_TRACE_VT_LIVE].no_colon = 1;
	table(&x[GPR_TRACE_VT_SITES], "call_sites", SITES, N(SITES), sites_row,
	      s->n_sites, lim, s->n_sites);
	snprintf(x[GPR_TRACE_VT_SITES].caption, sizeof x[0].caption,
		 "Top call sites (by bytes allocated)");
	x[GPR_TRACE_VT_SITES].empty = "none in the log";
	x[GPR_TRACE_VT_SITES].full_only = 1;
}

/* ---------------------------------------------------------------- bars */

#define BAR_LIBS 9 /* libraries shown by name; the rest are one part */

/*
 * The bytes each library allocated, and those it still held at the end
 * on the same scale (the rest of the first bar's total: freed), so 624
 * MiB held draws a tenth as long as 6 GiB allocated. Colours are the
 * libraries' places, as in the plot. With one library a bar of it alone
 * would say nothing: its one bar splits what it allocated into held at
 * the end and freed, and there is none when it freed all or nothing (a
 * bar of one part: the headline's "held at the end" says it).
 */
static void bars(struct gpr_trace_view *v)
{
	const struct gpr_trace_stats *s = v->s;
	uint64_t alloc = 0, held = 0, other_a = 0, other_h = 0;
	size_t libs = 0, one = 0;
	for (size_t i = 0; i < s->n_libs; i++) {
		gpr_trace_usum(&alloc, s->libs[i].alloc_bytes);
		gpr_trace_usum(&held, s->libs[i].held_end);
		if (s->libs[i].alloc_bytes) {
			libs++;
			one = i;
		}
	}
	if (!alloc)
		return;
	char a[32], f[32];
	uint64_t freed = held < alloc ? alloc - held : 0;
	if (libs == 1) {
		if (!held || !freed)
			return;
		struct gpr_trace_vbar *b = &v->bars[v->n_bars++];
		snprintf(b->caption, sizeof b->caption,
			 "Allocated by %.64s: what it held at the end and "
			 "what it freed",
			 str(v->t, s->libs[one].lib));
		b->parts[b->n++] =
		    (struct gpr__html_part){"held at the end", held, "@mine"};
		b->parts[b->n++] =
		    (struct gpr__html_part){"freed", freed, "@free"};
		return;
	}
	struct gpr_trace_vbar *ba = &v->bars[v->n_bars++];
	snprintf(ba->caption, sizeof ba->caption, "Allocated, by library (%s):",
		 gpr__fmt_bytes(alloc, a, sizeof a));
	struct gpr_trace_vbar *bh = &v->bars[v->n_bars++];
	snprintf(bh->caption, sizeof bh->caption,
		 "Held at the end, by library, on the same scale (%s freed):",
		 gpr__fmt_bytes(freed, f, sizeof f));
	for (size_t i = 0; i < s->n_libs; i++) {
		const struct gpr_trace_libstat *l = &s->libs[i];
		if (i < BAR_LIBS) {
			const char *lab = str(v->t, l->lib);
			const char *col = gpr__html_palette(i);
			ba->parts[ba->n++] =
			    (struct gpr__html_part){lab, l->alloc_bytes, col};
			bh->parts[bh->n++] =
			    (struct gpr__html_part){lab, l->held_end, col};
		} else {
			gpr_trace_usum(&other_a, l->alloc_bytes);
			gpr_trace_usum(&other_h, l->held_end);
		}
	}
	if (other_a)
		ba->parts[ba->n++] = (struct gpr__html_part){
		    "other libraries", other_a, "#bab0ac"};
	if (other_h)
		bh->parts[bh->n++] = (struct gpr__html_part){
		    "other libraries", other_h, "#bab0ac"};
	bh->parts[bh->n++] = (struct gpr__html_part){"freed", freed, "@free"};
}

/* ---------------------------------------------------------------- view */

void gpr_trace_view_build(struct gpr_trace_view *v, const char *path,
			  const struct gpr_trace *t,
			  const struct gpr_trace_stats *s, int top, int brief)
{
	memset(v, 0, sizeof(*v));
	v->t = t;
	v->s = s;
	v->brief = brief;
	v->path = path;
	v->format_version = t->hdr.version;
	v->pid = t->hdr.pid;
	v->complete = t->complete;
	v->cut = t->cut;
	v->cut_at = t->cut_at;
	v->size = t->size;
	v->start_realtime_ns = t->hdr.start_realtime_ns;
	v->records = s->records;
	v->errors = s->errors;
	v->dropped = s->dropped;
	v->unmatched_frees = s->unmatched_frees;
	v->implied_frees = s->implied_frees;
	v->duration_ns = s->t1 > s->t0 ? s->t1 - s->t0 : 0;
	v->traced_ns = gpr_trace_traced_ns(t, s);
	v->peak = s->peak;
	v->peak_at = gpr_trace_since_start(t, s->peak_t);
	v->held_end = s->held_end;
	v->host_peak = s->host_peak;
	v->host_end = s->host_end;
	v->never_freed = s->live_count;
	v->never_freed_bytes = s->live_bytes;
	v->never_freed_host = s->live_host_bytes;
	v->saturated = s->saturated;
	v->backend = gpr_trace_meta(t, "backend");
	v->wait = gpr_trace_meta(t, "wait");
	v->meta = t->meta;
	v->n_meta = t->n_meta;
	recorded_by(&v->recorded_by, t);
	state(v);
	notes(v);
	tables(v, top);
	bars(v);
}

void gpr_trace_view_free(struct gpr_trace_view *v)
{
	gpr__buf_free(&v->recorded_by);
}

void gpr_trace_view_table(const struct gpr_trace_view *v, int which,
			  struct gpr__col *cols, struct gpr__table *out)
{
	const struct gpr_trace_vtable *x = &v->tables[which];
	size_t map[GPR_TRACE_VCOLS], n = 0;
	for (size_t c = 0; c < x->n_cols && c < GPR_TRACE_VCOLS; c++) {
		if (!x->cols[c].head)
			continue;
		enum gpr__col_kind k = GPR__COL_NUM;
		if (x->cols[c].kind == GPR_TRACE_VK_NAME ||
		    x->cols[c].kind == GPR_TRACE_VK_DEVICE)
			k = GPR__COL_TEXT;
		else if (x->cols[c].kind == GPR_TRACE_VK_BYTES)
			k = GPR__COL_BYTES;
		cols[n] = (struct gpr__col){x->cols[c].head, k};
		map[n++] = c;
	}
	gpr__table_init(out, cols, n);
	struct gpr_trace_vcell cell[GPR_TRACE_VCOLS];
	char h[48];
	for (size_t r = 0; r < x->rows; r++) {
		memset(cell, 0, sizeof cell);
		x->row(v, r, cell);
		for (size_t j = 0; j < n; j++) {
			const struct gpr_trace_vcell *c = &cell[map[j]];
			switch (x->cols[map[j]].kind) {
			case GPR_TRACE_VK_BYTES:
				if (c->s) /* no figure: words instead */
					gpr__table_cell(out, c->s);
				else
					gpr__table_bytes(out, 1, c->u);
				break;
			case GPR_TRACE_VK_COUNT:
				gpr__table_cellf(out, "%" PRIu64, c->u);
				break;
			case GPR_TRACE_VK_NS:
			case GPR_TRACE_VK_AT:
				gpr__table_cell(
				    out,
				    c->s ? c->s
					 : gpr_trace_fmt_ns(c->u, h, sizeof h));
				break;
			case GPR_TRACE_VK_DEVICE:
				if (c->i < 0)
					gpr__table_cell(out, "?");
				else
					gpr__table_cellf(out, "%" PRId64, c->i);
				break;
			case GPR_TRACE_VK_INT:
				gpr__table_cellf(out, "%" PRId64, c->i);
				break;
			case GPR_TRACE_VK_SHARE: {
				char p[16];
				gpr__table_cell(
				    out,
				    gpr__fmt_percent(100 * c->d, p, sizeof p));
				break;
			}
			case GPR_TRACE_VK_BOOL:
				gpr__table_cell(out, c->u ? "yes" : "no");
				break;
			default:
				gpr__table_cell(out, c->s ? c->s : "");
				break;
			}
		}
	}
}
