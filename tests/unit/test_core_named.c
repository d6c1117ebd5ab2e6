/*
 * A GPU that CUDA does not see (Metal on Apple silicon) through the core's
 * one release engine: releasers that name it, its figure() read before the
 * collection (a collected Metal buffer goes straight back to the driver),
 * the report's row for it, the fallback to the allocators' counters.
 * The "Metal driver" here is a counter; the two framework releasers are C
 * look-alikes of the extension's mps (reads the figure) and mlx.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "test_core_pool.h"

struct metal;

/* One framework on the Metal GPU: its counters, its figure() answer. */
struct fw {
	struct metal *m;
	uint64_t live, cached;
	int figure; /* mps: KNOWN, UNUSED or an error; mlx: UNKNOWN or UNUSED */
	const char *why;
};

struct metal {
	uint64_t total;	  /* the driver's per-process figure */
	uint64_t cycle;	  /* of a.live: garbage in a cycle */
	struct fw a, b;	  /* "mps" (reads the figure) and "mlx" */
	int wrong_device; /* a callback got a device not ONCE */
	char log[64];	  /* F: mps's figure, C: collection, R: release */
};

static void say(struct metal *m, char c)
{
	size_t n = strlen(m->log);
	if (n + 1 < sizeof m->log)
		m->log[n] = c;
}

static int fw_figure(void *data, uint64_t *bytes, char *why, size_t why_sz)
{
	struct fw *f = data;
	if (f == &f->m->a)
		say(f->m, 'F');
	if (f->figure == GPR_FIGURE_KNOWN)
		*bytes = f->m->total;
	else
		snprintf(why, why_sz, "%s", f->why);
	return f->figure;
}

static int fw_held(void *data, int dev, struct gpr_held *out)
{
	struct fw *f = data;
	f->m->wrong_device |= dev != GPR_DEVICE_ONCE;
	out->live = f->live;
	out->cached = f->cached;
	out->known = 1;
	return 0;
}

static int fw_release(void *data, int dev, char *note, size_t note_sz)
{
	(void)note;
	(void)note_sz;
	struct fw *f = data;
	f->m->wrong_device |= dev != GPR_DEVICE_ONCE;
	say(f->m, 'R');
	f->m->total -= f->cached;
	f->cached = 0;
	return 0;
}

/* Python's gc on Metal: the cycle's buffers go back to the driver at once,
 * not to a cache. */
static int gc_metal(void *user)
{
	struct metal *m = user;
	say(m, 'C');
	m->total -= m->cycle;
	m->a.live -= m->cycle;
	m->cycle = 0;
	return 0;
}

static void register_metal(gpr_ctx *ctx, struct metal *m)
{
	static const char *const names[] = {"mps", "mlx"};
	struct fw *fws[] = {&m->a, &m->b};
	m->a.why = "driver_allocated_memory() raised";
	m->b.why = "mlx counts its own buffers only";
	for (int i = 0; i < 2; i++) {
		fws[i]->m = m;
		struct gpr_releaser r = {.sz = sizeof r,
					 .name = names[i],
					 .data = fws[i],
					 .held = fw_held,
					 .release = fw_release,
					 .device_name = "mps",
					 .figure = fw_figure};
		assert_int_equal(gpr_register(ctx, &r), 0);
	}
}

static gpr_report *release_metal(gpr_ctx *ctx, struct metal *m)
{
	struct gpr_release_opts o = {
	    .sz = sizeof o, .collect_fn = gc_metal, .collect_user = m};
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	assert_false(m->wrong_device);
	return r;
}

/* Torch MPS and MLX, no CUDA in the process: Metal's figure, read before
 * the collection, counts the cycle's buffers the collection returned. */
static void t_metal_figure_before_gc(void **state)
{
	(void)state;
	sim_setup("gpus=1");
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	struct metal m = {
	    .total = 1000 + 3 * GiB,
	    .cycle = GiB,
	    .a = {.live = GiB, .cached = GiB, .figure = GPR_FIGURE_KNOWN},
	    .b = {.cached = GiB, .figure = GPR_FIGURE_UNKNOWN}};
	register_metal(ctx, &m);
	gpr_report *r = release_metal(ctx, &m);
	assert_int_equal(gpr_report_bytes(r), (int64_t)(3 * GiB));
	assert_string_equal(gpr_report_source(r), "driver");
	assert_int_equal(gpr_report_collected(r, NULL), 1);
	assert_int_equal(m.total, 1000);
	/* mps's figure, the collection, the pass, the figure again */
	assert_string_equal(m.log, "FCRRF");
	assert_true(has_note(r, "CUDA driver not loaded"));
	assert_int_equal(gpr_report_gpu_count(r), 1);
	struct gpr_report_gpu g;
	assert_int_equal(gpr_report_gpu(r, 0, &g), 0);
	assert_int_equal(g.device, GPR_DEVICE_NAMED);
	assert_string_equal(g.name, "mps");
	assert_int_equal(g.nvml_index, -1);
	assert_true(g.known);
	assert_int_equal(g.before, 1000 + 3 * GiB);
	assert_int_equal(g.after, 1000);
	assert_int_equal(g.released, (int64_t)(3 * GiB));
	/* one row per Metal framework, its once step */
	assert_int_equal(gpr_report_releaser_count(r), 2);
	struct gpr_report_releaser rr;
	assert_int_equal(gpr_report_releaser(r, 0, &rr), 0);
	assert_string_equal(rr.name, "mps");
	assert_int_equal(rr.device, GPR_DEVICE_ONCE);
	assert_int_equal(rr.before.live, GiB);
	assert_int_equal(rr.after.live, 0);
	assert_int_equal(gpr_report_releaser(r, 1, &rr), 0);
	assert_string_equal(rr.name, "mlx");
	assert_int_equal(rr.before.cached, GiB);

	char *json = gpr_report_json(r);
	assert_non_null(strstr(json, "\"gpus\":[{\"device\":\"mps\""));
	gpr_free(json);
	char *text = gpr_report_text(r);
	assert_non_null(strstr(text, "\nmps "));
	gpr_free(text);
	gpr_report_free(r);
	/* NVML was not needed, so not loaded */
	assert_null(
	    dlopen(sim_path("libnvidia-ml.so.1"), RTLD_NOW | RTLD_NOLOAD));
	gpr_close(ctx);
}

