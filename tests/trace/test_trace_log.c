/*
 * The trace log without a GPU: writer/reader round trip, the aggregations
 * and percentiles on synthetic calls, the exports, and malformed logs
 * (every truncation, every byte flipped, hand-made hostile headers and
 * chunks) giving errors, never crashes (run under ASan in `make check`),
 * and the report's renderings of hostile strings.
 *
 * `test_trace_log --rmm-sample FILE` writes the RMM export's golden log,
 * `--big FILE N` a log of N calls.
 * `test_trace_log --sample FILE` writes the synthetic log to FILE for the
 * CLI test, `--hostile FILE` the log of hostile library and site names,
 * `--cases FILE` the log of the report's edge cases.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../trace/read/log_report.h"
#include "../../trace/read/log_export.h"
#include "check.h"
#include "../../trace/format/log_read.h"
#include "../../trace/read/log_stats.h"
#include "../../trace/read/u64map.h"
#include "../../trace/format/trace_switch.h"
#include "../../trace/format/log_write.h"
#include "gpureclaim.h"
#include "out/text.h"

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
	struct gpr_trace_writer w;
	unlink(path);
	int rc = gpr_trace_writer_open(&w, path, 4242, 1700000000000000000ull,
				       START);
	if (rc < 0)
		return rc;
	const char *strs[] = {"libtorch_cuda.so", "cupy_backends.so",
			      "libtorch_cuda.so!alloc+0x10",
			      "cupy_backends.so+0x99"};
	/* records in two chunks, strings before and between */
	rc = gpr_trace_writer_strings(&w, strs, 2);
	if (rc == 0)
		rc = gpr_trace_writer_strings(&w, strs + 2, 2);
	size_t split = n > 50 ? 50 : n / 2;
	if (rc == 0)
		rc = gpr_trace_writer_records(&w, v, split);
	if (rc == 0)
		rc = gpr_trace_writer_records(&w, v + split, n - split);
	int rc2 = gpr_trace_writer_close(&w, START + 40000000, dropped);
	return rc ? rc : rc2;
}

static int write_sample(const char *path)
{
	struct gpr_trace_rec v[256];
	return write_log(path, v, sample(v), 3);
}

/*
 * The RMM export's golden log (tests/trace/golden/rmm.dev0.csv and
 * rmm.dev1.csv, written by hand from RMM's format): one of each thing the
 * export writes or leaves out. Started 2026-11-30 14:03:07 UTC.
 */
#define RMM_START_REAL 1796047387000000000ull
static int write_rmm_sample(const char *path)
{
	struct gpr_trace_rec v[16];
	size_t n = 0;
	/* the four rows of RMM's own example */
	v[n++] = rec(125800000, 11000, GPR_OP_MEM_ALLOC, S_TORCH,
		     0x7f1c2a000000, 1 << 20);
	v[n] = rec(125880000, 10000, GPR_OP_MEM_ALLOC_ASYNC, S_TORCH,
		   0x7f1c2a200000, 2 << 20);
	v[n++].aux = 0x55d3c8a0e2f0;
	v[n] = rec(126004000, 5000, GPR_OP_MEM_FREE, S_TORCH, 0x7f1c2a000000,
		   1 << 20);
	v[n++].flags |= GPR_TRACE_R_SIZE_MAP;
	v[n] = rec(126090000, 10000, GPR_OP_MEM_ALLOC, S_TORCH, 0, 80 * GiB);
	v[n++].result = 2;
	/* left out: a free of unknown memory, pinned host memory */
	v[n++] = rec(126200000, 1000, GPR_OP_MEM_FREE, S_TORCH, 0x1234000, 0);
	v[n++] = rec(126300000, 1000, GPR_OP_MEM_HOST_ALLOC, S_CUPY, 0x600000,
		     1 << 20);
	/* VMM: the handle is the pointer; the mapping is left out */
	v[n] = rec(126400000, 1000, GPR_OP_MEM_CREATE, S_TORCH, 0, 2 << 20);
	v[n++].aux = 0x77;
	v[n] = rec(126500000, 1000, GPR_OP_MEM_MAP, S_TORCH, 0x7f3000000000,
		   2 << 20);
	v[n++].aux = 0x77;
	v[n++] = rec(126600000, 1000, GPR_OP_MEM_UNMAP, S_TORCH, 0x7f3000000000,
		     2 << 20);
	v[n] = rec(126700000, 1000, GPR_OP_MEM_RELEASE, S_TORCH, 0, 2 << 20);
	v[n++].aux = 0x77;
	/* the stream-ordered free, on its stream */
	v[n] = rec(126800000, 1000, GPR_OP_MEM_FREE_ASYNC, S_TORCH,
		   0x7f1c2a200000, 2 << 20);
	v[n++].aux = 0x55d3c8a0e2f0;
	/* an address allocated again while held: its free was lost */
	v[n++] = rec(126900000, 1000, GPR_OP_MEM_ALLOC, S_TORCH, 0x7f1c2a400000,
		     4096);
	v[n++] = rec(127000000, 1000, GPR_OP_MEM_ALLOC, S_TORCH, 0x7f1c2a400000,
		     8192);
	/* NCCL's host memory through VMM: not device memory */
	v[n] = rec(127100000, 1000, GPR_OP_MEM_CREATE, S_TORCH, 0, 2 << 20);
	v[n].aux = 0x78;
	v[n].device = -1;
	v[n++].flags |= GPR_TRACE_R_HOST;
	/* another thread, GPU 1: the second file */
	v[n] = rec(127200000, 1000, GPR_OP_MEM_ALLOC, S_CUPY, 0x7f2000000000,
		   1 << 20);
	v[n].tid = 48214;
	v[n++].device = 1;
	for (size_t i = 0; i < n; i++)
		if (v[i].tid == 42)
			v[i].tid = 48213;
	struct gpr_trace_writer w;
	unlink(path);
	int rc = gpr_trace_writer_open(&w, path, 4243, RMM_START_REAL, START);
	if (rc < 0)
		return rc;
	const char *strs[] = {"libtorch_cuda.so", "cupy_backends.so",
			      "libtorch_cuda.so!alloc+0x10",
			      "cupy_backends.so+0x99"};
	rc = gpr_trace_writer_strings(&w, strs, 4);
	if (rc == 0)
		rc = gpr_trace_writer_records(&w, v, n);
	int rc2 = gpr_trace_writer_close(&w, START + 200000000, 0);
	return rc ? rc : rc2;
}

/*
 * A large log for the report's progress line, the timeline's size warning
 * and --max-events: n calls on 4 threads from 3 libraries, allocations
 * freed 64 calls later on the same thread, one in 1000 failing; distinct
 * times, a microsecond apart.
 */
