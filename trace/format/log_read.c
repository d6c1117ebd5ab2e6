/*
 * The trace log's decoder. The log is read twice in order through a fixed
 * window (pread for a file): the first pass checks the structure and counts
 * the records, strings and string bytes, the second copies them into arrays
 * of exactly that size, checking everything again (a file may change
 * between the passes). So what a log costs in memory is its records (72
 * bytes each), its strings (their bytes, a NUL, a 4-byte offset and a
 * 1-byte kind each; empty strings share one NUL) and the window, never a
 * copy of the file; the records are then put in order through 16-byte sort
 * keys. docs/trace.md states the bound. META chunks (what recorded the
 * log, log_meta.c) are checked in the first pass and kept in the second;
 * one is at most a window long. A log cut short (a full disk, kill -9, a
 * copy cut off) is read up to its cut, every complete record included, so
 * what was written before the cut is never lost to it.
 */
#include "log_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpureclaim.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the log is little-endian and read as laid out in memory");
/* String offsets are 32-bit: the most string bytes a log can hold fit. */
_Static_assert((uint64_t)GPR_TRACE_MAX_STRINGS *(GPR_TRACE_MAX_STRING + 1) <
		   UINT32_MAX,
	       "string offsets fit in 32 bits");

#define WINDOW (1u << 20) /* bytes read at a time from a file */

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static uint32_t rd32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t rd64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* The log's bytes: all in memory, or a file read through a window. */
struct src {
	const unsigned char *mem; /* the whole log, or NULL for a file */
	int fd;
	uint64_t len;	    /* bytes in the log */
	unsigned char *buf; /* the window: bytes at..at+have of the file */
	uint64_t at;
	size_t have;
	int err; /* errno of a failed read; -1: the file got shorter */
};

/*
 * The n bytes at offset off (off + n <= len, n <= WINDOW), or NULL with
 * s->err set.
 */
