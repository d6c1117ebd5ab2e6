/*
 * The output toolkit's one rule for byte counts shown to people: binary
 * units with one decimal, the unit rising before the figure would print
 * as 1024.0 ("512 B", "1.5 KiB", "80.0 GiB", "16.0 EiB"). Every product
 * uses it (issue 12: binary units everywhere); exact counts go in JSON.
 * And counts of things with their noun in the right number ("1 call",
 * "2 calls").
 */
#ifndef GPR_OUT_FMT_H
#define GPR_OUT_FMT_H

#include <stddef.h>
#include <stdint.h>

/* bytes as above into out (at least 16 bytes; cut to len); returns out. */
char *gpr__fmt_bytes(uint64_t bytes, char *out, size_t len);

/* The same with a sign ("-1.5 KiB"). */
char *gpr__fmt_sbytes(int64_t bytes, char *out, size_t len);

/* A duration in seconds for people: "0.3 ms", "85.6 ms", "1.25 s". */
char *gpr__fmt_secs(double seconds, char *out, size_t len);

/* A share for people, given in percent: one decimal ("33.3%"), "<0.1%"
 * for a share above zero that would show as 0.0%, and ">100%" for more
 * than the whole (a figure gone wrong). */
char *gpr__fmt_percent(double percent, char *out, size_t len);

/*
 * n and the noun that agrees with it ("1 call", "0 calls", "3 calls") into
 * out (cut to len); returns out.
 */
char *gpr__fmt_count(uint64_t n, const char *one, const char *many, char *out,
		     size_t len);

#endif /* GPR_OUT_FMT_H */