static int write_big(const char *path, size_t n)
{
	struct gpr_trace_rec *v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return -1;
	uint64_t live[4][64] = {{0}};
	for (size_t i = 0; i < n; i++) {
		unsigned th = (unsigned)(i % 4), k = (unsigned)(i / 8 % 64);
		uint32_t lib = S_TORCH + (uint32_t)(i % 3 == 2);
		uint64_t t = 1000 * (uint64_t)i, dur = 100 + (i % 97) * 10;
		if (i / 4 % 2 == 0) {
			uint64_t addr = 0x7f0000000000ull +
					((uint64_t)i << 21); /* never reused */
			v[i] = rec(t, dur, GPR_OP_MEM_ALLOC, lib, addr,
				   (1u << 20) + (i % 7) * 4096);
			if (i % 1000 == 0) {
				v[i].result = 2;
				v[i].addr = 0;
			} else {
				live[th][k] = addr;
			}
		} else {
			uint64_t addr = live[th][k];
			live[th][k] = 0;
			v[i] = rec(t, dur, GPR_OP_MEM_FREE, lib, addr, 0);
		}
		v[i].tid = 100 + th;
	}
	int rc = write_log(path, v, n, 0);
	free(v);
	return rc;
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
	struct gpr_trace_writer w;
	CHECK(gpr_trace_writer_open(&w, path, 1, 0, 0) == -EEXIST);

	struct gpr_trace t;
	char err[256] = "";
	int rc = gpr_trace_load(path, &t, err, sizeof(err));
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
	CHECK(strcmp(gpr_trace_str(&t, 0, "?"), "cuMemAlloc_v2") == 0);
	CHECK(strcmp(gpr_trace_str(&t, S_CUPY, "?"), "cupy_backends.so") == 0);
	/* every written record comes back once, fields intact */
	for (size_t i = 0; i < n; i++) {
		int found = 0;
		for (size_t j = 0; j < t.n_recs; j++)
			found += memcmp(&t.recs[j], &v[i], sizeof(v[i])) == 0;
		CHECK(found == 1);
	}
	/* sorted by effect: an allocation at its exit, the rest at entry */
	for (size_t j = 1; j < t.n_recs; j++)
		CHECK(gpr_trace_key(&t, &t.recs[j - 1]) <=
		      gpr_trace_key(&t, &t.recs[j]));
	CHECK(gpr_trace_rec_kind(&t, &t.recs[0]) == GPR_K_ALLOC);
	gpr_trace_free(&t);
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
	if (gpr_trace_load(path, &t, err, sizeof(err)) != 0) {
		CHECK(!"load");
		return;
	}
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
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
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
}

static void test_percentile(void)
{
	uint64_t v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	CHECK(gpr_trace_percentile(v, 0, 50) == 0);
	CHECK(gpr_trace_percentile(v, 1, 99) == 1);
	CHECK(gpr_trace_percentile(v, 10, 50) == 5);
	CHECK(gpr_trace_percentile(v, 10, 90) == 9);
	CHECK(gpr_trace_percentile(v, 10, 99) == 10);
	CHECK(gpr_trace_percentile(v, 10, 100) == 10);
	CHECK(gpr_trace_percentile(v, 10, 0) == 1);
}

