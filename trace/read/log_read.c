/*
 * The trace log reader: two passes over the chunks, the first checks the
 * structure and counts, the second copies into arrays sized by the first.
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

/* One pass over the chunks; copies into t when `copy`. */
static int walk(const unsigned char *b, size_t len, struct gpr_trace *t,
		int copy, uint64_t *n_recs, uint32_t *n_strs, char *err,
		size_t errlen)
{
	size_t rs = t->hdr.record_size;
	size_t off = t->hdr.header_size;
	uint64_t nr = 0;
	uint32_t ns = 0;
	while (off < len) {
		if (len - off < GPR_TRACE_CHUNK_HEADER_SIZE)
			return fail(err, errlen, GPR_E_FORMAT,
				    "truncated: %zu stray bytes at offset %zu "
				    "(a chunk header needs %d)",
				    len - off, off,
				    GPR_TRACE_CHUNK_HEADER_SIZE);
		const unsigned char *ch = b + off;
		uint32_t count = rd32(ch + 4);
		uint64_t plen = rd64(ch + 8);
		size_t at = off;
		off += GPR_TRACE_CHUNK_HEADER_SIZE;
		if (plen > len - off)
			return fail(err, errlen, GPR_E_FORMAT,
				    "truncated: chunk at offset %zu says %llu "
				    "bytes, %zu remain",
				    at, (unsigned long long)plen, len - off);
		const unsigned char *p = b + off;
		if (memcmp(ch, "RECS", 4) == 0) {
			if (plen % rs != 0 || plen / rs != count)
				return fail(err, errlen, GPR_E_FORMAT,
					    "corrupt: record chunk at offset "
					    "%zu: %u records of %zu bytes do "
					    "not fill %llu bytes",
					    at, count, rs,
					    (unsigned long long)plen);
			if (copy)
				for (uint32_t i = 0; i < count; i++)
					memcpy(&t->recs[nr + i], p + i * rs,
					       sizeof(struct gpr_trace_rec));
			nr += count;
		} else if (memcmp(ch, "STRS", 4) == 0) {
			if (plen < 4)
				return fail(err, errlen, GPR_E_FORMAT,
					    "corrupt: string chunk at offset "
					    "%zu is too short",
					    at);
			uint32_t first = rd32(p);
			if (first != ns)
				return fail(err, errlen, GPR_E_FORMAT,
					    "corrupt: string chunk at offset "
					    "%zu starts at id %u, expected %u",
					    at, first, ns);
			if (count > GPR_TRACE_MAX_STRINGS - ns)
				return fail(err, errlen, GPR_E_FORMAT,
					    "corrupt: more than %u strings",
					    GPR_TRACE_MAX_STRINGS);
			uint64_t q = 4;
			for (uint32_t i = 0; i < count; i++) {
				if (plen - q < 4)
					return fail(err, errlen, GPR_E_FORMAT,
						    "corrupt: string %u runs "
						    "past its chunk",
						    ns + i);
				uint32_t sl = rd32(p + q);
				q += 4;
				if (sl > GPR_TRACE_MAX_STRING || sl > plen - q)
					return fail(err, errlen, GPR_E_FORMAT,
						    "corrupt: string %u has "
						    "length %u",
						    ns + i, sl);
				if (copy) {
					char *s = malloc(sl + 1);
					if (!s)
						return fail(err, errlen,
							    GPR_E_NOMEM,
							    "out of memory");
					memcpy(s, p + q, sl);
					for (uint32_t j = 0; j < sl; j++)
						if (s[j] == '\0')
							s[j] = '?';
					s[sl] = '\0';
					t->strs[ns + i] = s;
					t->n_strs = ns + i + 1;
				}
				q += sl;
			}
			if (q != plen)
				return fail(err, errlen, GPR_E_FORMAT,
					    "corrupt: string chunk at offset "
					    "%zu has %llu bytes left over",
					    at, (unsigned long long)(plen - q));
			ns += count;
		}
		/* Other tags: chunks of a later minor revision; skipped. */
		off += plen;
	}
	*n_recs = nr;
	*n_strs = ns;
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
			t->kinds[r->op] =
			    (unsigned char)gpr_trace_op_kind(t->strs[r->op]);
	}
	return 0;
}

static const struct gpr_trace *sort_trace;

static int cmp_rec(const void *a, const void *b)
{
	const struct gpr_trace_rec *x = a, *y = b;
	uint64_t kx = gpr_trace_key(sort_trace, x);
	uint64_t ky = gpr_trace_key(sort_trace, y);
	if (kx != ky)
		return kx < ky ? -1 : 1;
	if (x->t_ns != y->t_ns)
		return x->t_ns < y->t_ns ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return 0;
}

