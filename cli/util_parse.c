/* Parsing the subcommands' arguments. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int gpr_cli_option_error(const char *cmd, int c, char **argv)
{
	char opt[3] = {'-', (char)optopt, '\0'};
	const char *name = c != ':' && optopt ? opt : argv[optind - 1];
	return gpr_cli_usage_error(
	    cmd, c == ':' ? "option '%s' needs a value" : "unknown option '%s'",
	    name);
}

int gpr_cli_usage_error(const char *cmd, const char *fmt, const char *arg)
{
	fprintf(stderr, "gpureclaim %s: ", cmd);
	fprintf(stderr, fmt, arg ? arg : "");
	fprintf(stderr, "\nRun 'gpureclaim %s --help' for the options.\n", cmd);
	return GPR_CLI_USAGE;
}

/* "gpureclaim CMD: <what>, not 'ARG'" and where the options are. */
static int bad(const char *cmd, const char *what, const char *arg)
{
	char fmt[256];
	snprintf(fmt, sizeof(fmt), "%s, not '%%s'", what);
	return gpr_cli_usage_error(cmd, fmt, arg);
}

int gpr_cli_opt_seconds(const char *cmd, const char *opt, const char *arg,
			double *out)
{
	char what[160];
	if (gpr_cli_parse_seconds(arg, out) == 0)
		return GPR_CLI_OK;
	snprintf(what, sizeof(what),
		 "%s needs a number of seconds from 0.1 to 86400, digits with "
		 "an optional fraction (0.5, 2)",
		 opt);
	return bad(cmd, what, arg);
}

int gpr_cli_opt_gpus(const char *cmd, const char *arg, int *list, int *n,
		     int cap)
{
	if (gpr_cli_parse_index_list(arg, list, n, cap) == 0)
		return GPR_CLI_OK;
	return bad(cmd, "-i/--gpu needs GPU indexes (0, 1, 0,2)", arg);
}

int gpr_cli_opt_color(const char *cmd, int argc, char **argv,
		      const char **color)
{
	const char *arg = optarg;
	/* `--color never` as `--color=never`: the next word is the value
	 * when it is one (getopt gives an optional value only after '=') */
	if (!arg && optind < argc && gpr_cli_color(argv[optind], -1) >= 0)
		arg = argv[optind++];
	*color = arg ? arg : "always";
	if (gpr_cli_color(*color, STDOUT_FILENO) >= 0)
		return GPR_CLI_OK;
	return bad(cmd, "--color takes always, never or auto", arg);
}

int gpr_cli_number_prefix(const char *s, double *v)
{
	size_t i = strspn(s, "0123456789");
	if (i == 0)
		return -1;
	if (s[i] == '.') {
		size_t f = strspn(s + i + 1, "0123456789");
		if (f == 0)
			return -1;
		i += 1 + f;
	}
	*v = strtod(s, NULL);
	return (int)i;
}

double gpr_cli_parse_duration(const char *s)
{
	double v, mult = 1;
	int i = s ? gpr_cli_number_prefix(s, &v) : -1;
	if (i < 0)
		return -1;
	const char *u = s + i;
	if (!strcmp(u, "") || !strcmp(u, "s"))
		mult = 1;
	else if (!strcmp(u, "m") || !strcmp(u, "min"))
		mult = 60;
	else if (!strcmp(u, "h"))
		mult = 3600;
	else if (!strcmp(u, "d"))
		mult = 86400;
	else
		return -1;
	v *= mult;
	return isfinite(v) && v <= 366.0 * 86400 ? v : -1;
}
