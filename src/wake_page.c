/*
 * A suspended process's pages, from its watcher (wake_page.h). Each page
 * found is mapped shared; its words are the protocol's futex words
 * (include/gpureclaim_wake.h), read and written with atomics.
 */
#include "wake_page.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gpureclaim.h"
#include "gpureclaim_wake.h"

struct gpr__wake {
	size_t n;
	struct gpureclaim_wake_page *page[GPR__WAKE_PAGES];
	ino_t ino[GPR__WAKE_PAGES];
	int32_t me;
};

static const char memfd_link[] = "/memfd:" GPURECLAIM_WAKE_NAME " (deleted)";

static long futex(uint32_t *word, int op, uint32_t val, double seconds)
{
	struct timespec ts = {
	    (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	return syscall(SYS_futex, word, op, val, seconds > 0 ? &ts : NULL, NULL,
		       0);
}

/* Maps the file at path when it is a page of pid's (not seen yet). */
static void adopt(gpr__wake *w, const char *path, int pid, uint64_t start)
{
	if (w->n == GPR__WAKE_PAGES)
		return;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	void *m = MAP_FAILED;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size >= GPURECLAIM_WAKE_SIZE)
		m = mmap(NULL, GPURECLAIM_WAKE_SIZE, PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return;
	struct gpureclaim_wake_page *p = m;
	int same = 0;
	for (size_t i = 0; i < w->n; i++)
		same |= w->ino[i] == st.st_ino;
	if (same || p->magic != GPURECLAIM_WAKE_MAGIC ||
	    p->version != GPURECLAIM_WAKE_VERSION || p->pid != pid ||
	    (start && p->start != start)) {
		munmap(m, GPURECLAIM_WAKE_SIZE);
		return;
	}
	w->ino[w->n] = st.st_ino;
	w->page[w->n++] = p;
}

/* Root's way to a page whose descriptor the program closed. */
static void from_maps(gpr__wake *w, int pid, uint64_t start)
{
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		unsigned long long lo, hi;
		int used = 0;
		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &lo, &hi,
			   &used) < 2 ||
		    !strstr(line + used, memfd_link))
			continue;
		char mf[96];
		snprintf(mf, sizeof mf, "/proc/%d/map_files/%llx-%llx", pid, lo,
			 hi);
		adopt(w, mf, pid, start);
	}
	fclose(f);
}

int gpr__wake_find(int pid, uint64_t start, gpr__wake **out, char *err,
		   size_t errlen)
{
	*out = NULL;
	gpr__wake *w = calloc(1, sizeof *w);
	if (!w)
		return GPR_E_NOMEM;
	w->me = (int32_t)getpid();
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
	DIR *d = opendir(dir);
	if (!d) {
		int e = errno;
		free(w);
		snprintf(err, errlen,
			 "cannot read process %d's descriptors (%s)", pid,
			 strerror(e));
		return e == ENOENT ? GPR_E_NOT_FOUND : GPR_E_PERM;
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char path[sizeof dir + sizeof e->d_name + 1], target[256];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		ssize_t k = readlink(path, target, sizeof target - 1);
		if (k <= 0)
			continue;
		target[k] = '\0';
		if (strcmp(target, memfd_link) == 0)
			adopt(w, path, pid, start);
	}
	closedir(d);
	if (w->n == 0 && geteuid() == 0)
		from_maps(w, pid, start);
	if (w->n == 0) {
		free(w);
		snprintf(err, errlen,
			 "process %d keeps no page for resume on demand (it "
			 "runs neither under `gpureclaim run "
			 "--resume-on-demand` nor with an agent in a notebook)",
			 pid);
		return GPR_E_NOT_FOUND;
	}
	*out = w;
	return 0;
}

void gpr__wake_hold(gpr__wake *w)
{
	for (size_t i = 0; i < w->n; i++) {
		__atomic_store_n(&w->page[i]->watcher, w->me, __ATOMIC_RELEASE);
		__atomic_store_n(&w->page[i]->state, GPURECLAIM_WAKE_SUSPENDED,
				 __ATOMIC_RELEASE);
	}
}

static int asked(const gpr__wake *w)
{
	for (size_t i = 0; i < w->n; i++)
		if (__atomic_load_n(&w->page[i]->state, __ATOMIC_ACQUIRE) ==
		    GPURECLAIM_WAKE_ASKED)
			return 1;
	return 0;
}

int gpr__wake_wait(gpr__wake *w, double seconds)
{
	if (asked(w))
		return 1;
	if (seconds > 0)
		futex(&w->page[0]->state, FUTEX_WAIT, GPURECLAIM_WAKE_SUSPENDED,
		      seconds);
	return asked(w);
}

/* Sets every page this watcher holds to `state`, and answers. */
static void answer_all(gpr__wake *w, uint32_t state, int leave)
{
	for (size_t i = 0; i < w->n; i++) {
		struct gpureclaim_wake_page *p = w->page[i];
		if (__atomic_load_n(&p->watcher, __ATOMIC_ACQUIRE) != w->me)
			continue; /* another watcher took it over */
		if (leave)
			__atomic_store_n(&p->watcher, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&p->state, state, __ATOMIC_RELEASE);
		__atomic_fetch_add(&p->answer, 1, __ATOMIC_ACQ_REL);
		futex(&p->answer, FUTEX_WAKE, INT_MAX, 0);
	}
}

void gpr__wake_answer(gpr__wake *w, int resumed)
{
	for (size_t i = 0; resumed && i < w->n; i++)
		__atomic_fetch_add(&w->page[i]->resumed, 1, __ATOMIC_RELAXED);
	answer_all(
	    w, resumed ? GPURECLAIM_WAKE_RUNNING : GPURECLAIM_WAKE_SUSPENDED,
	    0);
}

uint32_t gpr__wake_asks(const gpr__wake *w)
{
	uint32_t n = 0;
	for (size_t i = 0; i < w->n; i++)
		n += __atomic_load_n(&w->page[i]->asks, __ATOMIC_RELAXED);
	return n;
}

void gpr__wake_release(gpr__wake *w)
{
	if (!w)
		return;
	answer_all(w, GPURECLAIM_WAKE_RUNNING, 1);
	for (size_t i = 0; i < w->n; i++)
		munmap(w->page[i], GPURECLAIM_WAKE_SIZE);
	free(w);
}
