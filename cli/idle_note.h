/*
 * gpureclaim's note of idle times, kept across runs of `reclaim --idle`
 * in the records folder (`idle`): a line `PID START SINCE_US` per
 * process, its latest work or when it was first seen idle, for what the
 * driver's own samples no longer reach (reclaim_idle.h).
 */
#ifndef GPR_CLI_IDLE_NOTE_H
#define GPR_CLI_IDLE_NOTE_H

#include <stddef.h>
#include <stdint.h>

struct gpr_cli_idle_note_entry {
	int pid;
	uint64_t start, since_us; /* idle since (the latest work seen) */
};

struct gpr_cli_idle_note {
	struct gpr_cli_idle_note_entry *v;
	size_t n, cap;
};

/* Adds an entry: 0, or -1 out of memory (the entry is then left out). */
int gpr_cli_idle_note_add(struct gpr_cli_idle_note *m, int pid, uint64_t start,
			  uint64_t since);
/* The entry of pid started at start, or NULL. */
struct gpr_cli_idle_note_entry *
gpr_cli_idle_note_find(struct gpr_cli_idle_note *m, int pid, uint64_t start);
/* The note in dir, as a record is read: a regular file of this user,
 * not a link, bounded; a line that does not parse is left out. */
void gpr_cli_idle_note_read(const char *dir, struct gpr_cli_idle_note *m);
/* Writes the note (a temporary file renamed over it); a failure leaves
 * the one before. */
void gpr_cli_idle_note_write(const char *dir,
			     const struct gpr_cli_idle_note *m);

#endif /* GPR_CLI_IDLE_NOTE_H */
