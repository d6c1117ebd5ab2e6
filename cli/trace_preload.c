/*
 * How `gpureclaim trace` puts the tracer in front of a program's
 * LD_PRELOAD (where it finds the tracer and CUPTI: locate.c).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

/*
 * Whether an LD_PRELOAD entry is a sanitizer's runtime, which must stay
 * first: ASan refuses to run when another object comes before it.
 */
static int sanitizer(const char *entry, size_t len)
{
	static const char *const names[] = {"libasan.so", "libtsan.so",
					    "libubsan.so", "libhwasan.so",
					    "libclang_rt."};
	const char *b = entry;
	for (size_t i = 0; i < len; i++)
		if (entry[i] == '/')
			b = entry + i + 1;
	size_t bl = len - (size_t)(b - entry);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i]);
		if (bl >= n && strncmp(b, names[i], n) == 0)
			return 1;
	}
	return 0;
}

int gpr_cli_preload_value(const char *tracer, const char *old, char *out,
			  size_t len)
{
	size_t at = 0;
	out[0] = '\0';
	/* the sanitizer runtimes of the old value, then the tracer, then
	 * the rest (entries separated by ':' or spaces, as ld.so reads) */
	for (int pass = 0; pass < 3; pass++) {
		if (pass == 1) {
			int k = snprintf(out + at, len - at, "%s%s",
					 at ? ":" : "", tracer);
			if (k < 0 || (size_t)k >= len - at)
				return -1;
			at += (size_t)k;
			continue;
		}
		for (const char *p = old ? old : ""; *p;) {
			size_t n = strcspn(p, ": ");
			if (n && (pass == 0) == sanitizer(p, n) &&
			    !(strlen(tracer) == n &&
			      strncmp(p, tracer, n) == 0)) {
				int k = snprintf(out + at, len - at, "%s%.*s",
						 at ? ":" : "", (int)n, p);
				if (k < 0 || (size_t)k >= len - at)
					return -1;
				at += (size_t)k;
			}
			p += n;
			p += strspn(p, ": ");
		}
	}
	return 0;
}