static int parse_full(const unsigned char *b, size_t len, char *err, size_t el,
		      int full)
{
	struct gpr_trace t;
	int rc = gpr_trace_parse(b, len, &t, err, el);
	if (rc == 0 && !full) {
		gpr_trace_free(&t);
	} else if (rc == 0) {
		/* whatever parses must also aggregate and export */
		struct gpr_trace_stats s;
		int stats = gpr_trace_stats_compute(&t, &s) == 0;
		FILE *f = fopen("/dev/null", "w");
		if (f) {
			gpr_trace_export_chrome(&t, f);
			if (stats)
				gpr_trace_export_svg(&t, &s, f);
			fclose(f);
		}
		if (stats)
			gpr_trace_stats_free(&s);
		gpr_trace_free(&t);
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
	/*
	 * A complete log cut anywhere: inside its header refused with a
	 * reason, anywhere else read (aggregated and exported) up to the cut
	 * (test_log_cut checks what each prefix of the corpus holds).
	 */
	for (size_t k = 0; k < len; k++) {
		err[0] = '\0';
		int rc = parse(good, k, err, sizeof(err));
		if (k < GPR_TRACE_HEADER_SIZE) {
			CHECK(rc == GPR_E_FORMAT);
			CHECK(err[0] != '\0');
		} else if (rc != 0) {
			fprintf(stderr, "cut at %zu: %s\n", k, err);
			gpr_test_failures++;
		}
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
	    /* fewer than the file holds (more would be a cut) */
	    {48, 1, 8, "header counts"},
	    /* the first chunk: strings; its length, count, first id */
	    {64 + 8, 0xffffffffffffull, 8, "more than its"},
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
			gpr_test_failures++;
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
	/*
	 * A string one byte over the reader's cap, inside a chunk long enough
	 * for it: refused for its length alone.
	 */
	{
		size_t sl = GPR_TRACE_MAX_STRING + 1;
		size_t n = 64 + 16 + 4 + 4 + sl;
		unsigned char *x = calloc(1, n);
		memcpy(x, good, 64);
		x[14] = 0; /* not complete: no counts to match */
		uint32_t one = 1, zero = 0, len32 = (uint32_t)sl;
		uint64_t plen = 4 + 4 + sl;
		memcpy(x + 64, "STRS", 4);
		memcpy(x + 68, &one, 4);
		memcpy(x + 72, &plen, 8);
		memcpy(x + 80, &zero, 4);
		memcpy(x + 84, &len32, 4);
		memset(x + 88, 'a', sl);
		err[0] = '\0';
		CHECK(parse(x, n, err, sizeof(err)) == GPR_E_FORMAT);
		CHECK(strstr(err, "string 0 has length 4097") != NULL);
		len32 = GPR_TRACE_MAX_STRING; /* at the cap: fine */
		memcpy(x + 84, &len32, 4);
		plen = 4 + 4 + GPR_TRACE_MAX_STRING;
		memcpy(x + 72, &plen, 8);
		CHECK(parse(x, n - 1, err, sizeof(err)) == 0);
		free(x);
	}
	/* a device below -1 (the one "unknown"): refused */
	static const int16_t devs[] = {-32768, -1000, -2, -1};
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		memcpy(b, good, len);
		memcpy(b + recs + 68, &devs[i], 2);
		err[0] = '\0';
		int rc = parse(b, len, err, sizeof(err));
		if (devs[i] == -1) {
			CHECK(rc == 0);
			continue;
		}
		CHECK(rc == GPR_E_FORMAT);
		CHECK(strstr(err, "has device") != NULL);
	}
	/* not a file at all */
	struct gpr_trace t;
	CHECK(gpr_trace_load("/nonexistent/x", &t, err, sizeof(err)) ==
	      GPR_E_IO);
	CHECK(gpr_trace_load("/tmp", &t, err, sizeof(err)) == GPR_E_IO);
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
	if (gpr_trace_load(path, &t, err, sizeof(err)) != 0) {
		CHECK(!"load");
		return;
	}
	path_in_tmp(out, sizeof(out), "exp.json");
	FILE *f = fopen(out, "w");
	CHECK(f && gpr_trace_export_chrome(&t, f) == 0);
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
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	CHECK(f && gpr_trace_export_svg(&t, &s, f) == 0);
	gpr_trace_stats_free(&s);
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
	gpr_trace_free(&t);
}

#define MiB (1024ull * 1024)

/*
 * What every consumer of the replay sees: the bytes held per owning
 * library and in total, never negative, the libraries adding up to the
 * total after every step.
 */
struct held_check {
	int64_t lib[64], dev, host, min_lib, min_dev, min_host;
	int mismatches;
};

static int held_step(void *ctx, const struct gpr_trace_step *st)
{
	struct held_check *h = ctx;
	size_t i = st->owner == GPR_TRACE_NO_STRING ? 63 : st->owner % 63;
	h->lib[i] += st->dev_delta;
	h->dev += st->dev_delta;
	h->host += st->host_delta;
	int64_t sum = 0;
	for (size_t k = 0; k < 64; k++) {
		sum += h->lib[k];
		if (h->lib[k] < h->min_lib)
			h->min_lib = h->lib[k];
	}
	h->mismatches += sum != h->dev;
	if (h->dev < h->min_dev)
		h->min_dev = h->dev;
	if (h->host < h->min_host)
		h->min_host = h->host;
	return 0;
}

static void check_held_never_negative(const struct gpr_trace *t)
{
	struct held_check h;
	memset(&h, 0, sizeof(h));
	CHECK(gpr_trace_replay(t, held_step, &h, NULL, NULL) == 0);
	CHECK(h.min_lib == 0);
	CHECK(h.min_dev == 0);
	CHECK(h.min_host == 0);
	CHECK(h.mismatches == 0);
}

/* Loads path into t; 0, or -1 (counted as a failure). */
/* The Chrome export of t, NUL-terminated (malloc'ed), or NULL. */
static char *chrome_of(const struct gpr_trace *t, const char *name)
{
	char out[256];
	path_in_tmp(out, sizeof(out), name);
	FILE *f = fopen(out, "w");
	CHECK(f && gpr_trace_export_chrome(t, f) == 0);
	if (f)
		fclose(f);
	size_t len = 0;
	unsigned char *j = slurp(out, &len);
	if (j)
		j[len < (1 << 20) ? len : (1 << 20) - 1] = '\0';
	return (char *)j;
}

/*
 * The values of counter track `name` in a Chrome export: how many, the
 * last and the smallest (the exporter writes `"bytes":N` right after).
 */
static size_t counter_values(const char *json, const char *name,
			     long long *last, long long *min)
{
	char key[300];
	snprintf(key, sizeof(key), "\"ph\":\"C\",\"name\":\"%s\"", name);
	size_t n = 0;
	*last = *min = -1;
	for (const char *p = strstr(json, key); p; p = strstr(p + 1, key)) {
		const char *b = strstr(p, "\"bytes\":");
		if (!b)
			break;
		long long v = strtoll(b + 8, NULL, 10);
		*last = v;
		if (n == 0 || v < *min)
			*min = v;
		n++;
	}
	return n;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* The device bytes one owner holds along the replay: end, least, most. */
struct owner_held {
	uint32_t owner;
	int64_t held, min, max;
};

static int owner_step(void *ctx, const struct gpr_trace_step *st)
{
	struct owner_held *o = ctx;
	if (st->owner != o->owner)
		return 0;
	o->held += st->dev_delta;
	if (o->held < o->min)
		o->min = o->held;
	if (o->held > o->max)
		o->max = o->held;
	return 0;
}

/*
 * An address (or VMM handle) allocated again while the replay still holds
 * it: its free was among the dropped records. The earlier allocation ends
 * there, against its own library and device; the new one is a plain
 * allocation of its own library.
 */
static size_t reuse_log(struct gpr_trace_rec *v)
{
	size_t n = 0;
	const uint64_t X = 0x7f0000000000, Y = 0x7f0100000000;
	/* torch 1 GiB at X on device 1; its free dropped; cupy 4 KiB at X */
	v[n] = rec(1000, 500, 0, S_TORCH, X, GiB);
	v[n++].device = 1;
	v[n++] = rec(3000, 500, 0, S_CUPY, X, 4096);
	/* the same library and size again at Y: still an allocation */
	v[n++] = rec(4000, 500, 0, S_TORCH, Y, 2 * MiB);
	v[n++] = rec(5000, 500, 0, S_TORCH, Y, 2 * MiB);
	v[n] = rec(6000, 100, 3, S_TORCH, Y, 2 * MiB);
	v[n++].flags |= GPR_TRACE_R_SIZE_MAP;
	/* VMM handle 7: torch's 4 MiB, release dropped, cupy's 2 MiB */
	v[n] = rec(7000, 100, 8, S_TORCH, 0, 4 * MiB);
	v[n].aux = 7;
	v[n++].device = 1;
	v[n] = rec(8000, 100, 8, S_CUPY, 0, 2 * MiB);
	v[n].aux = 7;
	v[n++].device = 1;
	/* pinned host: cupy's 64 B, free dropped, torch's 128 B */
	v[n++] = rec(9000, 100, 14, S_CUPY, 0x5000000, 64);
	v[n++] = rec(10000, 100, 14, S_TORCH, 0x5000000, 128);
	return n;
}

static void test_reuse_after_dropped_free(void)
{
	char path[256];
	path_in_tmp(path, sizeof(path), "reuse.trace");
	struct gpr_trace_rec v[16];
	CHECK(write_log(path, v, reuse_log(v), 4) == 0);
	struct gpr_trace t;
	if (gpr_test_load(path, &t) != 0)
		return;
	check_held_never_negative(&t);
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	CHECK(s.records == 9);
	CHECK(s.dropped == 4);
	CHECK(s.implied_frees == 4);
	CHECK(s.unmatched_frees == 0);
	CHECK(s.peak == GiB && s.peak_t == START + 1500);
	CHECK(s.held_end == 4096 + 2 * MiB);
	CHECK(s.host_peak == 128 && s.host_end == 128);
	const struct gpr_trace_libstat *lt = lib(&s, S_TORCH);
	const struct gpr_trace_libstat *lc = lib(&s, S_CUPY);
	CHECK(lt && lt->calls == 6 && lt->allocs == 5);
	CHECK(lt && lt->alloc_bytes == GiB + 8 * MiB + 128);
	CHECK(lt && lt->frees == 4 && lt->freed_bytes == GiB + 8 * MiB);
	CHECK(lt && lt->peak == GiB && lt->held_end == 0);
	CHECK(lc && lc->calls == 3 && lc->allocs == 3);
	CHECK(lc && lc->alloc_bytes == 4096 + 2 * MiB + 64);
	CHECK(lc && lc->frees == 0 && lc->freed_bytes == 0);
	CHECK(lc && lc->peak == 4096 + 2 * MiB);
	CHECK(lc && lc->held_end == 4096 + 2 * MiB);
	CHECK(s.n_devs == 2);
	if (s.n_devs == 2) {
		const struct gpr_trace_devstat *d0 = &s.devs[0],
					       *d1 = &s.devs[1];
		CHECK(d0->device == 0 && d0->calls == 6);
		CHECK(d0->alloc_bytes == 4096 + 4 * MiB);
		CHECK(d0->freed_bytes == 4 * MiB);
		CHECK(d0->peak == 4096 + 2 * MiB && d0->held_end == 4096);
		CHECK(d1->device == 1 && d1->calls == 3);
		CHECK(d1->alloc_bytes == GiB + 6 * MiB);
		CHECK(d1->freed_bytes == GiB + 4 * MiB);
		CHECK(d1->peak == GiB && d1->held_end == 2 * MiB);
	}
	/* never freed: only the allocations that took the keys last */
	CHECK(s.n_live == 3 && s.live_bytes == 4096 + 2 * MiB);
	for (size_t i = 0; i < s.n_live; i++) {
		const struct gpr_trace_live *l = &s.live[i];
		CHECK(l->owner == (l->host ? S_TORCH : S_CUPY));
		CHECK(l->bytes == (l->vmm ? 2 * MiB : l->host ? 128 : 4096));
	}
	const struct gpr_trace_opstat *a = op(&s, 0);
	CHECK(a && a->calls == 4);
	/* the reports say the figures were repaired */
	struct gpr__buf b = {0};
	gpr_trace_report_text(&b, path, &t, &s, 10, 1);
	CHECK(!b.oom &&
	      strstr(gpr__buf_str(&b),
		     "  - 4 frees missing from the log, inferred") != NULL);
	gpr__buf_reset(&b);
	gpr_trace_report_json(&b, path, &t, &s, 10);
	CHECK(!b.oom &&
	      strstr(gpr__buf_str(&b), "\"implied_frees\":4,") != NULL);
	gpr__buf_free(&b);
	gpr_trace_stats_free(&s);

	/*
	 * The replay itself, unclamped (the exports clamp what they draw at
	 * 0): torch's bytes end at 0 and never go below, cupy's end at what
	 * it still holds, never below 0 either.
	 */
	struct owner_held oh = {S_TORCH, 0, 0, 0};
	CHECK(gpr_trace_replay(&t, owner_step, &oh, NULL, NULL) == 0);
	CHECK(oh.held == 0 && oh.min == 0 && oh.max == (int64_t)GiB);
	oh = (struct owner_held){S_CUPY, 0, 0, 0};
	CHECK(gpr_trace_replay(&t, owner_step, &oh, NULL, NULL) == 0);
	CHECK(oh.held == (int64_t)(4096 + 2 * MiB) && oh.min == 0);

	char *j = chrome_of(&t, "reuse.json");
	CHECK(j != NULL);
	if (j) {
		long long last, min;
		CHECK(count_of(j, "\"ph\":\"X\"") == 9);
		CHECK(count_of(j, "\"name\":\"free not in the log\"") == 4);
		CHECK(counter_values(j, "device bytes: libtorch_cuda.so", &last,
				     &min) > 0);
		CHECK(counter_values(j, "device bytes: cupy_backends.so", &last,
				     &min) > 0);
		CHECK(counter_values(j, "device bytes: total", &last, &min) >
		      0);
		CHECK(last == (long long)(4096 + 2 * MiB));
		free(j);
	}
	gpr_trace_free(&t);
}

/* How far below the plot's x axis any point of the SVG's lines lies. */
static int svg_points_in_plot(const struct gpr_trace *t)
{
	char out[256];
	path_in_tmp(out, sizeof(out), "held.svg");
	FILE *f = fopen(out, "w");
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(t, &s) == 0);
	CHECK(f && gpr_trace_export_svg(t, &s, f) == 0);
	gpr_trace_stats_free(&s);
	if (f)
		fclose(f);
	size_t len = 0;
	unsigned char *j = slurp(out, &len);
	if (!j)
		return 0;
	j[len < (1 << 20) ? len : (1 << 20) - 1] = '\0';
	int ok = 1, lines = 0;
	for (char *p = strstr((char *)j, "points=\""); p;
	     p = strstr(p, "points=\"")) {
		p += 8;
		lines++;
		while (*p && *p != '"') {
			double x = strtod(p, &p);
			double y = *p == ',' ? strtod(p + 1, &p) : -1;
			/* the plot area: y from 40 (top) to 420 (zero) */
			ok &= x >= 90 && x <= 730 && y >= 40 && y <= 420;
			while (*p == ' ')
				p++;
		}
	}
	free(j);
	return ok && lines >= 2;
}

/*
 * The opposite case: frees of memory whose allocation records were
 * dropped (or came before tracing). Flagged as unmatched; they move no
 * bytes, whatever size the writer's map gave them.
 */
static void test_free_of_dropped_alloc(void)
{
	char path[256];
	path_in_tmp(path, sizeof(path), "unmatched.trace");
	struct gpr_trace_rec v[16];
	size_t n = 0;
	v[n++] = rec(1000, 500, 0, S_TORCH, 0x7f0000000000, GiB);
	v[n++] = rec(2000, 500, 0, S_CUPY, 0x7f0040000000, 4096);
	/* the writer's map knew the size: the alloc record was dropped */
	v[n] = rec(3000, 100, 3, S_CUPY, 0x7f0080000000, 2 * GiB);
	v[n++].flags |= GPR_TRACE_R_SIZE_MAP;
	/* never seen allocated at all */
	v[n] = rec(3500, 100, 6, S_CUPY, 0x7f00c0000000, 0);
	v[n++].flags |= GPR_TRACE_R_SIZE_NONE;
	v[n] = rec(4000, 100, 9, S_TORCH, 0, 8 * MiB);
	v[n].aux = 9;
	v[n++].flags |= GPR_TRACE_R_SIZE_MAP;
	v[n] = rec(4500, 100, 16, S_TORCH, 0x5000000, 4096);
	v[n++].flags |= GPR_TRACE_R_SIZE_MAP;
	v[n++] = rec(5000, 100, 3, S_TORCH, 0x7f0000000000, GiB);
	CHECK(write_log(path, v, n, 2) == 0);
	struct gpr_trace t;
	if (gpr_test_load(path, &t) != 0)
		return;
	check_held_never_negative(&t);
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	CHECK(s.unmatched_frees == 4);
	CHECK(s.implied_frees == 0);
	CHECK(s.peak == GiB + 4096 && s.held_end == 4096);
	CHECK(s.host_peak == 0 && s.host_end == 0);
	const struct gpr_trace_libstat *lt = lib(&s, S_TORCH);
	const struct gpr_trace_libstat *lc = lib(&s, S_CUPY);
	CHECK(lt && lt->frees == 1 && lt->freed_bytes == GiB);
	CHECK(lt && lt->held_end == 0 && lt->peak == GiB);
	CHECK(lc && lc->frees == 0 && lc->freed_bytes == 0);
	CHECK(lc && lc->held_end == 4096 && lc->peak == 4096);
	CHECK(s.n_devs == 1 && s.devs[0].freed_bytes == GiB &&
	      s.devs[0].held_end == 4096 && s.devs[0].peak == GiB + 4096);
	CHECK(s.n_live == 1 && s.live_bytes == 4096);
	gpr_trace_stats_free(&s);
	char *j = chrome_of(&t, "unmatched.json");
	CHECK(j != NULL);
	if (j) {
		long long last, min;
		CHECK(counter_values(j, "device bytes: total", &last, &min) ==
		      3);
		CHECK(last == 4096 && min == 4096);
		CHECK(counter_values(j, "device bytes: cupy_backends.so", &last,
				     &min) == 1);
		CHECK(last == 4096 && min == 4096);
		free(j);
	}
	CHECK(svg_points_in_plot(&t));
	gpr_trace_free(&t);
}

/*
 * A closed log of pid `pid`: strs (string ids from GPR_TRACE_N_OPS on),
 * then v, ending `end` ns after the start, `dropped` records lost.
 */
static int write_named(const char *path, uint32_t pid, const char *const *strs,
		       uint32_t n_strs, const struct gpr_trace_rec *v, size_t n,
		       uint64_t end, uint32_t dropped)
{
	struct gpr_trace_writer w;
	unlink(path);
	int rc =
	    gpr_trace_writer_open(&w, path, pid, 1700000000000000000ull, START);
	if (rc < 0)
		return rc;
	rc = gpr_trace_writer_strings(&w, strs, n_strs);
	if (rc == 0)
		rc = gpr_trace_writer_records(&w, v, n);
	int rc2 = gpr_trace_writer_close(&w, START + end, dropped);
	return rc ? rc : rc2;
}

/*
 * Library and site names as a hostile log may hold them: C1 controls
 * encoded in UTF-8 (U+009B is CSI, U+0085 NEL), a raw 0x9b (CSI to an 8-bit
 * terminal), ESC and DEL, overlong forms, next to text that must survive
 * (é, an emoji) and names that test the column cut and padding.
 */
enum { H_EVIL = GPR_TRACE_N_OPS, H_SITE, H_LONG, H_CAFE };
static const char *const hostile_strs[] = {
    "evil\xc2\x9b"
    "31m\x9b"
    "2J\x1b[0m\x7f caf\xc3\xa9",
    "site\xc2\x85\xc0\x9b\xe0\x82\x9b\xf0\x9f\x98\x80",
    "aaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9\xc3\xa9\xc3\xa9", /* 26 + 3 */
    "caf\xc3\xa9"};

static int write_hostile(const char *path)
{
	struct gpr_trace_rec v[3];
	/* one allocation each, never freed: every list names them */
	v[0] = rec(1000, 100, 0, H_EVIL, 0x7f0000000000, 1 << 20);
	v[0].site = H_SITE;
	v[1] = rec(2000, 100, 0, H_LONG, 0x7f0000100000, 1 << 19);
	v[1].site = H_EVIL;
	v[2] = rec(3000, 100, 0, H_CAFE, 0x7f0000200000, 1 << 18);
	v[2].site = H_LONG;
	return write_named(path, 4243, hostile_strs, 4, v, 3, 10000, 0);
}

/*
 * One of each case the report words or places with care, for the CLI
 * test: the first call 1.5 s after tracing began (every time shown counts
 * from the start of tracing), a free missing from the log (an address
 * allocated again), a failed call, a free of memory never seen allocated,
 * a pinned host allocation and a device allocation never freed, one
 * record lost, and a library whose name holds U+202E (RIGHT-TO-LEFT
 * OVERRIDE), which a terminal must not receive.
 */
enum { C_LIB = GPR_TRACE_N_OPS, C_BIDI };
static const char *const case_strs[] = {"libcase.so", "lib\xe2\x80\xaeos.evil"};

static int write_cases(const char *path)
{
	const uint64_t t0 = 1500000000; /* 1.5 s */
	struct gpr_trace_rec v[5];
	v[0] = rec(t0, 1000, GPR_OP_MEM_ALLOC, C_LIB, 0x7f0000000000, GiB);
	v[1] = rec(t0 + 10000000, 1000, GPR_OP_MEM_ALLOC, C_BIDI,
		   0x7f0000000000, GiB / 2);
	v[2] = rec(t0 + 20000000, 100, GPR_OP_MEM_ALLOC, C_LIB, 0, 1ull << 40);
	v[2].result = 2;
	v[3] = rec(t0 + 21000000, 100, GPR_OP_MEM_FREE, C_LIB, 0x1234000, 0);
	v[4] = rec(t0 + 22000000, 100, GPR_OP_MEM_HOST_ALLOC, C_LIB, 0x5000000,
		   4096);
	for (size_t i = 0; i < 5; i++)
		v[i].site = GPR_TRACE_NO_STRING; /* rec() names the sample's */
	return write_named(path, 4244, case_strs, 2, v, 5, 2000000000ull, 1);
}

/* Valid UTF-8, no control (C0, DEL, C1) but newlines: safe to print. */
static int printable(const char *s)
{
	while (*s) {
		uint32_t cp;
		size_t n = gpr__utf8_len(s, &cp);
		if (n == 0 || (cp < 0x20 && cp != '\n') ||
		    (cp >= 0x7f && cp <= 0x9f))
			return 0;
		s += n;
	}
	return 1;
}

static void test_hostile_strings(void)
{
	char path[256], err[256];
	path_in_tmp(path, sizeof(path), "hostile.trace");
	CHECK(write_hostile(path) == 0);
	struct gpr_trace t;
	if (gpr_trace_load(path, &t, err, sizeof(err)) != 0) {
		CHECK(!"load");
		return;
	}
	struct gpr_trace_stats s;
	if (gpr_trace_stats_compute(&t, &s) != 0) {
		CHECK(!"stats");
		gpr_trace_free(&t);
		return;
	}
	struct gpr__buf b = {0};
	/* the path is shown the same way */
	gpr_trace_report_text(&b, "run\x9b.trace", &t, &s, 10, 0);
	const char *x = gpr__buf_str(&b);
	CHECK(!b.oom);
	CHECK(strchr(x, '\x9b') == NULL); /* neither raw nor as C2 9B */
	CHECK(strchr(x, '\x1b') == NULL);
	CHECK(printable(x));
	CHECK(strstr(x, "Trace run?.trace:") != NULL);
	/*
	 * The library column, the never-freed owner and the call site (the
	 * last column: never padded); the library column as wide as its
	 * widest name in characters (29), never in bytes, so the calls line
	 * up whatever the names hold.
	 */
	CHECK(strstr(x, "  evil?31m?2J?[0m? caf\xc3\xa9              1 ") !=
	      NULL);
	CHECK(strstr(x, "  aaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9\xc3\xa9\xc3\xa9"
			"      1 ") != NULL);
	CHECK(strstr(x, "  caf\xc3\xa9                               1 ") !=
	      NULL);
	CHECK(strstr(x, "  evil?31m?2J?[0m? caf\xc3\xa9\n") != NULL);
	CHECK(strstr(x, "      1  site??????\xf0\x9f\x98\x80\n") != NULL);

	gpr__buf_reset(&b);
	gpr_trace_report_json(&b, "run\x9b.trace", &t, &s, 10);
	x = gpr__buf_str(&b);
	CHECK(!b.oom);
	CHECK(strchr(x, '\x9b') == NULL);
	CHECK(printable(x));
	CHECK(strstr(x, "\"file\":\"run\\ufffd.trace\"") != NULL);
	CHECK(strstr(x, "\"library\":\"evil\\u009b31m\\ufffd2J\\u001b[0m"
			"\\u007f caf\xc3\xa9\"") != NULL);
	CHECK(strstr(x, "\"site\":\"site\\u0085\\ufffd\\ufffd\\ufffd\\ufffd"
			"\\ufffd\xf0\x9f\x98\x80\"") != NULL);
	gpr__buf_free(&b);

	/* the exports: escaped JSON, ASCII-only SVG text */
	char *data = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&data, &len);
	CHECK(f && gpr_trace_export_chrome(&t, f) == 0);
	if (f)
		fclose(f);
	CHECK(data && memchr(data, 0x9b, len) == NULL && printable(data));
	CHECK(data && strstr(data, "device bytes: evil\\u009b31m") != NULL);
	free(data);
	data = NULL;
	f = open_memstream(&data, &len);
	CHECK(f && gpr_trace_export_svg(&t, &s, f) == 0);
	if (f)
		fclose(f);
	CHECK(data && memchr(data, 0x9b, len) == NULL && printable(data));
	CHECK(data && strstr(data, ">evil\?\?31m?2J?[0m? caf\?\?<") != NULL);
	free(data);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
}