static const unsigned char *bytes_at(struct src *s, uint64_t off, size_t n)
{
	if (s->mem)
		return s->mem + off;
	if (off >= s->at && off + n <= s->at + s->have)
		return s->buf + (off - s->at);
	size_t want = s->len - off < WINDOW ? (size_t)(s->len - off) : WINDOW;
	size_t got = 0;
	while (got < want) {
		ssize_t k =
		    pread(s->fd, s->buf + got, want - got, (off_t)(off + got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			s->err = errno;
			s->have = 0;
			return NULL;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	s->at = off;
	s->have = got;
	if (got < n) {
		s->err = -1;
		return NULL;
	}
	return s->buf;
}

static int read_failed(const struct src *s, char *err, size_t errlen)
{
	if (s->err > 0)
		return fail(err, errlen, GPR_E_IO, "reading failed: %s",
			    strerror(s->err));
	return fail(err, errlen, GPR_E_IO,
		    "the file got shorter while being read");
}

struct counts {
	uint64_t recs;	/* records */
	uint32_t strs;	/* strings */
	uint64_t bytes; /* string bytes with their NULs (empty ones: none) */
};

/*
 * The first k records of a record chunk's payload at off (all of them, or
 * the complete ones of a cut chunk): counted into n, and copied into t
 * when `copy` (within what the first pass counted, lim).
 */
static int take_records(struct src *s, struct gpr_trace *t, int copy,
			const struct counts *lim, struct counts *n,
			uint64_t off, uint32_t k, char *err, size_t errlen)
{
	size_t rs = t->hdr.record_size;
	if (k > (uint64_t)UINT32_MAX - 1 - n->recs)
		return fail(err, errlen, GPR_E_FORMAT, "more than %u records",
			    UINT32_MAX - 1);
	if (copy && k > lim->recs - n->recs)
		return fail(err, errlen, GPR_E_IO,
			    "the file changed while being read");
	for (uint32_t i = 0; copy && i < k; i++) {
		const unsigned char *p = bytes_at(s, off + (uint64_t)i * rs,
						  sizeof(struct gpr_trace_rec));
		if (!p)
			return read_failed(s, err, errlen);
		memcpy(&t->recs[n->recs + i], p, sizeof(struct gpr_trace_rec));
	}
	n->recs += k;
	return 0;
}

/*
 * One pass over the chunks. Counts into *c; when `copy`, also copies into
 * t, whose arrays were sized by a first pass: `lim`. A chunk cut short
 * (its header, or its payload past the end) ends the walk: *cut_at is its
 * offset (0: none), and the complete records of a cut record chunk count.
 * Everything a chunk's header says is checked before the cut is, so a
 * chunk that could not have been written is corrupt, not cut.
 */
static int walk(struct src *s, struct gpr_trace *t, int copy,
		const struct counts *lim, struct counts *c, uint64_t *cut_at,
		char *err, size_t errlen)
{
	size_t rs = t->hdr.record_size;
	uint64_t len = s->len;
	uint64_t off = t->hdr.header_size;
	struct counts n = {0, 0, 1}; /* byte 0: the NUL of every "" */
	uint32_t meta_lines = 0;
	*cut_at = 0;
	while (off < len) {
		if (len - off < GPR_TRACE_CHUNK_HEADER_SIZE) {
			*cut_at = off; /* inside a chunk header */
			break;
		}
		const unsigned char *ch =
		    bytes_at(s, off, GPR_TRACE_CHUNK_HEADER_SIZE);
		if (!ch)
			return read_failed(s, err, errlen);
		char tag[4];
		memcpy(tag, ch, 4);
		uint32_t count = rd32(ch + 4);
		uint64_t plen = rd64(ch + 8);
		uint64_t at = off;
		off += GPR_TRACE_CHUNK_HEADER_SIZE;
		int recs = memcmp(tag, "RECS", 4) == 0;
		int strs = memcmp(tag, "STRS", 4) == 0;
		int meta = memcmp(tag, "META", 4) == 0;
		if (recs && (plen % rs != 0 || plen / rs != count))
			return fail(err, errlen, GPR_E_FORMAT,
				    "corrupt: record chunk at offset %llu: %u "
				    "records of %zu bytes do not fill %llu "
				    "bytes",
				    (unsigned long long)at, count, rs,
				    (unsigned long long)plen);
		if (strs && plen < 4)
			return fail(err, errlen, GPR_E_FORMAT,
				    "corrupt: string chunk at offset %llu is "
				    "too short",
				    (unsigned long long)at);
		if (meta && plen > WINDOW)
			return fail(err, errlen, GPR_E_FORMAT,
				    "corrupt: META chunk at offset %llu is "
				    "%llu bytes, more than %u",
				    (unsigned long long)at,
				    (unsigned long long)plen, WINDOW);
		uint64_t have = len - off;
		/* past the end, so no string of it can be checked: its
		   length, at least, must be one a writer could write */
		if (strs && plen > have &&
		    plen > 4 + (uint64_t)count * (4 + GPR_TRACE_MAX_STRING))
			return fail(err, errlen, GPR_E_FORMAT,
				    "corrupt: string chunk at offset %llu says "
				    "%llu bytes, more than its %u strings can "
				    "hold",
				    (unsigned long long)at,
				    (unsigned long long)plen, count);
		if (plen > have) {
			/* cut inside this chunk: its complete records count */
			*cut_at = at;
			if (!recs)
				break;
			int rc =
			    take_records(s, t, copy, lim, &n, off,
					 (uint32_t)(have / rs), err, errlen);
			if (rc < 0)
				return rc;
			break;
		}
		if (recs) {
			int rc = take_records(s, t, copy, lim, &n, off, count,
					      err, errlen);
			if (rc < 0)
				return rc;
		} else if (strs) {
			const unsigned char *p = bytes_at(s, off, 4);
			if (!p)
				return read_failed(s, err, errlen);
			uint32_t first = rd32(p);
			if (first != n.strs)
				return fail(err, errlen, GPR_E_FORMAT,
					    "corrupt: string chunk at offset "
					    "%llu starts at id %u, expected %u",
					    (unsigned long long)at, first,
					    n.strs);
			if (count > GPR_TRACE_MAX_STRINGS - n.strs)
				return fail(err, errlen, GPR_E_FORMAT,
					    "corrupt: more than %u strings",
					    GPR_TRACE_MAX_STRINGS);
			uint64_t q = 4;
			for (uint32_t i = 0; i < count; i++) {
				if (plen - q < 4)
					return fail(err, errlen, GPR_E_FORMAT,
						    "corrupt: string %u runs "
						    "past its chunk",
						    n.strs + i);
				p = bytes_at(s, off + q, 4);
				if (!p)
					return read_failed(s, err, errlen);
				uint32_t sl = rd32(p);
				q += 4;
				if (sl > GPR_TRACE_MAX_STRING || sl > plen - q)
					return fail(err, errlen, GPR_E_FORMAT,
						    "corrupt: string %u has "
						    "length %u",
						    n.strs + i, sl);
				uint32_t id = n.strs + i;
				uint64_t need = sl ? sl + 1 : 0;
				if (copy && (id >= lim->strs ||
					     need > lim->bytes - n.bytes))
					return fail(err, errlen, GPR_E_IO,
						    "the file changed while "
						    "being read");
				if (copy && sl == 0)
					t->str_off[id] = 0;
				if (copy && sl > 0) {
					p = bytes_at(s, off + q, sl);
					if (!p)
						return read_failed(s, err,
								   errlen);
					char *d = t->str_data + n.bytes;
					memcpy(d, p, sl);
					for (uint32_t j = 0; j < sl; j++)
						if (d[j] == '\0')
							d[j] = '?';
					d[sl] = '\0';
					t->str_off[id] = (uint32_t)n.bytes;
				}
				if (copy)
					t->n_strs = id + 1;
				n.bytes += need;
				q += sl;
			}
			if (q != plen)
				return fail(err, errlen, GPR_E_FORMAT,
					    "corrupt: string chunk at offset "
					    "%llu has %llu bytes left over",
					    (unsigned long long)at,
					    (unsigned long long)(plen - q));
			n.strs += count;
		} else if (meta) {
			const unsigned char *p = bytes_at(s, off, (size_t)plen);
			if (!p && plen)
				return read_failed(s, err, errlen);
			const char *why = "";
			uint32_t line;
			int rc = gpr_trace_meta_chunk(
			    p, plen, count, &meta_lines, copy ? &t->meta : NULL,
			    &t->n_meta, &why, &line);
			if (rc == GPR_E_NOMEM)
				return fail(err, errlen, rc, "out of memory");
			if (rc < 0)
				return fail(err, errlen, rc,
					    "corrupt: META chunk at offset "
					    "%llu: %s (line %u)",
					    (unsigned long long)at, why, line);
		}
		/* Other tags: chunks of a later minor revision; skipped. */
		off += plen;
	}
	if (copy && (n.recs != lim->recs || n.strs != lim->strs))
		return fail(err, errlen, GPR_E_IO,
			    "the file changed while being read");
	*c = n;
	return 0;
}

static int check_records(struct gpr_trace *t, char *err, size_t errlen)
{
	for (size_t i = 0; i < t->n_recs; i++) {
		const struct gpr_trace_rec *r = &t->recs[i];
		if (r->op >= t->n_strs)
			return fail(err, errlen, GPR_E_FORMAT,
				    "corrupt: record %zu names operation "
				    "string %u of %u",
				    i, r->op, t->n_strs);
		if ((r->lib != GPR_TRACE_NO_STRING && r->lib >= t->n_strs) ||
		    (r->site != GPR_TRACE_NO_STRING && r->site >= t->n_strs))
			return fail(err, errlen, GPR_E_FORMAT,
				    "corrupt: record %zu names a library or "
				    "call site string beyond %u",
				    i, t->n_strs);
		if (r->device < GPR_TRACE_NO_DEVICE)
			return fail(err, errlen, GPR_E_FORMAT,
				    "corrupt: record %zu has device %d", i,
				    r->device);
		if (t->kinds[r->op] == 0xff)
			t->kinds[r->op] = (unsigned char)gpr_trace_op_kind(
			    gpr_trace_str(t, r->op, ""));
	}
	return 0;
}

/* A record's place in the sorted order: its effect time, then ties. */
struct sort_key {
	uint64_t key;
	uint32_t idx;
};

static int cmp_key(const void *a, const void *b, void *ctx)
{
	const struct sort_key *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	const struct gpr_trace *t = ctx;
	const struct gpr_trace_rec *rx = &t->recs[x->idx],
				   *ry = &t->recs[y->idx];
	if (rx->t_ns != ry->t_ns)
		return rx->t_ns < ry->t_ns ? -1 : 1;
	if (rx->tid != ry->tid)
		return rx->tid < ry->tid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sorts the records by effect time (ties: entry, thread, file order). */
static int sort_records(struct gpr_trace *t)
{
	size_t n = t->n_recs;
	if (n < 2)
		return 0;
	struct sort_key *k = malloc(n * sizeof(*k));
	if (!k)
		return -1;
	for (size_t i = 0; i < n; i++)
		k[i] = (struct sort_key){gpr_trace_key(t, &t->recs[i]),
					 (uint32_t)i};
	qsort_r(k, n, sizeof(*k), cmp_key, t);
	/* Puts record k[i].idx at i, one cycle of the permutation at a time. */
	for (size_t i = 0; i < n; i++) {
		if (k[i].idx == i)
			continue;
		struct gpr_trace_rec tmp = t->recs[i];
		size_t j = i;
		for (;;) {
			size_t from = k[j].idx;
			k[j].idx = (uint32_t)j;
			if (from == i) {
				t->recs[j] = tmp;
				break;
			}
			t->recs[j] = t->recs[from];
			j = from;
		}
	}
	free(k);
	return 0;
}

/* The magic's first n bytes (n <= 8) are there: a log, cut. */
static int magic_prefix(const unsigned char *h, size_t n)
{
	return memcmp(h, GPR_TRACE_MAGIC, n < 8 ? n : 8) == 0;
}

static int parse(struct src *s, struct gpr_trace *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	t->size = s->len;
	if (s->len < GPR_TRACE_HEADER_SIZE) {
		if (s->len == 0)
			return fail(err, errlen, GPR_E_FORMAT,
				    "an empty file, not a gpureclaim trace "
				    "(nothing was written to it)");
		const unsigned char *h = bytes_at(s, 0, (size_t)s->len);
		if (!h)
			return read_failed(s, err, errlen);
		if (magic_prefix(h, (size_t)s->len))
			return fail(err, errlen, GPR_E_FORMAT,
				    "cut inside its header: %llu of the %d "
				    "bytes are there, nothing to read",
				    (unsigned long long)s->len,
				    GPR_TRACE_HEADER_SIZE);
		return fail(err, errlen, GPR_E_FORMAT,
			    "not a gpureclaim trace: %llu bytes, shorter than "
			    "the %d-byte header",
			    (unsigned long long)s->len, GPR_TRACE_HEADER_SIZE);
	}
	const unsigned char *h = bytes_at(s, 0, GPR_TRACE_HEADER_SIZE);
	if (!h)
		return read_failed(s, err, errlen);
	memcpy(&t->hdr, h, sizeof(t->hdr));
	if (memcmp(t->hdr.magic, GPR_TRACE_MAGIC, 8) != 0)
		return fail(err, errlen, GPR_E_FORMAT,
			    "not a gpureclaim trace (no GPRTRACE magic)");
	if (t->hdr.version != GPR_TRACE_VERSION)
		return fail(err, errlen, GPR_E_FORMAT,
			    "trace format version %u is not supported (this "
			    "reader reads version %d)",
			    t->hdr.version, GPR_TRACE_VERSION);
	/* a later revision may add to the header, in whole words */
	if (t->hdr.header_size < GPR_TRACE_HEADER_SIZE ||
	    t->hdr.header_size > GPR_TRACE_MAX_HEADER ||
	    t->hdr.header_size % 8 != 0)
		return fail(err, errlen, GPR_E_FORMAT,
			    "corrupt: header size %u", t->hdr.header_size);
	if (t->hdr.header_size > s->len)
		return fail(err, errlen, GPR_E_FORMAT,
			    "cut inside its header: %llu of the %u bytes are "
			    "there, nothing to read",
			    (unsigned long long)s->len, t->hdr.header_size);
	if (t->hdr.record_size < GPR_TRACE_RECORD_SIZE ||
	    t->hdr.record_size % 8 != 0)
		return fail(err, errlen, GPR_E_FORMAT,
			    "corrupt: record size %u", t->hdr.record_size);
	if (t->hdr.clock != GPR_TRACE_CLOCK_MONOTONIC)
		return fail(err, errlen, GPR_E_FORMAT, "unknown clock %u",
			    t->hdr.clock);
	int closed = (t->hdr.flags & GPR_TRACE_F_COMPLETE) != 0;

	struct counts c, c2;
	uint64_t cut_at, cut2;
	int rc = walk(s, t, 0, NULL, &c, &cut_at, err, errlen);
	if (rc < 0)
		return rc;
	/*
	 * A closed log's header counts what it holds: fewer present is a cut
	 * (inside a chunk or at a boundary), more is corrupt.
	 */
	if (closed &&
	    (c.recs > t->hdr.record_count || c.strs > t->hdr.string_count))
		return fail(err, errlen, GPR_E_FORMAT,
			    "corrupt: header counts %llu records and %u "
			    "strings, the file holds %llu and %u",
			    (unsigned long long)t->hdr.record_count,
			    t->hdr.string_count, (unsigned long long)c.recs,
			    c.strs);
	if (cut_at) {
		t->cut = GPR_TRACE_CUT_CHUNK;
		t->cut_at = cut_at;
	} else if (closed && (c.recs != t->hdr.record_count ||
			      c.strs != t->hdr.string_count)) {
		t->cut = GPR_TRACE_CUT_BOUNDARY;
		t->cut_at = s->len;
	}
	t->complete = closed && t->cut == GPR_TRACE_CUT_NONE;
	t->recs = malloc((c.recs ? c.recs : 1) * sizeof(*t->recs));
	t->str_off = malloc((c.strs ? c.strs : 1) * sizeof(*t->str_off));
	t->kinds = malloc(c.strs ? c.strs : 1);
	t->str_data = malloc(c.bytes);
	if (!t->recs || !t->str_off || !t->kinds || !t->str_data) {
		gpr_trace_free(t);
		return fail(err, errlen, GPR_E_NOMEM,
			    "out of memory (%llu records, %llu bytes of "
			    "strings)",
			    (unsigned long long)c.recs,
			    (unsigned long long)c.bytes);
	}
	t->str_data[0] = '\0';
	memset(t->kinds, 0xff, c.strs ? c.strs : 1);
	rc = walk(s, t, 1, &c, &c2, &cut2, err, errlen);
	if (rc == 0 && cut2 != cut_at)
		rc = fail(err, errlen, GPR_E_IO,
			  "the file changed while being read");
	if (rc == 0) {
		t->n_recs = c2.recs;
		rc = check_records(t, err, errlen);
	}
	if (rc == 0 && sort_records(t) < 0)
		rc = fail(err, errlen, GPR_E_NOMEM, "out of memory");
	if (rc < 0)
		gpr_trace_free(t);
	return rc;
}

int gpr_trace_parse(const void *buf, size_t len, struct gpr_trace *t, char *err,
		    size_t errlen)
{
	struct src s = {.mem = buf, .fd = -1, .len = len};
	return parse(&s, t, err, errlen);
}

uint64_t gpr_trace_max_log_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || page <= 0)
		return UINT64_MAX;
	return (uint64_t)pages * (uint64_t)page / 2;
}

int gpr_trace_load(const char *path, struct gpr_trace *t, char *err,
		   size_t errlen)
{
	memset(t, 0, sizeof(*t));
	/*
	 * A planted FIFO must not block the open, a symbolic link is not
	 * followed, and only a regular file is read.
	 */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ELOOP)
		return fail(err, errlen, GPR_E_IO,
			    "a symbolic link (not followed)");
	if (fd < 0)
		return fail(err, errlen, GPR_E_IO, "%s", strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(err, errlen, GPR_E_IO,
			    "not a regular file (a FIFO, device or "
			    "directory)");
	}
	uint64_t max = gpr_trace_max_log_bytes();
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return fail(err, errlen, GPR_E_NOMEM,
			    "%llu MiB is larger than the %llu MiB this "
			    "machine can read (half its memory: reading needs "
			    "up to twice a log's size)",
			    (unsigned long long)(st.st_size >> 20),
			    (unsigned long long)(max >> 20));
	}
	struct src s = {.fd = fd, .len = (uint64_t)st.st_size};
	s.buf = malloc(WINDOW);
	int rc = s.buf ? parse(&s, t, err, errlen)
		       : fail(err, errlen, GPR_E_NOMEM, "out of memory");
	free(s.buf);
	close(fd);
	return rc;
}

