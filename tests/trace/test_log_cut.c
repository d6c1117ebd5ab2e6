/*
 * The prefix sweep (issue 21, item 2): the prefixes of the logs of the
 * fuzz corpus (tests/trace/corpus, the argument) is either read up to its
 * cut, with exactly the records of its complete chunks and the complete
 * records of a cut record chunk, marked cut where the log is cut, or,
 * cut inside its header, refused with a reason that says so. The
 * expected figures come from this file's own walk of the chunk headers,
 * not from the reader. A sample of the prefixes is also read from a file
 * (gpr_trace_load), computed and rendered as text and JSON, whose
 * reports say where the log was cut.
 *
 * Usage: test_log_cut CORPUS_DIR
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpureclaim.h"
#include "out/buf.h"
#include "../../trace/read/log_report.h"
#include "../../trace/read/log_stats.h"

/* One chunk as its header says. */
struct chunk {
	uint64_t off, plen;
	uint32_t count;
	int recs, strs;
};

struct log {
	const char *name;
	unsigned char *b;
	size_t len;
	unsigned hsize, rsize;
	int closed;
	struct chunk *ch;
	size_t n_ch;
};

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

/* The chunk headers of a whole log (the corpus's logs are well formed). */
static int chunks(struct log *l)
{
	uint16_t hs, rs, fl;
	memcpy(&hs, l->b + 10, 2);
	memcpy(&rs, l->b + 12, 2);
	memcpy(&fl, l->b + 14, 2);
	l->hsize = hs;
	l->rsize = rs;
	l->closed = (fl & GPR_TRACE_F_COMPLETE) != 0;
	for (uint64_t off = hs; off < l->len;) {
		if (l->len - off < GPR_TRACE_CHUNK_HEADER_SIZE)
			break;
		struct chunk c = {.off = off};
		memcpy(&c.count, l->b + off + 4, 4);
		memcpy(&c.plen, l->b + off + 8, 8);
		c.recs = memcmp(l->b + off, "RECS", 4) == 0;
		c.strs = memcmp(l->b + off, "STRS", 4) == 0;
		struct chunk *p = realloc(l->ch, (l->n_ch + 1) * sizeof(*p));
		if (!p)
			return -1;
		l->ch = p;
		l->ch[l->n_ch++] = c;
		if (c.plen > l->len - off - GPR_TRACE_CHUNK_HEADER_SIZE)
			break; /* the corpus's own cut log */
		off += GPR_TRACE_CHUNK_HEADER_SIZE + c.plen;
	}
	return 0;
}

/* What a reader must make of the first k bytes. */
struct expect {
	uint64_t recs;
	uint32_t strs;
	enum gpr_trace_cut cut;
	uint64_t cut_at;
};

static struct expect expected(const struct log *l, size_t k)
{
	struct expect e = {0};
	for (size_t i = 0; i < l->n_ch; i++) {
		const struct chunk *c = &l->ch[i];
		uint64_t end = c->off + GPR_TRACE_CHUNK_HEADER_SIZE + c->plen;
		if (k <= c->off)
			break;
		if (end > k) { /* cut inside this one */
			e.cut = GPR_TRACE_CUT_CHUNK;
			e.cut_at = c->off;
			uint64_t body = c->off + GPR_TRACE_CHUNK_HEADER_SIZE;
			if (c->recs && k > body)
				e.recs += (k - body) / l->rsize;
			return e;
		}
		if (c->recs)
			e.recs += c->count;
		if (c->strs)
			e.strs += c->count;
	}
	uint64_t hdr_recs;
	uint32_t hdr_strs;
	memcpy(&hdr_recs, l->b + 48, 8);
	memcpy(&hdr_strs, l->b + 56, 4);
	if (l->closed && (e.recs != hdr_recs || e.strs != hdr_strs)) {
		e.cut = GPR_TRACE_CUT_BOUNDARY;
		e.cut_at = k;
	}
	return e;
}

static uint64_t prefixes, cut_reads, refused;

/* The first k bytes of l, in memory: as expected(). */
static void sweep_one(const struct log *l, size_t k)
{
	struct gpr_trace t;
	char err[256] = "";
	int rc = gpr_trace_parse(l->b, k, &t, err, sizeof(err));
	prefixes++;
	if (k < l->hsize) {
		refused++;
		if (rc != GPR_E_FORMAT ||
		    !(strstr(err, "cut inside its header") ||
		      (k == 0 && strstr(err, "empty file")))) {
			fprintf(stderr, "%s: %zu bytes: rc %d, '%s'\n", l->name,
				k, rc, err);
			gpr_test_failures++;
		}
		if (rc == 0)
			gpr_trace_free(&t);
		return;
	}
	struct expect e = expected(l, k);
	if (rc != 0) {
		fprintf(stderr, "%s: %zu of %zu bytes not read: %s\n", l->name,
			k, l->len, err);
		gpr_test_failures++;
		return;
	}
	cut_reads += t.cut != GPR_TRACE_CUT_NONE;
	if (t.n_recs != e.recs || t.n_strs != e.strs || t.cut != e.cut ||
	    t.cut_at != e.cut_at || t.size != k || (t.cut && t.complete)) {
		fprintf(stderr,
			"%s: %zu bytes: %zu records, %u strings, cut %d at "
			"%llu; expected %llu, %u, cut %d at %llu\n",
			l->name, k, t.n_recs, t.n_strs, (int)t.cut,
			(unsigned long long)t.cut_at,
			(unsigned long long)e.recs, e.strs, (int)e.cut,
			(unsigned long long)e.cut_at);
		gpr_test_failures++;
	}
	gpr_trace_free(&t);
}

