/*
 * The trace log without a GPU: writer/reader round trip, the aggregations
 * and percentiles on synthetic calls, the exports, and malformed logs
 * (every truncation, every byte flipped, hand-made hostile headers and
 * chunks) giving errors, never crashes (run under ASan in `make check`).
 *
 * `test_trace_log --sample FILE` writes the synthetic log to FILE for the
 * CLI test.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../trace/log_export.h"
#include "../../trace/log_read.h"
#include "../../trace/log_stats.h"
#include "../../trace/log_write.h"
#include "gpureclaim.h"

static int failures;
#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			failures++;                                            \
		}                                                              \
	} while (0)

#define GiB (1024ull * 1024 * 1024)
#define START 1000000000ull /* start_mono_ns of the synthetic log */

enum { S_TORCH = GPR_TRACE_N_OPS, S_CUPY, S_SITE_T, S_SITE_C };

static struct gpr_trace_rec rec(uint64_t t, uint64_t dur, uint32_t op,
				uint32_t lib, uint64_t addr, uint64_t bytes)
{
	struct gpr_trace_rec r;
	memset(&r, 0, sizeof(r));
	r.t_ns = START + t;
	r.dur_ns = dur;
	r.op = op;
	r.lib = lib;
	r.site = lib == S_TORCH	 ? S_SITE_T
		 : lib == S_CUPY ? S_SITE_C
				 : GPR_TRACE_NO_STRING;
	r.addr = addr;
	r.bytes = bytes;
	r.tid = 42;
	r.device = 0;
	r.flags = GPR_TRACE_R_WAIT;
	return r;
}

/* The synthetic run; see the expectations in test_stats. */
static size_t sample(struct gpr_trace_rec *v)
{
	size_t n = 0;
	/* the design record's scenario: 1 GiB each from torch and cupy */
	v[n++] = rec(1000, 500, 0, S_TORCH, 0x7f0000000000, GiB);
	v[n++] = rec(2000, 500, 0, S_CUPY, 0x7f0040000000, GiB);
	v[n++] = rec(3000, 300, 3, S_TORCH, 0x7f0000000000, GiB);
	v[n - 1].flags |= GPR_TRACE_R_SIZE_MAP;
	v[n++] = rec(4000, 300, 3, S_CUPY, 0x7f0040000000, GiB);
	/* VMM on device 1: create 2 MiB, map, unmap, release */
	v[n] = rec(5000, 100, 8, S_TORCH, 0, 2u << 20);
	v[n].aux = 7;
	v[n++].device = 1;
	v[n] = rec(5200, 100, 10, S_TORCH, 0x7f1000000000, 2u << 20);
	v[n].aux = 7;
	v[n++].device = 1;
	v[n] = rec(5400, 100, 11, S_TORCH, 0x7f1000000000, 2u << 20);
	v[n++].device = 1;
	v[n] = rec(5600, 100, 9, S_TORCH, 0, 2u << 20);
	v[n].aux = 7;
	v[n++].device = 1;
	/* a failed allocation, a free of unknown memory, a leak */
	v[n] = rec(6000, 100, 0, S_CUPY, 0, 1ull << 40);
	v[n++].result = 2;
	v[n++] = rec(6500, 100, 3, GPR_TRACE_NO_STRING, 0x1234000, 0);
	v[n++] = rec(7000, 100, 0, S_CUPY, 0x7f0080000000, 4096);
	/* 100 pinned-host calls of 1..100 us, a quarter of it waiting */
	for (uint64_t i = 1; i <= 100; i++) {
		v[n] = rec(10000 + i * 200000, i * 1000, 14, S_CUPY,
			   0x5000000 + i * 0x1000, 64);
		v[n++].wait_ns = i * 250;
	}
	for (uint64_t i = 1; i <= 100; i++)
		v[n++] = rec(30000000 + i * 1000, 100, 16, S_CUPY,
			     0x5000000 + i * 0x1000, 0);
	return n;
}

/* Writes v[0..n) as a closed log: strings and records in two chunks each. */
static int write_log(const char *path, const struct gpr_trace_rec *v, size_t n,
		     uint32_t dropped)
{
	struct gpr__tw w;
	unlink(path);
	int rc = gpr__tw_open(&w, path, 4242, 1700000000000000000ull, START);
	if (rc < 0)
		return rc;
	const char *strs[] = {"libtorch_cuda.so", "cupy_backends.so",
			      "libtorch_cuda.so!alloc+0x10",
			      "cupy_backends.so+0x99"};
	/* records in two chunks, strings before and between */
	rc = gpr__tw_strings(&w, strs, 2);
	if (rc == 0)
		rc = gpr__tw_strings(&w, strs + 2, 2);
	size_t split = n > 50 ? 50 : n / 2;
	if (rc == 0)
		rc = gpr__tw_records(&w, v, split);
	if (rc == 0)
		rc = gpr__tw_records(&w, v + split, n - split);
	int rc2 = gpr__tw_close(&w, START + 40000000, dropped);
	return rc ? rc : rc2;
}