void gpr_trace_free(struct gpr_trace *t)
{
	free(t->str_data);
	free(t->str_off);
	free(t->recs);
	free(t->kinds);
	gpr_trace_meta_free(t->meta, t->n_meta);
	memset(t, 0, sizeof(*t));
}

const char *gpr_trace_meta(const struct gpr_trace *t, const char *key)
{
	for (uint32_t i = 0; i < t->n_meta; i++)
		if (strcmp(t->meta[i].key, key) == 0)
			return t->meta[i].value;
	return NULL;
}

enum gpr_trace_kind gpr_trace_rec_kind(const struct gpr_trace *t,
				       const struct gpr_trace_rec *r)
{
	unsigned char k = t->kinds[r->op];
	return k == 0xff ? GPR_K_OTHER : (enum gpr_trace_kind)k;
}

uint64_t gpr_trace_key(const struct gpr_trace *t, const struct gpr_trace_rec *r)
{
	if (gpr_trace_kind_info(gpr_trace_rec_kind(t, r)).effect ==
	    GPR_EFFECT_EXIT)
		return r->t_ns > UINT64_MAX - r->dur_ns ? UINT64_MAX
							: r->t_ns + r->dur_ns;
	return r->t_ns;
}

const char *gpr_trace_str(const struct gpr_trace *t, uint32_t id,
			  const char *dflt)
{
	return id < t->n_strs ? t->str_data + t->str_off[id] : dflt;
}
