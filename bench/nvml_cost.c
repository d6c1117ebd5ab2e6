/*
 * Where the time of one `gpureclaim ps` goes inside NVML: each NVML step
 * it takes, timed alone in a fresh process (dlopen, the initialisation,
 * the first handle of each GPU, which attaches it, each query, the
 * process lists, nvmlShutdown). Run on the GPU machine:
 *
 *   build/bench/nvml_cost [WORD]...
 *
 * Words, combinable (docs/ps.md, Benchmarks):
 *   noattach   nvmlInitWithFlags(NVML_INIT_FLAG_NO_ATTACH) instead of
 *              nvmlInit_v2: does NVML still count the GPUs, do the first
 *              handles still attach (cost ~6 ms)? On driver 580.159.04 it
 *              counts none (2026-11-30, two H200s): `ps` cannot use it
 *   nogpus     nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS)
 *   parallel   the first handle of every GPU taken in a thread per GPU,
 *              at once, as `gpureclaim ps` does
 *   lazy       dlopen with RTLD_LAZY instead of RTLD_NOW
 *   procsfirst per GPU, the process lists before the MIG mode: is the
 *              first query's cost the query's or the first one's?
 *   twice      each query of a GPU made twice: the second is the warm cost
 *   split      per GPU, the MIG mode and the compute list from two
 *              threads at once: do they overlap or queue?
 *   libs       the shared objects each step mapped (does NVML load
 *              libcuda, and when?)
 *   overlap    nvmlInit_v2 on a thread while this thread does what `ps`
 *              does meanwhile (getpwuid_r, /proc reads): the first
 *              getpwuid_r's cost and whether the init slows down
 *   noshutdown skip nvmlShutdown (bench/nvml_exit times the exit instead)
 *
 * Skips (exit 0) without NVML.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "driver/nvml_abi.h"

#define MAX_GPUS 64

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static struct {
	int noattach, nogpus, parallel, lazy, procsfirst, twice, split, libs,
	    overlap, noshutdown;
} opt;

/* ---- the shared objects mapped so far (libs) ---- */

#define MAX_OBJS 512
static char *seen[MAX_OBJS];
static size_t n_seen;

static int is_seen(const char *name)
{
	for (size_t i = 0; i < n_seen; i++)
		if (strcmp(seen[i], name) == 0)
			return 1;
	return 0;
}

static int note_obj(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	const char *step = data;
	const char *name = info->dlpi_name;
	if (!name || !*name || is_seen(name) || n_seen == MAX_OBJS)
		return 0;
	seen[n_seen++] = strdup(name);
	if (step)
		printf("    mapped by %s: %s\n", step, name);
	return 0;
}

/* Prints the objects mapped since the last call (libs). */
static void new_objects(const char *step)
{
	if (opt.libs)
		dl_iterate_phdr(note_obj, (void *)step);
}

#define STEP(label, expr)                                                      \
	do {                                                                   \
		double t0_ = now_ms();                                         \
		int r_ = (int)(expr);                                          \
		printf("%-48s %8.3f ms  (rc %d)\n", label, now_ms() - t0_,     \
		       r_);                                                    \
		new_objects(label);                                            \
	} while (0)

/* ---- NVML's entry points ---- */

typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned *, void *);
static struct {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*initf)(unsigned);
	nvmlReturn_t (*shut)(void);
	nvmlReturn_t (*count)(unsigned *);
	nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *);
	nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned);
	nvmlReturn_t (*pci)(nvmlDevice_t, gpr_nvmlPciInfo_t *);
	nvmlReturn_t (*mem)(nvmlDevice_t, gpr_nvmlMemory_v2_t *);
	nvmlReturn_t (*mig)(nvmlDevice_t, unsigned *, unsigned *);
	procs_fn procs, gprocs;
} nv;

static int load(void *lib)
{
#define SYM(f, s) (nv.f = (__typeof__(nv.f))dlsym(lib, s))
	SYM(init, "nvmlInit_v2");
	SYM(initf, "nvmlInitWithFlags");
	SYM(shut, "nvmlShutdown");
	SYM(count, "nvmlDeviceGetCount_v2");
	SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
	SYM(name, "nvmlDeviceGetName");
	SYM(uuid, "nvmlDeviceGetUUID");
	SYM(pci, "nvmlDeviceGetPciInfo_v3");
	SYM(mem, "nvmlDeviceGetMemoryInfo_v2");
	SYM(mig, "nvmlDeviceGetMigMode");
	SYM(procs, "nvmlDeviceGetComputeRunningProcesses_v3");
	SYM(gprocs, "nvmlDeviceGetGraphicsRunningProcesses_v3");
#undef SYM
	return nv.init && nv.shut && nv.count && nv.handle && nv.name &&
	       nv.uuid && nv.pci && nv.mem && nv.mig && nv.procs && nv.gprocs;
}