/* A META chunk made by hand: tag, count, the payload as given. */
static size_t meta_chunk(unsigned char *out, uint32_t count, const char *p)
{
	uint64_t len = strlen(p);
	memcpy(out, "META", 4);
	memcpy(out + 4, &count, 4);
	memcpy(out + 8, &len, 8);
	memcpy(out + 16, p, len);
	return 16 + len;
}

/*
 * META chunks (revision 1.1): what recorded a log, read back; a key given
 * again replaces its value; malformed ones are errors with a reason; the
 * report says what recorded the log, or that it does not say.
 */
static void test_meta(void)
{
	char path[256], err[256];
	path_in_tmp(path, sizeof(path), "meta.trace");
	struct gpr_trace_writer w;
	unlink(path);
	CHECK(gpr_trace_writer_open(&w, path, 7, 1700000000000000000ull,
				    START) == 0);
	const char *first[] = {"format=1.1", "backend=cupti", "wait=none"};
	const char *later[] = {"backend=interpose", "wait=perf-gated",
			       "entry_points=cuMemAlloc_v2=1",
			       "chained=cuMemFree_v2=2",
			       "unrecognised=cuMemAlloc<b>\x1b=1"};
	CHECK(gpr_trace_writer_meta(&w, first, 3) == 0);
	struct gpr_trace_rec v[3];
	v[0] = rec(1000, 500, GPR_OP_MEM_ALLOC, GPR_TRACE_NO_STRING,
		   0x7f0000000000, GiB);
	/* NCCL's host memory through VMM: host bytes, not GPU 0's */
	v[1] =
	    rec(2000, 500, GPR_OP_MEM_CREATE, GPR_TRACE_NO_STRING, 0, 2u << 20);
	v[1].aux = 0x99;
	v[1].device = -1;
	v[1].flags |= GPR_TRACE_R_HOST;
	v[2] = rec(3000, 500, GPR_OP_MEM_RELEASE, GPR_TRACE_NO_STRING, 0,
		   2u << 20);
	v[2].aux = 0x99;
	CHECK(gpr_trace_writer_records(&w, v, 3) == 0);
	CHECK(gpr_trace_writer_meta(&w, later, 5) == 0);
	CHECK(gpr_trace_writer_close(&w, START + 10000, 0) == 0);
	struct gpr_trace t;
	CHECK(gpr_trace_load(path, &t, err, sizeof(err)) == 0);
	CHECK(t.n_meta == 6);
	CHECK(strcmp(gpr_trace_meta(&t, "backend"), "interpose") == 0);
	CHECK(strcmp(gpr_trace_meta(&t, "wait"), "perf-gated") == 0);
	CHECK(strcmp(gpr_trace_meta(&t, "format"), "1.1") == 0);
	CHECK(gpr_trace_meta(&t, "clock") == NULL);
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	CHECK(s.peak == GiB && s.host_peak == (2u << 20) && s.host_end == 0);
	struct gpr__buf b = {0};
	gpr_trace_report_text(&b, path, &t, &s, 10, 0);
	CHECK(strstr(gpr__buf_str(&b),
		     "Recorded by the interposer (LD_PRELOAD); waiting time: "
		     "the kernel's run-queue time (schedstat), read when the "
		     "thread was switched out during a call; "
		     "through another interposer's functions (HAMi-core's, "
		     "say): cuMemFree_v2=2; not recorded (unknown driver "
		     "answers): cuMemAlloc<b>?=1\n"));
	/* the HTML report says the same, escaped */
	gpr__buf_reset(&b);
	gpr_trace_report_html(&b, path, &t, &s, 10, 0);
	CHECK(strstr(gpr__buf_str(&b),
		     "<p>Recorded by the interposer (LD_PRELOAD); waiting "
		     "time: the kernel&#39;s run-queue time (schedstat), "
		     "read when the thread was switched out during a call; "
		     "through another interposer&#39;s functions "
		     "(HAMi-core&#39;s, say): cuMemFree_v2=2; not recorded "
		     "(unknown driver answers): cuMemAlloc&lt;b&gt;"));
	CHECK(!strchr(gpr__buf_str(&b), '\x1b'));
	gpr__buf_reset(&b);
	gpr_trace_report_json(&b, path, &t, &s, 10);
	CHECK(strstr(gpr__buf_str(&b), "\"backend\":\"interpose\""));
	CHECK(strstr(gpr__buf_str(&b), "\"entry_points\":\"cuMemAlloc_v2=1\""));
	gpr__buf_free(&b);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);

	/* a log without META: it does not say */
	path_in_tmp(path, sizeof(path), "nometa.trace");
	CHECK(write_sample(path) == 0);
	CHECK(gpr_trace_load(path, &t, err, sizeof(err)) == 0);
	CHECK(t.n_meta == 0 && gpr_trace_meta(&t, "backend") == NULL);
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	gpr_trace_report_text(&b, path, &t, &s, 10, 0);
	/* format 1.0: only CUPTI wrote it, and the words say so plainly */
	CHECK(strstr(gpr__buf_str(&b),
		     "Recorded by CUPTI callbacks (a format 1.0 log"));
	CHECK(!strstr(gpr__buf_str(&b), "not named"));
	gpr__buf_free(&b);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);

	/* malformed META chunks after a good log */
	size_t len;
	unsigned char *good = slurp(path, &len);
	CHECK(good != NULL);
	if (!good)
		return;
	struct {
		uint32_t count;
		const char *payload, *msg;
	} bad[] = {
	    {2, "a=1\n",
	     "META chunk at offset 15797: a line runs past its "
	     "chunk (line 2)"},
	    {1, "Backend=x\n", "not key=value (line 1)"},
	    {1, "nokey\n", "not key=value"},
	    {1, "=value\n", "not key=value"},
	    {1, "a=1\nextra", "left over"},
	    {1, "a=1", "runs past its chunk"},
	    {300, "", "more than 256 META lines"},
	};
	unsigned char *buf = malloc(len + 8192);
	for (size_t i = 0; buf && i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(buf, good, len);
		/* the header says complete with its counts: keep them */
		size_t n = meta_chunk(buf + len, bad[i].count, bad[i].payload);
		err[0] = '\0';
		CHECK(parse(buf, len + n, err, sizeof(err)) == GPR_E_FORMAT);
		if (!strstr(err, bad[i].msg)) {
			fprintf(stderr, "meta case %zu: '%s' lacks '%s'\n", i,
				err, bad[i].msg);
			gpr_test_failures++;
		}
	}
	/* a NUL in a value is read as '?'; a value of 4096 bytes is fine */
	if (buf) {
		memcpy(buf, good, len);
		char line[4200] = "k=";
		memset(line + 2, 'v', 4096);
		line[4098] = '\n';
		line[4099] = '\0';
		size_t n = meta_chunk(buf + len, 1, line);
		CHECK(gpr_trace_parse(buf, len + n, &t, err, sizeof(err)) == 0);
		CHECK(t.n_meta == 1 && strlen(gpr_trace_meta(&t, "k")) == 4096);
		gpr_trace_free(&t);
		memcpy(buf, good, len);
		n = meta_chunk(buf + len, 1, "k=a?b\n");
		buf[len + 16 + 3] = '\0';
		CHECK(gpr_trace_parse(buf, len + n, &t, err, sizeof(err)) == 0);
		CHECK(strcmp(gpr_trace_meta(&t, "k"), "a?b") == 0);
		gpr_trace_free(&t);
	}
	free(buf);
	free(good);
}