/*
 * The first k bytes as a file, read by gpr_trace_load, its statistics and
 * both reports: the cut is said in each, with its offset.
 */
static void report_one(const struct log *l, size_t k, const char *dir)
{
	char path[512], err[256], at[32];
	snprintf(path, sizeof(path), "%s/prefix.trace", dir);
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(l->b, 1, k, f) == k);
	if (f)
		fclose(f);
	struct gpr_trace t;
	if (gpr_trace_load(path, &t, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s: %zu bytes from a file: %s\n", l->name, k,
			err);
		gpr_test_failures++;
		return;
	}
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	struct gpr__buf text = {0}, json = {0};
	gpr_trace_report_text(&text, path, &t, &s, 10, 0);
	gpr_trace_report_json(&json, path, &t, &s, 10);
	CHECK(!text.oom && !json.oom);
	snprintf(at, sizeof(at), "byte %llu", (unsigned long long)t.cut_at);
	if (t.cut) {
		CHECK(strstr(gpr__buf_str(&text), "log cut short at ") != NULL);
		CHECK(strstr(gpr__buf_str(&text), at) != NULL);
		CHECK(strstr(gpr__buf_str(&json), "\"complete\":false") !=
		      NULL);
		char key[64];
		snprintf(key, sizeof(key), "\"cut_at_offset\":%llu",
			 (unsigned long long)t.cut_at);
		CHECK(strstr(gpr__buf_str(&json), key) != NULL);
	} else {
		CHECK(strstr(gpr__buf_str(&text), "log cut short") == NULL);
		CHECK(strstr(gpr__buf_str(&json), "\"cut_at_offset\":null") !=
		      NULL);
	}
	gpr__buf_free(&text);
	gpr__buf_free(&json);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
}

/*
 * Every prefix of a log up to 24 KiB long; of a longer one, every prefix
 * in its first and last 2 KiB, around every chunk boundary and record
 * boundary, and every 251st byte in between (a record chunk's reading
 * changes only at its records' boundaries).
 */
static int wanted(const struct log *l, size_t k)
{
	if (l->len <= 24 * 1024 || k < 2048 || l->len - k < 2048 ||
	    k % 251 == 0)
		return 1;
	for (size_t i = 0; i < l->n_ch; i++) {
		const struct chunk *c = &l->ch[i];
		uint64_t body = c->off + GPR_TRACE_CHUNK_HEADER_SIZE;
		if (k + 2 >= c->off && k <= body + 2)
			return 1;
		if (c->recs && k > body && k <= body + c->plen) {
			uint64_t r = (k - body) % l->rsize;
			if (r <= 1 || r == l->rsize - 1)
				return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_log_cut CORPUS_DIR\n");
		return 2;
	}
	char dir[] = "/tmp/gpr-log-cut-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	DIR *d = opendir(argv[1]);
	CHECK(d != NULL);
	int logs = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (!strstr(e->d_name, ".gprtrace"))
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
		struct log l = {.name = e->d_name};
		l.b = slurp(path, &l.len);
		CHECK(l.b && l.len >= GPR_TRACE_HEADER_SIZE);
		if (!l.b || l.len < GPR_TRACE_HEADER_SIZE || chunks(&l) < 0) {
			free(l.b);
			continue;
		}
		logs++;
		for (size_t k = 0; k <= l.len; k++) {
			if (!wanted(&l, k))
				continue;
			sweep_one(&l, k);
			if (k >= l.hsize && (k % 397 == 0 || k == l.len))
				report_one(&l, k, dir);
		}
		free(l.ch);
		free(l.b);
	}
	if (d)
		closedir(d);
	CHECK(logs >= 10);
	CHECK(cut_reads > 0 && refused > 0);
	printf("test_log_cut: %d logs, %llu prefixes (%llu read as cut, %llu "
	       "cut inside their header)\n",
	       logs, (unsigned long long)prefixes,
	       (unsigned long long)cut_reads, (unsigned long long)refused);
	return gpr_test_finish("test_log_cut", dir);
}