/* ---- threads ---- */

static void *attach(void *arg)
{
	nvmlDevice_t d;
	nv.handle((unsigned)(size_t)arg, &d);
	return NULL;
}

struct timed_call {
	nvmlDevice_t dev;
	double ms;
	int rc;
};

static void *mig_thread(void *arg)
{
	struct timed_call *c = arg;
	unsigned cur, pend;
	double t0 = now_ms();
	c->rc = nv.mig(c->dev, &cur, &pend);
	c->ms = now_ms() - t0;
	return NULL;
}

static void *procs_thread(void *arg)
{
	struct timed_call *c = arg;
	gpr_nvmlProcessInfo_cc_t rec[64];
	unsigned cnt = 64;
	double t0 = now_ms();
	c->rc = nv.procs(c->dev, &cnt, rec);
	c->ms = now_ms() - t0;
	return NULL;
}

static void *init_thread(void *arg)
{
	struct timed_call *c = arg;
	double t0 = now_ms();
	c->rc = nv.init();
	c->ms = now_ms() - t0;
	return NULL;
}

/* What `ps` does while NVML starts, and the first getpwuid_r alone. */
static void ps_side_work(double *pw_ms, double *proc_ms)
{
	double t0 = now_ms();
	struct passwd pw, *res = NULL;
	char buf[16384];
	getpwuid_r(getuid(), &pw, buf, sizeof buf, &res);
	*pw_ms = now_ms() - t0;
	t0 = now_ms();
	struct stat st;
	char line[4096];
	stat("/proc/self/ns/pid", &st);
	FILE *f = fopen("/proc/self/cmdline", "r");
	if (f) {
		if (!fread(line, 1, sizeof line, f))
			line[0] = '\0';
		fclose(f);
	}
	*proc_ms = now_ms() - t0;
}

static int init_step(void)
{
	if (opt.overlap) {
		struct timed_call c = {0};
		pthread_t th;
		double t0 = now_ms();
		pthread_create(&th, NULL, init_thread, &c);
		double pw, pr;
		ps_side_work(&pw, &pr);
		double side = now_ms() - t0;
		pthread_join(th, NULL);
		printf("%-48s %8.3f ms  (rc %d)\n", "nvmlInit_v2, on a thread",
		       c.ms, c.rc);
		printf("%-48s %8.3f ms\n", "  meanwhile: first getpwuid_r", pw);
		printf("%-48s %8.3f ms\n", "  meanwhile: /proc reads", pr);
		printf("%-48s %8.3f ms\n", "  both, wall", now_ms() - t0);
		(void)side;
		double pw2, pr2;
		ps_side_work(&pw2, &pr2);
		printf("%-48s %8.3f ms\n", "second getpwuid_r (warm)", pw2);
		new_objects("nvmlInit_v2");
		return c.rc;
	}
	unsigned flags = (opt.noattach ? GPR_NVML_INIT_FLAG_NO_ATTACH : 0) |
			 (opt.nogpus ? GPR_NVML_INIT_FLAG_NO_GPUS : 0);
	int rc;
	if (flags && !nv.initf) {
		printf("this NVML has no nvmlInitWithFlags: nvmlInit_v2\n");
		flags = 0;
	}
	if (flags) {
		char label[64];
		snprintf(label, sizeof label, "nvmlInitWithFlags(%s%s%s)",
			 opt.noattach ? "NO_ATTACH" : "",
			 opt.noattach && opt.nogpus ? "|" : "",
			 opt.nogpus ? "NO_GPUS" : "");
		STEP(label, rc = nv.initf(flags));
	} else {
		STEP("nvmlInit_v2", rc = nv.init());
	}
	return rc;
}