/*
 * Sizes no GPU has: two allocations of 2^63 bytes, never freed, and a
 * third of 2^62. Every byte sum stops at its limit instead of wrapping
 * to a small number, and the reports say so.
 */
static void test_saturated_sums(void)
{
	char path[256];
	path_in_tmp(path, sizeof(path), "huge.trace");
	struct gpr_trace_rec v[3];
	v[0] = rec(1000, 100, 0, S_TORCH, 0x7f0000000000, 1ull << 63);
	v[1] = rec(2000, 100, 0, S_TORCH, 0x7f1000000000, 1ull << 63);
	v[2] = rec(3000, 100, 0, S_CUPY, 0x7f2000000000, 1ull << 62);
	CHECK(write_log(path, v, 3, 0) == 0);
	struct gpr_trace t;
	if (gpr_test_load(path, &t) != 0)
		return;
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	CHECK(s.saturated);
	CHECK(s.live_bytes == UINT64_MAX);
	CHECK(s.held_end == (uint64_t)INT64_MAX);
	const struct gpr_trace_libstat *lt = lib(&s, S_TORCH);
	CHECK(lt && lt->alloc_bytes == UINT64_MAX);
	const struct gpr_trace_opstat *a = op(&s, 0);
	CHECK(a && a->bytes == UINT64_MAX);
	CHECK(s.n_devs == 1 && s.devs[0].alloc_bytes == UINT64_MAX);
	CHECK(s.n_sites == 2 && s.sites[0].bytes == UINT64_MAX);
	struct gpr__buf b = {0};
	gpr_trace_report_text(&b, path, &t, &s, 10, 0);
	CHECK(!b.oom &&
	      strstr(gpr__buf_str(&b),
		     "  - some byte figures reached the largest "
		     "value they can hold and stopped there") != NULL);
	CHECK(strstr(gpr__buf_str(&b),
		     "Never freed: 3 allocations, 16.0 EiB") != NULL);
	gpr__buf_reset(&b);
	gpr_trace_report_json(&b, path, &t, &s, 10);
	CHECK(!b.oom &&
	      strstr(gpr__buf_str(&b), "\"sums_saturated\":true") != NULL);
	gpr__buf_free(&b);
	gpr_trace_stats_free(&s);
	/* an ordinary log says nothing of the kind */
	path_in_tmp(path, sizeof(path), "plain.trace");
	CHECK(write_sample(path) == 0);
	gpr_trace_free(&t);
	if (gpr_test_load(path, &t) != 0)
		return;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	CHECK(!s.saturated);
	gpr_trace_report_json(&b, path, &t, &s, 10);
	CHECK(!b.oom &&
	      strstr(gpr__buf_str(&b), "\"sums_saturated\":false") != NULL);
	gpr__buf_free(&b);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
}