static int write_sample(const char *path)
{
	struct gpr_trace_rec v[256];
	return write_log(path, v, sample(v), 3);
}

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	unsigned char *b = malloc(1 << 20);
	*len = b ? fread(b, 1, 1 << 20, f) : 0;
	fclose(f);
	return b;
}

static char tmpdir[] = "/tmp/gpr-trace-test-XXXXXX";

static void path_in_tmp(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmpdir, name);
}

static void test_round_trip(void)
{
	char path[256];
	path_in_tmp(path, sizeof(path), "rt.trace");
	CHECK(write_sample(path) == 0);
	/* O_EXCL: the writer never writes over an existing file */
	struct gpr__tw w;
	CHECK(gpr__tw_open(&w, path, 1, 0, 0) == -EEXIST);

	struct gpr_trace t;
	char err[256] = "";
	int rc = gpr__trace_load(path, &t, err, sizeof(err));
	CHECK(rc == 0);
	if (rc != 0) {
		fprintf(stderr, "load: %s\n", err);
		return;
	}
	struct gpr_trace_rec v[256];
	size_t n = sample(v);
	CHECK(t.complete);
	CHECK(t.hdr.pid == 4242);
	CHECK(t.hdr.dropped == 3);
	CHECK(t.n_recs == n);
	CHECK(t.n_strs == GPR_TRACE_N_OPS + 4);
	CHECK(strcmp(t.strs[0], "cuMemAlloc_v2") == 0);
	CHECK(strcmp(t.strs[S_CUPY], "cupy_backends.so") == 0);
	/* every written record comes back once, fields intact */
	for (size_t i = 0; i < n; i++) {
		int found = 0;
		for (size_t j = 0; j < t.n_recs; j++)
			found += memcmp(&t.recs[j], &v[i], sizeof(v[i])) == 0;
		CHECK(found == 1);
	}
	/* sorted by effect: an allocation at its exit, the rest at entry */
	for (size_t j = 1; j < t.n_recs; j++)
		CHECK(gpr__trace_key(&t, &t.recs[j - 1]) <=
		      gpr__trace_key(&t, &t.recs[j]));
	CHECK(gpr__trace_kind(&t, &t.recs[0]) == GPR_K_ALLOC);
	gpr__trace_free(&t);
}

static const struct gpr_trace_opstat *op(const struct gpr_trace_stats *s,
					 uint32_t id)
{
	for (size_t i = 0; i < s->n_ops; i++)
		if (s->ops[i].op == id)
			return &s->ops[i];
	return NULL;
}

static const struct gpr_trace_libstat *lib(const struct gpr_trace_stats *s,
					   uint32_t id)
{
	for (size_t i = 0; i < s->n_libs; i++)
		if (s->libs[i].lib == id)
			return &s->libs[i];
	return NULL;
}