static void query_gpu(unsigned i)
{
	nvmlDevice_t d;
	char buf[96];
	gpr_nvmlPciInfo_t pi;
	gpr_nvmlMemory_v2_t m = {0};
	m.version = GPR_NVML_STRUCT_VERSION(gpr_nvmlMemory_v2_t, 2);
	unsigned cur, pend, cnt;
	gpr_nvmlProcessInfo_cc_t rec[64];
	printf("GPU %u\n", i);
	STEP("  nvmlDeviceGetHandleByIndex_v2", nv.handle(i, &d));
	for (int k = 0; k < (opt.twice ? 2 : 1); k++) {
		if (k)
			printf("  again\n");
		STEP("  nvmlDeviceGetName", nv.name(d, buf, sizeof buf));
		STEP("  nvmlDeviceGetUUID", nv.uuid(d, buf, sizeof buf));
		STEP("  nvmlDeviceGetPciInfo_v3", nv.pci(d, &pi));
		STEP("  nvmlDeviceGetMemoryInfo_v2", nv.mem(d, &m));
		if (opt.split) {
			struct timed_call a = {.dev = d}, b = {.dev = d};
			pthread_t ta, tb;
			double t0 = now_ms();
			pthread_create(&ta, NULL, mig_thread, &a);
			pthread_create(&tb, NULL, procs_thread, &b);
			pthread_join(ta, NULL);
			pthread_join(tb, NULL);
			printf("%-48s %8.3f ms  (rc %d)\n",
			       "  MigMode || compute list: MigMode", a.ms,
			       a.rc);
			printf("%-48s %8.3f ms  (rc %d)\n",
			       "  MigMode || compute list: compute list", b.ms,
			       b.rc);
			printf("%-48s %8.3f ms\n",
			       "  MigMode || compute list: wall",
			       now_ms() - t0);
			continue;
		}
		if (!opt.procsfirst)
			STEP("  nvmlDeviceGetMigMode", nv.mig(d, &cur, &pend));
		cnt = 64;
		STEP("  nvmlDeviceGetComputeRunningProcesses_v3",
		     nv.procs(d, &cnt, rec));
		cnt = 64;
		STEP("  nvmlDeviceGetGraphicsRunningProcesses_v3",
		     nv.gprocs(d, &cnt, rec));
		if (opt.procsfirst)
			STEP("  nvmlDeviceGetMigMode", nv.mig(d, &cur, &pend));
	}
}

int main(int argc, char **argv)
{
	static const struct {
		const char *word;
		int *flag;
	} words[] = {
	    {"noattach", &opt.noattach},     {"nogpus", &opt.nogpus},
	    {"parallel", &opt.parallel},     {"lazy", &opt.lazy},
	    {"procsfirst", &opt.procsfirst}, {"twice", &opt.twice},
	    {"split", &opt.split},	     {"libs", &opt.libs},
	    {"overlap", &opt.overlap},	     {"noshutdown", &opt.noshutdown},
	};
	for (int i = 1; i < argc; i++) {
		size_t k = 0;
		while (k < sizeof words / sizeof words[0] &&
		       strcmp(argv[i], words[k].word) != 0)
			k++;
		if (k == sizeof words / sizeof words[0]) {
			fprintf(stderr,
				"nvml_cost: unknown word '%s' (see "
				"bench/nvml_cost.c)\n",
				argv[i]);
			return 2;
		}
		*words[k].flag = 1;
	}
	printf("== nvml_cost");
	for (int i = 1; i < argc; i++)
		printf(" %s", argv[i]);
	printf("\n");
	new_objects(NULL); /* what the program itself maps */
	double start = now_ms();
	void *lib = NULL;
	STEP(opt.lazy ? "dlopen libnvidia-ml.so.1 (RTLD_LAZY)"
		      : "dlopen libnvidia-ml.so.1",
	     (lib = dlopen("libnvidia-ml.so.1",
			   (opt.lazy ? RTLD_LAZY : RTLD_NOW) | RTLD_LOCAL)) ==
		 NULL);
	if (!lib) {
		printf("skipped: no NVML (%s)\n", dlerror());
		return 0;
	}
	if (!load(lib)) {
		printf("skipped: NVML lacks a symbol this tool times\n");
		return 0;
	}
	init_step();
	unsigned n = 0;
	STEP("nvmlDeviceGetCount_v2", nv.count(&n));
	printf("%-48s %8u\n", "  GPUs it counts", n);
	if (n > MAX_GPUS)
		n = MAX_GPUS;
	if (opt.parallel && n > 0) {
		pthread_t th[MAX_GPUS];
		double t0 = now_ms();
		for (unsigned i = 0; i < n; i++)
			pthread_create(&th[i], NULL, attach, (void *)(size_t)i);
		for (unsigned i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		printf("%-48s %8.3f ms  (%u GPUs)\n",
		       "first handles, a thread per GPU, at once",
		       now_ms() - t0, n);
		new_objects("first handles");
	}
	for (unsigned i = 0; i < n; i++)
		query_gpu(i);
	if (!opt.noshutdown)
		STEP("nvmlShutdown", nv.shut());
	printf("%-48s %8.3f ms\n", "total", now_ms() - start);
	return 0;
}