/* Empty strings (kept without a byte each), last of the log included. */
static void test_empty_strings(void)
{
	char path[256];
	path_in_tmp(path, sizeof(path), "empty.trace");
	unlink(path);
	struct gpr_trace_writer w;
	CHECK(gpr_trace_writer_open(&w, path, 1, 0, START) == 0);
	const char *strs[] = {"", "lib", "", ""};
	CHECK(gpr_trace_writer_strings(&w, strs, 4) == 0);
	struct gpr_trace_rec v =
	    rec(1000, 100, 0, GPR_TRACE_N_OPS + 3, 0x1000, 4096);
	v.site = GPR_TRACE_N_OPS;
	CHECK(gpr_trace_writer_records(&w, &v, 1) == 0);
	CHECK(gpr_trace_writer_close(&w, START + 2000, 0) == 0);
	struct gpr_trace t;
	if (gpr_test_load(path, &t) != 0)
		return;
	CHECK(t.n_strs == GPR_TRACE_N_OPS + 4);
	CHECK(strcmp(gpr_trace_str(&t, GPR_TRACE_N_OPS + 1, "?"), "lib") == 0);
	for (uint32_t i = 0; i < 4; i++)
		if (i != 1)
			CHECK(*gpr_trace_str(&t, GPR_TRACE_N_OPS + i, "?") ==
			      '\0');
	gpr_trace_free(&t);
}