static void test_stats(void)
{
	char path[256];
	path_in_tmp(path, sizeof(path), "stats.trace");
	CHECK(write_sample(path) == 0);
	struct gpr_trace t;
	char err[256];
	if (gpr__trace_load(path, &t, err, sizeof(err)) != 0) {
		CHECK(!"load");
		return;
	}
	struct gpr_trace_stats s;
	CHECK(gpr__trace_stats(&t, &s) == 0);
	CHECK(s.records == t.n_recs);
	CHECK(s.errors == 1);
	CHECK(s.unmatched_frees == 1);
	CHECK(s.dropped == 3);
	/* both 1 GiB blocks live at once: peak at the second's exit */
	CHECK(s.peak == 2 * GiB);
	CHECK(s.peak_t == START + 2500);
	CHECK(s.held_end == 4096);
	CHECK(s.host_peak == 100 * 64);
	CHECK(s.host_end == 0);
	/* never freed: the 4 KiB from cupy */
	CHECK(s.n_live == 1);
	CHECK(s.live_bytes == 4096);
	CHECK(s.n_live == 1 && s.live[0].owner == S_CUPY &&
	      s.live[0].addr == 0x7f0080000000);
	const struct gpr_trace_libstat *lt = lib(&s, S_TORCH);
	const struct gpr_trace_libstat *lc = lib(&s, S_CUPY);
	CHECK(lt && lt->alloc_bytes == GiB + (2u << 20));
	CHECK(lt && lt->freed_bytes == GiB + (2u << 20));
	CHECK(lt && lt->peak == GiB && lt->held_end == 0);
	CHECK(lc && lc->freed_bytes == GiB && lc->held_end == 4096);
	/* device 1 saw the VMM 2 MiB come and go */
	CHECK(s.n_devs == 2);
	CHECK(s.n_devs == 2 && s.devs[1].device == 1 &&
	      s.devs[1].peak == (2u << 20) && s.devs[1].held_end == 0);
	/* latency of the 100 host allocations: 1..100 us */
	const struct gpr_trace_opstat *h = op(&s, 14);
	CHECK(h != NULL);
	if (h) {
		CHECK(h->calls == 100);
		CHECK(h->p50 == 50000);
		CHECK(h->p90 == 90000);
		CHECK(h->p99 == 99000);
		CHECK(h->max == 100000);
		CHECK(h->wait_share > 0.2499 && h->wait_share < 0.2501);
		CHECK(h->tail_wait_share > 0.2499 &&
		      h->tail_wait_share < 0.2501);
	}
	const struct gpr_trace_opstat *a = op(&s, 0);
	CHECK(a && a->calls == 4 && a->errors == 1);
	CHECK(a && a->bytes == 2 * GiB + 4096);
	/* call sites by bytes: torch's and cupy's 1 GiB first */
	CHECK(s.n_sites == 2);
	gpr__trace_stats_free(&s);
	gpr__trace_free(&t);
}

static void test_percentile(void)
{
	uint64_t v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	CHECK(gpr__percentile(v, 0, 50) == 0);
	CHECK(gpr__percentile(v, 1, 99) == 1);
	CHECK(gpr__percentile(v, 10, 50) == 5);
	CHECK(gpr__percentile(v, 10, 90) == 9);
	CHECK(gpr__percentile(v, 10, 99) == 10);
	CHECK(gpr__percentile(v, 10, 100) == 10);
	CHECK(gpr__percentile(v, 10, 0) == 1);
}

static int parse_full(const unsigned char *b, size_t len, char *err, size_t el,
		      int full)
{
	struct gpr_trace t;
	int rc = gpr__trace_parse(b, len, &t, err, el);
	if (rc == 0 && !full) {
		gpr__trace_free(&t);
	} else if (rc == 0) {
		/* whatever parses must also aggregate and export */
		struct gpr_trace_stats s;
		if (gpr__trace_stats(&t, &s) == 0)
			gpr__trace_stats_free(&s);
		FILE *f = fopen("/dev/null", "w");
		if (f) {
			gpr__trace_export_chrome(&t, f);
			gpr__trace_export_svg(&t, f);
			fclose(f);
		}
		gpr__trace_free(&t);
	}
	return rc;
}

static int parse(const unsigned char *b, size_t len, char *err, size_t el)
{
	return parse_full(b, len, err, el, 1);
}

