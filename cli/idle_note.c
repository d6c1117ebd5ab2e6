/* gpureclaim's note of idle times (idle_note.h). */
#include "idle_note.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MEMO_NAME "idle"
#define MEMO_MAX (1 << 20)

int gpr_cli_idle_note_add(struct gpr_cli_idle_note *m, int pid, uint64_t start,
			  uint64_t since)
{
	if (m->n == m->cap) {
		size_t c = m->cap ? 2 * m->cap : 64;
		struct gpr_cli_idle_note_entry *g =
		    realloc(m->v, c * sizeof *g);
		if (!g)
			return -1;
		m->v = g;
		m->cap = c;
	}
	m->v[m->n++] = (struct gpr_cli_idle_note_entry){pid, start, since};
	return 0;
}

struct gpr_cli_idle_note_entry *
gpr_cli_idle_note_find(struct gpr_cli_idle_note *m, int pid, uint64_t start)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].pid == pid && m->v[i].start == start)
			return &m->v[i];
	return NULL;
}

void gpr_cli_idle_note_read(const char *dir, struct gpr_cli_idle_note *m)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/" MEMO_NAME, dir);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	char *text = NULL;
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == getuid() && st.st_size <= MEMO_MAX &&
	    (text = malloc((size_t)st.st_size + 1)))
		n = read(fd, text, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		free(text);
		return;
	}
	text[n] = '\0';
	for (char *l = text; *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		int pid, used = 0;
		unsigned long long start, since;
		if (sscanf(l, "%d %llu %llu%n", &pid, &start, &since, &used) ==
			3 &&
		    !l[used] && pid > 0)
			gpr_cli_idle_note_add(m, pid, start, since);
		l = nl ? nl + 1 : l + strlen(l);
	}
	free(text);
}

void gpr_cli_idle_note_write(const char *dir, const struct gpr_cli_idle_note *m)
{
	char path[PATH_MAX + 16], tmp[PATH_MAX + 48];
	snprintf(path, sizeof path, "%s/" MEMO_NAME, dir);
	snprintf(tmp, sizeof tmp, "%s/." MEMO_NAME ".%ld.tmp", dir,
		 (long)getpid());
	unlink(tmp);
	FILE *f = NULL;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		      0600);
	if (fd >= 0)
		f = fdopen(fd, "w");
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (size_t i = 0; i < m->n; i++)
		fprintf(f, "%d %llu %llu\n", m->v[i].pid,
			(unsigned long long)m->v[i].start,
			(unsigned long long)m->v[i].since_us);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		unlink(tmp);
}