/* The longest run of occupied slots: what a lookup may have to walk. */
static size_t longest_run(const struct gpr_trace_map *m)
{
	size_t best = 0, run = 0;
	for (size_t i = 0; i < 2 * m->cap; i++) {
		run = m->used[i & (m->cap - 1)] ? run + 1 : 0;
		if (run > best)
			best = run;
	}
	return best < m->cap ? best : m->cap;
}

/* A key whose murmur fmix64 is h (the reader's former, fixed hash). */
static uint64_t fmix_preimage(uint64_t h)
{
	uint64_t a = 0xff51afd7ed558ccdULL, inv = a;
	for (int i = 0; i < 6; i++)
		inv *= 2 - a * inv;
	h ^= h >> 33;
	h *= inv;
	return h ^ (h >> 33);
}

/*
 * The reader's map: right answers through growth and backward-shift
 * deletes, and keys chosen to share one slot of a fixed hash (fmix64 with
 * the low 32 bits equal) spread like any others under the keyed hash.
 */
static void test_u64map(void)
{
	enum { N = 20000 };
	struct gpr_trace_map m = {0};
	for (uint32_t i = 0; i < N; i++)
		CHECK(gpr_trace_map_put(
			  &m, fmix_preimage((uint64_t)(i + 1) << 32), i) == 0);
	CHECK(m.n == N);
	size_t run = longest_run(&m);
	if (run >= 1000)
		fprintf(stderr, "u64map: a run of %zu slots for %d keys\n", run,
			N);
	CHECK(run < 1000);
	int right = 0;
	for (uint32_t i = 0; i < N; i++) {
		uint32_t *v = gpr_trace_map_get(
		    &m, fmix_preimage((uint64_t)(i + 1) << 32));
		right += v && *v == i;
	}
	CHECK(right == N);
	/* every other key deleted: the rest still found, the gone not */
	for (uint32_t i = 0; i < N; i += 2)
		CHECK(gpr_trace_map_del(
			  &m, fmix_preimage((uint64_t)(i + 1) << 32)) == 1);
	right = 0;
	for (uint32_t i = 0; i < N; i++) {
		uint32_t *v = gpr_trace_map_get(
		    &m, fmix_preimage((uint64_t)(i + 1) << 32));
		right += i % 2 ? v && *v == i : v == NULL;
	}
	CHECK(right == N && m.n == N / 2);
	gpr_trace_map_free(&m);
}

