/* The byte formatter, durations, shares and the counted nouns of fmt.h. */
#include "fmt.h"

#include <inttypes.h>
#include <stdio.h>

char *gpr__fmt_bytes(uint64_t bytes, char *out, size_t len)
{
	static const char *const units[] = {"KiB", "MiB", "GiB",
					    "TiB", "PiB", "EiB"};
	if (bytes < 1024) {
		snprintf(out, len, "%" PRIu64 " B", bytes);
		return out;
	}
	double v = (double)bytes / 1024.0;
	size_t u = 0;
	/* 1023.95 KiB would print as "1024.0 KiB": move up a unit first */
	while (v >= 1023.95 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024.0;
		u++;
	}
	snprintf(out, len, "%.1f %s", v, units[u]);
	return out;
}

char *gpr__fmt_sbytes(int64_t bytes, char *out, size_t len)
{
	if (bytes >= 0)
		return gpr__fmt_bytes((uint64_t)bytes, out, len);
	if (len < 2) {
		if (len)
			out[0] = '\0';
		return out;
	}
	out[0] = '-';
	gpr__fmt_bytes(-(uint64_t)bytes, out + 1, len - 1);
	return out;
}

char *gpr__fmt_count(uint64_t n, const char *one, const char *many, char *out,
		     size_t len)
{
	snprintf(out, len, "%" PRIu64 " %s", n, n == 1 ? one : many);
	return out;
}

char *gpr__fmt_secs(double seconds, char *out, size_t len)
{
	if (!(seconds >= 0)) /* negative or not a number */
		seconds = 0;
	if (seconds < 1.0)
		snprintf(out, len, "%.1f ms", seconds * 1e3);
	else
		snprintf(out, len, "%.2f s", seconds);
	return out;
}

char *gpr__fmt_percent(double percent, char *out, size_t len)
{
	if (percent > 0 && percent < 0.1)
		snprintf(out, len, "<0.1%%");
	else if (percent > 100.0)
		/* more than the whole: a figure gone wrong (a garbage NVML),
		 * said in a width a column can hold, not as 15 digits */
		snprintf(out, len, ">100%%");
	else
		snprintf(out, len, "%.1f%%", percent);
	return out;
}