static void test_malformed(void)
{
	char path[256], err[256];
	path_in_tmp(path, sizeof(path), "bad.trace");
	CHECK(write_sample(path) == 0);
	size_t len;
	unsigned char *good = slurp(path, &len);
	CHECK(good && len > 64);
	if (!good)
		return;
	CHECK(parse(good, len, err, sizeof(err)) == 0);
	/* every truncation of a complete log is an error */
	for (size_t k = 0; k < len; k++) {
		err[0] = '\0';
		int rc = parse(good, k, err, sizeof(err));
		CHECK(rc == GPR_E_FORMAT);
		CHECK(err[0] != '\0');
	}
	/*
	 * Bytes flipped (all of the header and first chunks, then every
	 * 5th): an error or a valid parse, never a crash; every 8th valid
	 * parse also aggregates and exports.
	 */
	unsigned char *b = malloc(len);
	for (size_t k = 0; k < len; k += k < 1024 ? 1 : 5) {
		memcpy(b, good, len);
		b[k] ^= 0xff;
		parse_full(b, len, err, sizeof(err), k % 8 == 0);
		b[k] ^= 0x01;
		parse_full(b, len, err, sizeof(err), k % 8 == 4);
	}
	/* hand-made hostile values, each with its message */
	struct {
		size_t off;
		uint64_t val;
		int width;
		const char *msg;
	} cases[] = {
	    {0, 0x5850, 2, "magic"},
	    {8, 2, 2, "version 2"},
	    {10, 65535, 2, "header size"},
	    {12, 0, 2, "record size"},
	    {12, 71, 2, "record size"},
	    {20, 9, 4, "clock"},
	    {48, 12345, 8, "header counts"},
	    /* the first chunk: strings; its length, count, first id */
	    {64 + 8, 0xffffffffffffull, 8, "truncated"},
	    {64 + 4, 0xffffffff, 4, "string"},
	    {64 + 16, 5, 4, "starts at id 5"},
	    {64 + 20, 0x7fffffff, 4, "length"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(b, good, len);
		memcpy(b + cases[i].off, &cases[i].val, (size_t)cases[i].width);
		err[0] = '\0';
		CHECK(parse(b, len, err, sizeof(err)) == GPR_E_FORMAT);
		if (!strstr(err, cases[i].msg)) {
			fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, err,
				cases[i].msg);
			failures++;
		}
	}
	/* a record naming a string that does not exist */
	memcpy(b, good, len);
	size_t recs = 0;
	for (size_t off = 64; off + 16 <= len;) {
		uint64_t pl;
		memcpy(&pl, b + off + 8, 8);
		if (memcmp(b + off, "RECS", 4) == 0) {
			recs = off + 16;
			break;
		}
		off += 16 + pl;
	}
	CHECK(recs != 0);
	uint32_t bad = 999999;
	memcpy(b + recs + 52, &bad, 4);
	CHECK(parse(b, len, err, sizeof(err)) == GPR_E_FORMAT);
	CHECK(strstr(err, "operation") != NULL);
	memcpy(b, good, len);
	memcpy(b + recs + 56, &bad, 4);
	CHECK(parse(b, len, err, sizeof(err)) == GPR_E_FORMAT);
	/* a record chunk whose count does not fill its length */
	memcpy(b, good, len);
	uint32_t one = 1;
	memcpy(b + recs - 12, &one, 4);
	CHECK(parse(b, len, err, sizeof(err)) == GPR_E_FORMAT);
	CHECK(strstr(err, "records") != NULL);
	/* an unclosed log (killed program) ending on a chunk is readable */
	memcpy(b, good, len);
	b[14] = 0; /* flags: not complete */
	CHECK(parse(b, recs - 16, err, sizeof(err)) == 0);
	/* not a file at all */
	struct gpr_trace t;
	CHECK(gpr__trace_load("/nonexistent/x", &t, err, sizeof(err)) ==
	      GPR_E_IO);
	CHECK(gpr__trace_load("/tmp", &t, err, sizeof(err)) == GPR_E_IO);
	free(b);
	free(good);
}

static void test_exports(void)
{
	char path[256], out[256];
	path_in_tmp(path, sizeof(path), "exp.trace");
	CHECK(write_sample(path) == 0);
	struct gpr_trace t;
	char err[256];
	if (gpr__trace_load(path, &t, err, sizeof(err)) != 0) {
		CHECK(!"load");
		return;
	}
	path_in_tmp(out, sizeof(out), "exp.json");
	FILE *f = fopen(out, "w");
	CHECK(f && gpr__trace_export_chrome(&t, f) == 0);
	if (f)
		fclose(f);
	size_t len = 0;
	unsigned char *j = slurp(out, &len);
	CHECK(j && len > 100);
	if (j) {
		j[len < (1 << 20) ? len : (1 << 20) - 1] = '\0';
		CHECK(strstr((char *)j, "\"traceEvents\"") != NULL);
		CHECK(strstr((char *)j, "device bytes: libtorch_cuda.so") !=
		      NULL);
		free(j);
	}
	path_in_tmp(out, sizeof(out), "exp.svg");
	f = fopen(out, "w");
	CHECK(f && gpr__trace_export_svg(&t, f) == 0);
	if (f)
		fclose(f);
	j = slurp(out, &len);
	CHECK(j && len > 100);
	if (j) {
		j[len < (1 << 20) ? len : (1 << 20) - 1] = '\0';
		CHECK(strstr((char *)j, "<svg") != NULL);
		CHECK(strstr((char *)j, "cupy_backends.so") != NULL);
		free(j);
	}
	gpr__trace_free(&t);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--sample") == 0)
		return write_sample(argv[2]) == 0 ? 0 : 1;
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_round_trip();
	test_stats();
	test_percentile();
	test_malformed();
	test_exports();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	printf("test_trace_log: %s (%d failures)\n", failures ? "FAIL" : "ok",
	       failures);
	return failures ? 1 : 0;
}