/* MLX alone (no figure from anyone), a failing figure, nobody in use. */
static void t_metal_fallbacks(void **state)
{
	(void)state;
	sim_setup("gpus=1");
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	struct metal m = {.total = 5000 + GiB,
			  .a = {.figure = GPR_FIGURE_UNUSED},
			  .b = {.cached = GiB, .figure = GPR_FIGURE_UNKNOWN}};
	register_metal(ctx, &m);
	gpr_report *r = release_metal(ctx, &m);
	assert_string_equal(gpr_report_source(r), "allocators");
	assert_int_equal(gpr_report_bytes(r), (int64_t)GiB);
	assert_int_equal(gpr_report_collected(r, NULL), 0);
	assert_true(has_note(r, "GPU mps: no driver figure (mlx counts its "
				"own buffers only)"));
	assert_int_equal(gpr_report_releaser_count(r), 1); /* mlx only */
	gpr_report_free(r);

	/* the figure raises: in use, unknown, and the note says why */
	m.a.figure = GPR_E_RELEASER;
	m.a.cached = 4 * MiB;
	m.total += 4 * MiB;
	r = release_metal(ctx, &m);
	assert_string_equal(gpr_report_source(r), "allocators");
	assert_int_equal(gpr_report_bytes(r), 4 * MiB);
	assert_true(has_note(r, "mps: driver_allocated_memory() raised"));
	assert_int_equal(gpr_report_releaser_count(r), 2);
	gpr_report_free(r);

	/* neither in use: no row, nothing run */
	m.a.figure = GPR_FIGURE_UNUSED;
	m.b.figure = GPR_FIGURE_UNUSED;
	memset(m.log, 0, sizeof m.log);
	r = release_metal(ctx, &m);
	assert_int_equal(gpr_report_gpu_count(r), 0);
	assert_int_equal(gpr_report_releaser_count(r), 0);
	assert_null(strchr(m.log, 'R'));
	gpr_report_free(r);
	gpr_close(ctx);
}

/* CUDA and a named GPU in one process: each releaser on its own GPUs. */
static void t_cuda_and_named(void **state)
{
	(void)state;
	sim_setup("gpus=1");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	pool_drop(&p, pool_alloc(&p, 0, 2 * MiB));
	gpr_ctx *ctx = pool_ctx(&p, "pool");
	struct metal m = {.total = GiB,
			  .a = {.cached = 6 * MiB, .figure = GPR_FIGURE_KNOWN},
			  .b = {.figure = GPR_FIGURE_UNUSED}};
	register_metal(ctx, &m);
	gpr_report *r = release_metal(ctx, &m);
	assert_string_equal(gpr_report_source(r), "driver");
	assert_int_equal(gpr_report_bytes(r), 8 * MiB);
	assert_int_equal(gpr_report_gpu_count(r), 2);
	struct gpr_report_gpu g;
	assert_int_equal(gpr_report_gpu(r, 0, &g), 0);
	assert_int_equal(g.device, 0);
	assert_null(g.name);
	assert_int_equal(g.released, 2 * MiB);
	assert_int_equal(gpr_report_gpu(r, 1, &g), 0);
	assert_string_equal(g.name, "mps");
	assert_int_equal(g.released, 6 * MiB);
	/* pool: GPU 0 and once; mps: once; mlx not in use */
	assert_int_equal(gpr_report_releaser_count(r), 3);
	assert_int_equal(atomic_load(&p.entered), 2);
	gpr_report_free(r);
	gpr_close(ctx);
}

/* A releaser with an empty device name is refused. */
static void t_bad_device_name(void **state)
{
	(void)state;
	sim_setup("gpus=1");
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	struct gpr_releaser r = {
	    .sz = sizeof r, .name = "x", .device_name = ""};
	assert_int_equal(gpr_register(ctx, &r), GPR_E_INVAL);
	assert_non_null(strstr(gpr_last_error(ctx), "device_name"));
	gpr_close(ctx);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_metal_figure_before_gc),
	    cmocka_unit_test(t_metal_fallbacks),
	    cmocka_unit_test(t_cuda_and_named),
	    cmocka_unit_test(t_bad_device_name),
	};
	return gpr_test_main(argc, argv, "core-named", tests,
			     sizeof tests / sizeof tests[0]);
}
