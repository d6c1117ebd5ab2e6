/*
 * Writes synthetic trace logs for the reader's benchmarks
 * (bench/trace_reader.sh): hostile shapes next to ordinary ones.
 *
 * Usage: trace_gen SHAPE N OUT
 *   random   N allocations at random addresses, never freed
 *   chosen   N allocations at addresses that all fall in one slot of the
 *            reader's former fixed hash (murmur's fmix64 mask; inverted)
 *   strided  N allocations 4 KiB apart, never freed (an allocator's pattern)
 *   pairs    N allocations, each freed right after (an ordinary run)
 *   devices  N allocations, each freed right after, the i-th on GPU i
 *            (N <= 32768: a log naming more GPUs than any machine has)
 *   strings  N empty strings and no record (N <= 4194304: 16 MiB of log)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../trace/format/trace_ops.h"
#include "../trace/format/log_write.h"

/* x ^= x >> 33 is its own inverse for 64-bit words. */
static uint64_t xs33(uint64_t x)
{
	return x ^ (x >> 33);
}

/* The inverse of 0xff51afd7ed558ccd modulo 2^64 (Newton's iteration). */
static uint64_t inverse(uint64_t a)
{
	uint64_t x = a;
	for (int i = 0; i < 6; i++)
		x *= 2 - a * x;
	return x;
}

/* A key whose fmix64 is h: all h with the same low bits share a slot. */
static uint64_t preimage(uint64_t h)
{
	return xs33(xs33(h) * inverse(0xff51afd7ed558ccdULL));
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_random(void)
{
	/* splitmix64 */
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: trace_gen "
				"random|chosen|strided|pairs|devices|strings N "
				"OUT\n");
		return 2;
	}
	const char *shape = argv[1];
	char *end;
	unsigned long long n = strtoull(argv[2], &end, 10);
	if (*end || n == 0 || n > 100000000ULL) {
		fprintf(stderr, "trace_gen: N from 1 to 10^8\n");
		return 2;
	}
	int devices = strcmp(shape, "devices") == 0;
	if (devices && n > 32768) {
		fprintf(stderr, "trace_gen: devices: N from 1 to 32768\n");
		return 2;
	}
	unlink(argv[3]);
	struct gpr_trace_writer w;
	if (gpr_trace_writer_open(&w, argv[3], 1, 0, 1000) < 0) {
		perror(argv[3]);
		return 1;
	}
	const char *names[] = {"libbench.so", "libbench.so!site+0x10"};
	int rc = gpr_trace_writer_strings(&w, names, 2);
	if (strcmp(shape, "strings") == 0) {
		static const char *empty[4096];
		for (unsigned long long done = 0; rc == 0 && done < n;) {
			uint32_t k =
			    n - done < 4096 ? (uint32_t)(n - done) : 4096;
			rc = gpr_trace_writer_strings(&w, empty, k);
			done += k;
		}
	} else {
		enum { BATCH = 65536 };
		struct gpr_trace_rec *v = calloc(BATCH, sizeof(*v));
		int pairs = strcmp(shape, "pairs") == 0 || devices;
		uint64_t t = 1000;
		for (unsigned long long i = 0; rc == 0 && i < n;) {
			size_t m = 0;
			for (; m + 2 <= BATCH && i < n; i++) {
				uint64_t a;
				if (strcmp(shape, "chosen") == 0)
					a = preimage((i + 1) << 32);
				else if (strcmp(shape, "strided") == 0)
					a = 0x7f0000000000ULL + i * 4096;
				else
					a = next_random() | 1;
				struct gpr_trace_rec r = {
				    .t_ns = t += 100,
				    .dur_ns = 50,
				    .addr = a,
				    .bytes = 4096,
				    .tid = 7,
				    .op = 0,
				    .lib = GPR_TRACE_N_OPS,
				    .site = GPR_TRACE_N_OPS + 1,
				    .device = devices ? (int16_t)i : 0};
				v[m++] = r;
				if (pairs) {
					r.t_ns = t += 100;
					r.op = 3;
					r.flags = GPR_TRACE_R_SIZE_MAP;
					v[m++] = r;
				}
			}
			rc = gpr_trace_writer_records(&w, v, m);
		}
		free(v);
	}
	int rc2 = gpr_trace_writer_close(&w, 2000, 0);
	if (rc || rc2) {
		fprintf(stderr, "trace_gen: writing %s failed\n", argv[3]);
		return 1;
	}
	return 0;
}
