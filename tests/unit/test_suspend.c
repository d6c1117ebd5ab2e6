/*
 * The core's suspend facts (src/suspend*.c): what /proc and the cgroup
 * file system say (read from files a test writes, through the test-only
 * variables), the records, and a suspend and resume on the simulated
 * driver with their measurements and refusals. Each test runs in its own
 * process (support.c).
 */
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suspend.h"
#include "suspend_host.h"
#include "suspend_record.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static char scratch_dir[256];

static int remove_one(const char *path, const struct stat *sb, int flag,
		      struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void remove_scratch(void)
{
	if (scratch_dir[0])
		nftw(scratch_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A folder of this test's, removed when it ends. */
static char *scratch(void)
{
	if (!scratch_dir[0]) {
		snprintf(scratch_dir, sizeof scratch_dir,
			 "/tmp/gpr-unit-suspend-XXXXXX");
		assert_non_null(mkdtemp(scratch_dir));
		atexit(remove_scratch);
	}
	return scratch_dir;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void mkdirs(const char *path)
{
	char p[2048];
	snprintf(p, sizeof p, "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		mkdir(p, 0700);
		*s = '/';
	}
	mkdir(p, 0700);
}

/* ---------------- the host ---------------- */

static void test_host_room_keeps_a_margin(void **st)
{
	(void)st;
	char path[512];
	snprintf(path, sizeof path, "%s/meminfo", scratch());
	/* 100 GiB total, 60 GiB available: 10 GiB kept free */
	write_file(path, "MemTotal:       104857600 kB\n"
			 "MemFree:         1000 kB\n"
			 "MemAvailable:    62914560 kB\n");
	setenv("GPURECLAIM_TEST_MEMINFO", path, 1);
	setenv("GPURECLAIM_TEST_CGROUP_FS", "/nonexistent", 1);
	struct gpr__host_room r;
	char err[256], why[512];
	assert_int_equal(gpr__host_room(getpid(), &r, err, sizeof err), 0);
	assert_int_equal(r.mem_total, 100 * GiB);
	assert_int_equal(r.mem_available, 60 * GiB);
	assert_int_equal(r.host_room, 50 * GiB);
	assert_int_equal(r.room, 50 * GiB);
	assert_false(r.cg_limited);
	assert_int_equal(gpr__host_fits(&r, 50 * GiB, why, sizeof why), 0);
	assert_int_equal(gpr__host_fits(&r, 50 * GiB + 1, why, sizeof why),
			 GPR_E_NO_ROOM);
	assert_non_null(strstr(why, "host memory cannot hold it: 50.0 GiB to "
				    "move, 60.0 GiB available of which 10.0 "
				    "GiB is kept free"));
	/* a small host keeps 1 GiB at least */
	write_file(path, "MemTotal: 2097152 kB\nMemAvailable: 1572864 kB\n");
	assert_int_equal(gpr__host_room(getpid(), &r, err, sizeof err), 0);
	assert_int_equal(r.host_room, 512 * MiB);
	/* no MemAvailable: an error, never a guess */
	write_file(path, "MemTotal: 2097152 kB\nMemFree: 1 kB\n");
	assert_int_equal(gpr__host_room(getpid(), &r, err, sizeof err),
			 GPR_E_IO);
	assert_non_null(strstr(err, "MemAvailable"));
	write_file(path, "MemTotal: 2097152 kB\nMemAvailable: 12x kB\n");
	assert_int_equal(gpr__host_room(getpid(), &r, err, sizeof err),
			 GPR_E_IO);
}

/* This process's memory cgroup, as the core reads it. */
static int my_cgroup(char *path, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	assert_non_null(f);
	char line[1024];
	int version = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = strchr(c1 + 1, ':');
		*c2 = '\0';
		char ctl[256];
		snprintf(ctl, sizeof ctl, ",%s,", c1 + 1);
		if (strstr(ctl, ",memory,")) {
			snprintf(path, len, "%s", c2 + 1);
			version = 1;
			break;
		}
		if (c1 == line + 1 && line[0] == '0' && !c1[1]) {
			snprintf(path, len, "%s", c2 + 1);
			version = 2;
		}
	}
	fclose(f);
	return version;
}

static void test_the_tightest_cgroup_level_counts(void **st)
{
	(void)st;
	char rel[512], root[512], dir[1200], file[1400], meminfo[600];
	int v = my_cgroup(rel, sizeof rel);
	assert_true(v == 1 || v == 2);
	snprintf(root, sizeof root, "%s/cg", scratch());
	snprintf(meminfo, sizeof meminfo, "%s/meminfo", root);
	snprintf(dir, sizeof dir, "%s%s%s", root, v == 1 ? "/memory" : "",
		 strcmp(rel, "/") ? rel : "");
	mkdirs(dir);
	write_file(meminfo, "MemTotal: 104857600 kB\nMemAvailable: "
			    "62914560 kB\n");
	setenv("GPURECLAIM_TEST_MEMINFO", meminfo, 1);
	setenv("GPURECLAIM_TEST_CGROUP_FS", root, 1);
	const char *lim = v == 2 ? "memory.max" : "memory.limit_in_bytes";
	const char *use = v == 2 ? "memory.current" : "memory.usage_in_bytes";
	/* this level: 4 GiB, 1 GiB used (0.5 of it idle page cache) */
	snprintf(file, sizeof file, "%s/%s", dir, lim);
	write_file(file, "4294967296\n");
	snprintf(file, sizeof file, "%s/%s", dir, use);
	write_file(file, "1073741824\n");
	snprintf(file, sizeof file, "%s/memory.stat", dir);
	write_file(file, v == 2 ? "anon 1\ninactive_file 536870912\n"
				: "cache 1\ntotal_inactive_file 536870912\n");
	struct gpr__host_room r;
	char err[256], why[512];
	assert_int_equal(gpr__host_room(getpid(), &r, err, sizeof err), 0);
	assert_true(r.cg_limited);
	assert_int_equal(r.cg_version, v);
	assert_int_equal(r.cg_limit, 4 * GiB);
	assert_int_equal(r.cg_free, 3 * GiB + 512 * MiB);
	/* 10% of the limit kept free */
	assert_int_equal(r.cg_room, 3 * GiB + 512 * MiB - 4 * GiB / 100 * 10);
	assert_int_equal(r.room, r.cg_room);
	assert_string_equal(r.cg_path, strcmp(rel, "/") ? rel : "/");
	assert_int_equal(gpr__host_fits(&r, r.cg_room + 1, why, sizeof why),
			 GPR_E_NO_ROOM);
	assert_non_null(strstr(why, "its memory cgroup"));
	assert_non_null(strstr(why, "free under its limit of 4.0 GiB"));
	/* "max" (v2) or the v1 "no limit" is no limit */
	snprintf(file, sizeof file, "%s/%s", dir, lim);
	write_file(file, v == 2 ? "max\n" : "9223372036854771712\n");
	assert_int_equal(gpr__host_room(getpid(), &r, err, sizeof err), 0);
	if (strcmp(rel, "/") == 0) {
		assert_false(r.cg_limited);
		return;
	}
	/* a parent's tighter limit wins */
	char parent[1200];
	snprintf(parent, sizeof parent, "%s", dir);
	*strrchr(parent, '/') = '\0';
	snprintf(file, sizeof file, "%s/%s", parent, lim);
	write_file(file, "2147483648\n");
	snprintf(file, sizeof file, "%s/%s", parent, use);
	write_file(file, "1073741824\n");
	assert_int_equal(gpr__host_room(getpid(), &r, err, sizeof err), 0);
	assert_true(r.cg_limited);
	assert_int_equal(r.cg_limit, 2 * GiB);
	assert_int_equal(r.cg_free, 1 * GiB);
}

/* ---------------- the process ---------------- */

static void test_a_process_as_proc_shows_it(void **st)
{
	(void)st;
	struct gpr__proc p;
	char err[256];
	assert_int_equal(gpr__proc_read(getpid(), &p, err, sizeof err), 0);
	assert_int_equal(p.uid, (long)getuid());
	assert_true(p.start > 0);
	assert_int_equal(p.start, gpr__proc_start(getpid()));
	assert_true(p.rss_known && p.rss > 0);
	assert_false(p.zombie);
	/* a zombie: exited, not reaped */
	pid_t z = fork();
	if (z == 0)
		_exit(0);
	char path[64], state = 0;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)z);
	while (state != 'Z') { /* until it has exited */
		FILE *f = fopen(path, "r");
		assert_non_null(f);
		char buf[512];
		assert_non_null(fgets(buf, sizeof buf, f));
		fclose(f);
		state = strrchr(buf, ')')[2];
	}
	assert_int_equal(gpr__proc_read(z, &p, err, sizeof err), 0);
	assert_true(p.zombie);
	waitpid(z, NULL, 0);
	assert_int_equal(gpr__proc_read(z, &p, err, sizeof err),
			 GPR_E_NOT_FOUND);
	assert_non_null(strstr(err, "does not exist"));
	assert_int_equal(gpr__proc_start(z), 0);
}

/* ---------------- records ---------------- */

static struct gpr__record sample(void)
{
	struct gpr__record r;
	memset(&r, 0, sizeof r);
	r.pid = (int)getpid();
	r.start = gpr__proc_start(getpid());
	r.uid = (long)getuid();
	r.time = 1764900000.25;
	r.host_known = 1;
	r.host_bytes = 3 * GiB;
	r.n_gpus = 2;
	r.gpu[0].index = 0;
	snprintf(r.gpu[0].uuid, sizeof r.gpu[0].uuid, "GPU-aaaa");
	r.gpu[0].bytes = 3 * GiB + 512 * MiB;
	r.gpu[1].index = 3;
	r.gpu[1].bytes = 1;
	return r;
}

static void test_records_round_trip_and_refuse_what_is_not_one(void **st)
{
	(void)st;
	char base[512], dir[4096], err[512], path[4200];
	snprintf(base, sizeof base, "%s/run", scratch());
	setenv("GPURECLAIM_AGENT_DIR", base, 1);
	assert_int_equal(gpr__record_dir(dir, sizeof dir, 0, err, sizeof err),
			 GPR_E_NOT_FOUND);
	assert_int_equal(gpr__record_dir(dir, sizeof dir, 1, err, sizeof err),
			 0);
	struct stat sb;
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
	struct gpr__record w = sample(), r;
	assert_int_equal(gpr__record_write(dir, &w, err, sizeof err), 0);
	assert_int_equal(gpr__record_read(dir, w.pid, &r), 0);
	assert_int_equal(r.start, w.start);
	assert_int_equal(r.host_bytes, 3 * GiB);
	assert_int_equal(r.n_gpus, 2);
	assert_string_equal(r.gpu[0].uuid, "GPU-aaaa");
	assert_string_equal(r.gpu[1].uuid, "");
	assert_int_equal(r.gpu[1].index, 3);
	assert_true(r.time > 1764900000.2 && r.time < 1764900000.3);
	assert_true(gpr__record_current(&r, (long)getuid()));
	int *pids = NULL;
	size_t n = 0;
	snprintf(path, sizeof path, "%s/not-a-record", dir);
	write_file(path, "x");
	assert_int_equal(gpr__record_pids(dir, &pids, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(pids[0], w.pid);
	free(pids);

	/* in root's folder too; another user's folder may not speak of it */
	assert_true(gpr__record_current(&r, 0));
	assert_false(gpr__record_current(&r, (long)getuid() + 1));
	/* another process at that pid: the record is stale */
	r.start++;
	assert_false(gpr__record_current(&r, (long)getuid()));
	/* malformed, cut short, too long, a link: never trusted */
	snprintf(path, sizeof path, "%s/%d.suspended", dir, w.pid);
	const char *bad[] = {
	    "gpureclaim-suspended 2\npid 1\n",
	    "gpureclaim-suspended 1\npid 1\nstart 1\nuid 0\ntime 1\n",
	    "gpureclaim-suspended 1\npid 1\nstart 1\nuid 0\ntime 1\nwhat 1\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_file(path, bad[i]);
		assert_int_equal(gpr__record_read(dir, w.pid, &r),
				 GPR_E_FORMAT);
	}
	assert_int_equal(gpr__record_write(dir, &w, err, sizeof err), 0);
	unlink(path);
	assert_int_equal(symlink("/etc/hostname", path), 0);
	assert_int_equal(gpr__record_read(dir, w.pid, &r), GPR_E_FORMAT);
	assert_int_equal(gpr__record_remove(dir, w.pid), 0);
	assert_int_equal(gpr__record_read(dir, w.pid, &r), GPR_E_NOT_FOUND);
	assert_int_equal(gpr__record_remove(dir, w.pid), 0);

	/* a folder open to others is never used */
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(gpr__record_dir(dir, sizeof dir, 1, err, sizeof err),
			 GPR_E_PERM);
	assert_non_null(strstr(err, "not used"));
	struct gpr__record_folder *dirs = NULL;
	assert_int_equal(gpr__record_dirs(&dirs, &n), 0);
	assert_int_equal(n, 0);
	free(dirs);
}

static void test_suspend_and_resume_measure_what_moved(void **st)
{
	(void)st;
	sim_setup("context=16MiB;gpus=2");
	void *lib = sim_cuda_load();
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	gpr__suspender *s = NULL;
	char err[512];
	assert_int_equal(gpr__suspender_open(ctx, &s, err, sizeof err), 0);
	int keep;
	pid_t t = sim_target(lib, 64 * MiB, &keep);
	struct gpr__suspend_report r;
	struct gpr__suspend_opts dry = {.dry_run = 1};
	assert_int_equal(gpr__suspend(s, t, &dry, &r), 0);
	assert_int_equal(r.need, 80 * MiB);
	assert_true(r.room_known);
	int state;
	assert_int_equal(gpr__suspend_state(s, t, &state, err, sizeof err), 0);
	assert_int_equal(state, GPR__PS_RUNNING);

	assert_int_equal(gpr__suspend(s, t, NULL, &r), 0);
	assert_int_equal(r.step, GPR__STEP_DONE);
	assert_int_equal(r.state_before, GPR__PS_RUNNING);
	assert_int_equal(r.state_after, GPR__PS_CHECKPOINTED);
	assert_true(r.released_known && r.host_known);
	assert_int_equal(r.released, 80 * MiB);
	/* the growth of its resident memory: the copy, and a page or so it
	 * touched meanwhile */
	assert_true(r.host_bytes >= (int64_t)(64 * MiB) &&
		    r.host_bytes <= (int64_t)(65 * MiB));
	assert_int_equal(r.before.n, 2);
	assert_true(r.before.gpu[0].listed && !r.after.gpu[0].listed);
	assert_false(r.before.gpu[1].listed);
	assert_int_equal(r.before.gpu[0].used - r.after.gpu[0].used, 80 * MiB);
	assert_true(r.total_s >= r.move_s && r.move_s > 0);

	/* a second suspend is refused before anything is done */
	assert_int_equal(gpr__suspend(s, t, NULL, &r), GPR_E_STATE);
	assert_int_equal(r.step, GPR__STEP_CHECK);
	assert_non_null(strstr(r.why, "is suspended already"));

	assert_int_equal(gpr__resume(s, t, NULL, &r), 0);
	assert_int_equal(r.state_before, GPR__PS_CHECKPOINTED);
	assert_int_equal(r.state_after, GPR__PS_RUNNING);
	assert_int_equal(r.released, -(int64_t)(80 * MiB));
	assert_true(r.host_bytes <= -(int64_t)(63 * MiB));
	assert_int_equal(gpr__resume(s, t, NULL, &r), GPR_E_STATE);
	assert_non_null(strstr(r.why, "is running, not suspended"));

	/* no room on the host: refused before the lock */
	char meminfo[512];
	snprintf(meminfo, sizeof meminfo, "%s/meminfo", scratch());
	write_file(meminfo, "MemTotal: 1048576 kB\nMemAvailable: 1100000 kB\n");
	setenv("GPURECLAIM_TEST_MEMINFO", meminfo, 1);
	assert_int_equal(gpr__suspend(s, t, NULL, &r), GPR_E_NO_ROOM);
	assert_int_equal(r.step, GPR__STEP_CHECK);
	assert_int_equal(r.lock_s, 0);
	assert_int_equal(gpr__suspend_state(s, t, &state, err, sizeof err), 0);
	assert_int_equal(state, GPR__PS_RUNNING);
	unsetenv("GPURECLAIM_TEST_MEMINFO");

	/* not a CUDA process; no such process; this process itself */
	assert_int_equal(gpr__suspend(s, (int)getppid(), NULL, &r),
			 GPR_E_NOT_FOUND);
	assert_non_null(strstr(r.why, "knows no CUDA state"));
	assert_int_equal(gpr__suspend(s, 0x7ffffff0, NULL, &r),
			 GPR_E_NOT_FOUND);
	assert_int_equal(gpr__suspend(s, (int)getpid(), NULL, &r), GPR_E_INVAL);
	sim_target_end(t, keep);
	gpr__suspender_close(s);
	gpr_close(ctx);
}

static void test_a_driver_without_the_api_says_which_is_needed(void **st)
{
	(void)st;
	sim_setup("");
	char old[4096];
	const char *fakes = getenv("GPR_FAKES_BUILD");
	snprintf(old, sizeof old, "%s/libold_cuda.so",
		 fakes && *fakes ? fakes : "build/tests/fixtures");
	setenv("GPURECLAIM_CUDA_LIBRARY", old, 1);
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	gpr__suspender *s = NULL;
	char err[512];
	assert_int_equal(gpr__suspender_open(ctx, &s, err, sizeof err),
			 GPR_E_UNSUPPORTED);
	assert_null(s);
	assert_string_equal(
	    err, "this NVIDIA driver (580.0-sim, CUDA 12.4) has no checkpoint "
		 "API (cuCheckpointProcessGetState missing): suspend and "
		 "resume need NVIDIA driver 570 or later");
	gpr_close(ctx);
	/* and no driver at all */
	setenv("GPURECLAIM_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	assert_int_equal(gpr__suspender_open(ctx, &s, err, sizeof err),
			 GPR_E_NO_DRIVER);
	gpr_close(ctx);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_host_room_keeps_a_margin),
	    cmocka_unit_test(test_the_tightest_cgroup_level_counts),
	    cmocka_unit_test(test_a_process_as_proc_shows_it),
	    cmocka_unit_test(
		test_records_round_trip_and_refuse_what_is_not_one),
	    cmocka_unit_test(test_suspend_and_resume_measure_what_moved),
	    cmocka_unit_test(
		test_a_driver_without_the_api_says_which_is_needed),
	};
	return gpr_test_main(argc, argv, "suspend", tests,
			     sizeof tests / sizeof tests[0]);
}