int gpr_trace_parse(const void *buf, size_t len, struct gpr_trace *t, char *err,
		    size_t errlen)
{
	const unsigned char *b = buf;
	memset(t, 0, sizeof(*t));
	if (len < GPR_TRACE_HEADER_SIZE)
		return fail(err, errlen, GPR_E_FORMAT,
			    "not a gpureclaim trace: %zu bytes, shorter than "
			    "the %d-byte header",
			    len, GPR_TRACE_HEADER_SIZE);
	memcpy(&t->hdr, b, sizeof(t->hdr));
	if (memcmp(t->hdr.magic, GPR_TRACE_MAGIC, 8) != 0)
		return fail(err, errlen, GPR_E_FORMAT,
			    "not a gpureclaim trace (no GPRTRACE magic)");
	if (t->hdr.version != GPR_TRACE_VERSION)
		return fail(err, errlen, GPR_E_FORMAT,
			    "trace format version %u is not supported (this "
			    "reader reads version %d)",
			    t->hdr.version, GPR_TRACE_VERSION);
	if (t->hdr.header_size < GPR_TRACE_HEADER_SIZE ||
	    t->hdr.header_size > len)
		return fail(err, errlen, GPR_E_FORMAT,
			    "corrupt: header size %u", t->hdr.header_size);
	if (t->hdr.record_size < GPR_TRACE_RECORD_SIZE ||
	    t->hdr.record_size % 8 != 0)
		return fail(err, errlen, GPR_E_FORMAT,
			    "corrupt: record size %u", t->hdr.record_size);
	if (t->hdr.clock != GPR_TRACE_CLOCK_MONOTONIC)
		return fail(err, errlen, GPR_E_FORMAT, "unknown clock %u",
			    t->hdr.clock);
	t->complete = (t->hdr.flags & GPR_TRACE_F_COMPLETE) != 0;

	uint64_t nr;
	uint32_t ns;
	int rc = walk(b, len, t, 0, &nr, &ns, err, errlen);
	if (rc < 0)
		return rc;
	if (t->complete &&
	    (nr != t->hdr.record_count || ns != t->hdr.string_count))
		return fail(err, errlen, GPR_E_FORMAT,
			    "corrupt: header counts %llu records and %u "
			    "strings, the file holds %llu and %u",
			    (unsigned long long)t->hdr.record_count,
			    t->hdr.string_count, (unsigned long long)nr, ns);
	t->recs = calloc(nr ? nr : 1, sizeof(*t->recs));
	t->strs = calloc(ns ? ns : 1, sizeof(*t->strs));
	t->kinds = malloc(ns ? ns : 1);
	if (!t->recs || !t->strs || !t->kinds) {
		gpr_trace_free(t);
		return fail(err, errlen, GPR_E_NOMEM, "out of memory");
	}
	memset(t->kinds, 0xff, ns ? ns : 1);
	rc = walk(b, len, t, 1, &nr, &ns, err, errlen);
	if (rc == 0) {
		t->n_recs = nr;
		rc = check_records(t, err, errlen);
	}
	if (rc < 0) {
		gpr_trace_free(t);
		return rc;
	}
	sort_trace = t;
	if (t->n_recs)
		qsort(t->recs, t->n_recs, sizeof(*t->recs), cmp_rec);
	sort_trace = NULL;
	return 0;
}

int gpr_trace_load(const char *path, struct gpr_trace *t, char *err,
		   size_t errlen)
{
	memset(t, 0, sizeof(*t));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(err, errlen, GPR_E_IO, "%s", strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(err, errlen, GPR_E_IO, "not a regular file");
	}
	size_t len = (size_t)st.st_size;
	unsigned char *buf = malloc(len ? len : 1);
	if (!buf) {
		close(fd);
		return fail(err, errlen, GPR_E_NOMEM, "out of memory");
	}
	size_t got = 0;
	while (got < len) {
		ssize_t k = read(fd, buf + got, len - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	int rc = gpr_trace_parse(buf, got, t, err, errlen);
	free(buf);
	return rc;
}

void gpr_trace_free(struct gpr_trace *t)
{
	if (t->strs)
		for (uint32_t i = 0; i < t->n_strs; i++)
			free(t->strs[i]);
	free(t->strs);
	free(t->recs);
	free(t->kinds);
	memset(t, 0, sizeof(*t));
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
	return id < t->n_strs ? t->strs[id] : dflt;
}