/*
 * The tracer's one on/off parser: six words in any case, unset or empty is
 * off, anything else refused.
 */
static void test_switch_words(void)
{
	static const char *const on[] = {"1", "yes", "true", "YES", "True"};
	static const char *const off[] = {"0",	"no",	 "false",
					  "No", "FALSE", ""};
	static const char *const bad[] = {"2",	 "on", "off", " 1",
					  "1 ",	 "y",  "tru", "yes!",
					  "0x1", "-1", "01",  "enable"};
	for (size_t i = 0; i < sizeof on / sizeof on[0]; i++)
		CHECK(gpr_trace_switch_parse(on[i], NULL) == 1);
	for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
		CHECK(gpr_trace_switch_parse(off[i], NULL) == 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(gpr_trace_switch_parse(bad[i], NULL) == -1);
	CHECK(gpr_trace_switch_parse(NULL, NULL) == 0);
	/* a switch's own further word: SELFTIME=parts */
	CHECK(gpr_trace_switch_parse("parts", "parts") == 2);
	CHECK(gpr_trace_switch_parse("PARTS", "parts") == 2);
	CHECK(gpr_trace_switch_parse("1", "parts") == 1);
	CHECK(gpr_trace_switch_parse("parts", NULL) == -1);
	CHECK(gpr_trace_switch_parse("part", "parts") == -1);
	CHECK(strcmp(gpr_trace_switch_word("GPURECLAIM_TRACE_SELFTIME"),
		     "parts") == 0);
	CHECK(gpr_trace_switch_word("GPURECLAIM_TRACE_DORMANT") == NULL);
	CHECK(gpr_trace_switch_word("GPURECLAIM_TRACE_NOSUCH") == NULL);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--sample") == 0)
		return write_sample(argv[2]) == 0 ? 0 : 1;
	if (argc == 3 && strcmp(argv[1], "--hostile") == 0)
		return write_hostile(argv[2]) == 0 ? 0 : 1;
	if (argc == 3 && strcmp(argv[1], "--rmm-sample") == 0)
		return write_rmm_sample(argv[2]) == 0 ? 0 : 1;
	if (argc == 4 && strcmp(argv[1], "--big") == 0)
		return write_big(argv[2],
				 (size_t)strtoull(argv[3], NULL, 10)) == 0
			   ? 0
			   : 1;
	if (argc == 3 && strcmp(argv[1], "--cases") == 0)
		return write_cases(argv[2]) == 0 ? 0 : 1;
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_round_trip();
	test_stats();
	test_percentile();
	test_malformed();
	test_exports();
	test_reuse_after_dropped_free();
	test_free_of_dropped_alloc();
	test_hostile_strings();
	test_meta();
	test_u64map();
	test_empty_strings();
	test_saturated_sums();
	test_switch_words();
	return gpr_test_finish("test_trace_log", tmpdir);
}
