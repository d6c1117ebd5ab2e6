/* Parsing the subcommands' arguments. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpr_cli_parse_seconds(const char *s, double *out)
{
	if (!s || !*s)
		return -1;
	/* digits, then at most one '.' and digits: no blank, sign, hex, e */
	size_t i = strspn(s, "0123456789");
	if (i == 0 || (s[i] == '.' && strspn(s + i + 1, "0123456789") == 0))
		return -1;
	if (s[i] == '.')
		i += 1 + strspn(s + i + 1, "0123456789");
	if (s[i] != '\0')
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0')
		return -1;
	if (!isfinite(v) || v < 0.1 || v > 86400)
		return -1;
	*out = v;
	return 0;
}

int gpr_cli_parse_index_list(const char *s, int *list, int *n, int cap)
{
	const char *p = s;
	if (!*p)
		return -1;
	for (;;) {
		if (*p < '0' || *p > '9')
			return -1; /* no sign, no space, no empty item */
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (errno != 0 || v > INT_MAX)
			return -1;
		int dup = 0;
		for (int i = 0; i < *n; i++)
			dup |= list[i] == (int)v;
		if (!dup) {
			if (*n >= cap)
				return -1;
			list[(*n)++] = (int)v;
		}
		if (*end == '\0')
			return 0;
		if (*end != ',')
			return -1;
		p = end + 1;
	}
}
