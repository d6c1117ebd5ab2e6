/*
 * GPURECLAIM_SIM parsing (docs/sim.md). Strict on purpose: a typo must
 * never silently run the defaults, so anything unknown or out of range
 * makes the whole configuration invalid and every call of the sim fail.
 */
#include "sim.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The reason, one line: controls of the quoted text show as '?'. */
static int bad(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	for (char *p = why; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return -1;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* A whole decimal number, digits only (no sign, no blanks). */
static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	if (!*s)
		return -1;
	uint64_t v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		unsigned d = (unsigned)(*s - '0');
		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {
	    {"", 1},
	    {"B", 1},
	    {"K", 1ULL << 10},
	    {"KiB", 1ULL << 10},
	    {"M", 1ULL << 20},
	    {"MiB", 1ULL << 20},
	    {"G", 1ULL << 30},
	    {"GiB", 1ULL << 30},
	    {"T", 1ULL << 40},
	    {"TiB", 1ULL << 40},
	    {"KB", 1000ULL},
	    {"MB", 1000ULL * 1000},
	    {"GB", 1000ULL * 1000 * 1000},
	    {"TB", 1000ULL * 1000 * 1000 * 1000},
	};
	size_t ndig = 0;
	while (s[ndig] >= '0' && s[ndig] <= '9')
		ndig++;
	if (ndig == 0 || ndig > 20)
		return -1;
	char digits[21];
	memcpy(digits, s, ndig);
	digits[ndig] = '\0';
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strcmp(s + ndig, units[i].suffix) != 0)
			continue;
		uint64_t v;
		if (parse_uint(digits, UINT64_MAX / units[i].mult, &v))
			return -1;
		*out = v * units[i].mult;
		return 0;
	}
	return -1;
}

/*
 * The next item of a `sep`-separated list, cut in place; "" for an empty
 * one (two separators in a row), NULL after the last.
 */
static char *next_item(char **rest, char sep)
{
	char *it = *rest;
	if (!it)
		return NULL;
	char *end = strchr(it, sep);
	if (end) {
		*end = '\0';
		*rest = end + 1;
	} else {
		*rest = NULL;
	}
	return trim(it);
}

static int parse_faults(char *v, struct sim__config *c, char *why,
			size_t whylen)
{
	static const struct {
		const char *name;
		unsigned bit;
	} names[] = {
	    {"nvml-absent", SIM_FAULT_NVML_ABSENT},
	    {"stride32", SIM_FAULT_STRIDE32},
	    {"insufficient-once", SIM_FAULT_INSUFFICIENT_ONCE},
	    {"mig", SIM_FAULT_MIG},
	    {"foreign-pid", SIM_FAULT_FOREIGN_PID},
	    {"memory-v1", SIM_FAULT_MEMORY_V1},
	    {"procs-v2", SIM_FAULT_PROCS_V2},
	    {"unterminated", SIM_FAULT_UNTERMINATED},
	    {"garbage-bytes", SIM_FAULT_GARBAGE_BYTES},
	    {"checkpoint-fails", SIM_FAULT_CHECKPOINT_FAILS},
	    {"checkpoint-denied", SIM_FAULT_CHECKPOINT_DENIED},
	    {"lock-timeout", SIM_FAULT_LOCK_TIMEOUT},
	};
	char *rest = v;
	int item = 0;
	for (char *f; (f = next_item(&rest, ','));) {
		item++;
		if (!*f)
			return bad(why, whylen, "fault item %d is empty", item);
		if (strncmp(f, "broken:", 7) == 0) {
			uint64_t i;
			if (parse_uint(f + 7, SIM_MAX_GPUS - 1, &i))
				return bad(
				    why, whylen,
				    "fault item %d ('%s'): bad GPU index", item,
				    f);
			c->broken_mask |= 1u << i;
			continue;
		}
		size_t k = 0;
		while (k < sizeof names / sizeof names[0] &&
		       strcmp(f, names[k].name) != 0)
			k++;
		if (k == sizeof names / sizeof names[0])
			return bad(why, whylen,
				   "fault item %d ('%s') is not a fault", item,
				   f);
		c->faults |= names[k].bit;
	}
	return 0;
}

/* GPU:PID[g]:SIZE, item number n of all extra items */
static int parse_extra_item(char *item, int n, struct sim__config *c, char *why,
			    size_t whylen)
{
	char text[96];
	snprintf(text, sizeof text, "%s", item);
	if (!*item)
		return bad(why, whylen, "extra item %d is empty", n);
	char *p1 = strchr(item, ':');
	char *p2 = p1 ? strchr(p1 + 1, ':') : NULL;
	if (!p1 || !p2 || strchr(p2 + 1, ':'))
		return bad(why, whylen,
			   "extra item %d ('%s') is not GPU:PID:SIZE", n, text);
	*p1 = *p2 = '\0';
	char *gpu = trim(item), *pid = trim(p1 + 1), *size = trim(p2 + 1);
	if (c->nextra == SIM_MAX_EXTRA)
		return bad(why, whylen, "more than %d extra processes",
			   SIM_MAX_EXTRA);
	struct sim__extra *e = &c->extra[c->nextra];
	uint64_t v;
	if (parse_uint(gpu, SIM_MAX_GPUS - 1, &v))
		return bad(why, whylen, "extra item %d ('%s'): bad GPU index",
			   n, text);
	e->gpu = (int)v;
	size_t len = strlen(pid);
	e->graphics = len > 0 && pid[len - 1] == 'g';
	if (e->graphics)
		pid[len - 1] = '\0';
	if (parse_uint(pid, 0x7fffffff, &v) || v == 0)
		return bad(why, whylen, "extra item %d ('%s'): bad pid", n,
			   text);
	e->pid = (uint32_t)v;
	if (parse_size(size, &e->bytes))
		return bad(why, whylen, "extra item %d ('%s'): bad size", n,
			   text);
	for (int i = 0; i < c->nextra; i++) {
		const struct sim__extra *o = &c->extra[i];
		if (o->gpu == e->gpu && o->pid == e->pid &&
		    o->graphics == e->graphics)
			return bad(why, whylen,
				   "extra item %d ('%s'): pid %u is already "
				   "in GPU %d's %s list (item %d)",
				   n, text, e->pid, e->gpu,
				   e->graphics ? "graphics" : "compute", i + 1);
	}
	c->nextra++;
	return 0;
}

static int parse_extra(char *v, struct sim__config *c, char *why, size_t whylen)
{
	char *rest = v;
	for (char *it; (it = next_item(&rest, ','));) {
		if (parse_extra_item(it, c->nextra + 1, c, why, whylen))
			return -1;
	}
	return 0;
}

static int valid_state_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64 || s[0] == '.')
		return 0;
	for (; *s; s++) {
		if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
			return 0;
	}
	return 1;
}

static int parse_item(char *key, char *val, struct sim__config *c, char *why,
		      size_t whylen)
{
	uint64_t v;
	if (strcmp(key, "gpus") == 0) {
		if (parse_uint(val, SIM_MAX_GPUS, &v) || v < 1)
			return bad(why, whylen,
				   "gpus must be 1 to %d, not '%s'",
				   SIM_MAX_GPUS, val);
		c->gpus = (int)v;
	} else if (strcmp(key, "memory") == 0) {
		if (parse_size(val, &c->memory) || c->memory == 0)
			return bad(why, whylen, "bad size '%s' for memory",
				   val);
	} else if (strcmp(key, "context") == 0) {
		if (parse_size(val, &c->context))
			return bad(why, whylen, "bad size '%s' for context",
				   val);
	} else if (strcmp(key, "name") == 0) {
		if (!*val || strlen(val) >= sizeof c->name)
			return bad(why, whylen, "name must be 1 to %zu bytes",
				   sizeof c->name - 1);
		strcpy(c->name, val);
	} else if (strcmp(key, "state") == 0) {
		if (!valid_state_name(val))
			return bad(why, whylen,
				   "state '%s' must be 1 to 64 of "
				   "[A-Za-z0-9._-], not starting with '.'",
				   val);
		strcpy(c->state, val);
	} else if (strcmp(key, "checkpoint_rate") == 0 ||
		   strcmp(key, "restore_rate") == 0) {
		uint64_t *rate =
		    key[0] == 'c' ? &c->checkpoint_rate : &c->restore_rate;
		if (parse_size(val, rate))
			return bad(why, whylen, "bad size '%s' for %s", val,
				   key);
	} else if (strcmp(key, "fault") == 0) {
		return parse_faults(val, c, why, whylen);
	} else if (strcmp(key, "extra") == 0) {
		return parse_extra(val, c, why, whylen);
	} else {
		return bad(why, whylen, "unknown key '%s'", key);
	}
	return 0;
}

/* Checks that need every item: indexes against the final `gpus`. */
static int check_ranges(struct sim__config *c, char *why, size_t whylen)
{
	if (c->broken_mask >> c->gpus)
		return bad(why, whylen, "fault broken: names a GPU >= gpus=%d",
			   c->gpus);
	for (int i = 0; i < c->nextra; i++) {
		if (c->extra[i].gpu >= c->gpus)
			return bad(why, whylen,
				   "extra item %d is on GPU %d but gpus=%d",
				   i + 1, c->extra[i].gpu, c->gpus);
		if (c->extra[i].bytes > c->memory)
			return bad(why, whylen,
				   "extra item %d holds %llu bytes, more than "
				   "the GPU's memory (%llu)",
				   i + 1, (unsigned long long)c->extra[i].bytes,
				   (unsigned long long)c->memory);
	}
	/* what the extra processes hold together fits each GPU */
	for (int g = 0; g < c->gpus; g++) {
		uint64_t sum = 0;
		for (int i = 0; i < c->nextra; i++)
			if (c->extra[i].gpu == g &&
			    __builtin_add_overflow(sum, c->extra[i].bytes,
						   &sum))
				sum = UINT64_MAX;
		if (sum > c->memory)
			return bad(why, whylen,
				   "extra items on GPU %d hold %llu bytes "
				   "together, more than its memory (%llu)",
				   g, (unsigned long long)sum,
				   (unsigned long long)c->memory);
	}
	if (c->context > c->memory)
		return bad(why, whylen, "context is larger than memory");
	return 0;
}

int sim__config_parse(const char *text, struct sim__config *c, char *why,
		      size_t whylen)
{
	memset(c, 0, sizeof *c);
	c->gpus = 1;
	c->memory = 80ULL << 30;
	c->context = 512ULL << 20;
	strcpy(c->name, "Simulated GPU");
	strcpy(c->state, "default");
	why[0] = '\0';
	char *copy = strdup(text ? text : "");
	if (!copy)
		return bad(why, whylen, "out of memory");
	int r = 0;
	char *save = NULL;
	for (char *it = strtok_r(copy, ";", &save); it && !r;
	     it = strtok_r(NULL, ";", &save)) {
		it = trim(it);
		if (!*it)
			continue;
		char *eq = strchr(it, '=');
		if (!eq) {
			r = bad(why, whylen, "item '%s' has no '='", it);
			break;
		}
		*eq = '\0';
		r = parse_item(trim(it), trim(eq + 1), c, why, whylen);
	}
	free(copy);
	if (!r)
		r = check_ranges(c, why, whylen);
	c->ok = r == 0;
	return r;
}

static struct sim__config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static void config_load(void)
{
	char why[256];
	if (sim__config_parse(getenv("GPURECLAIM_SIM"), &config, why,
			      sizeof why))
		fprintf(stderr, "gpureclaim-sim: bad GPURECLAIM_SIM: %s\n",
			why);
}

const struct sim__config *sim__config(void)
{
	pthread_once(&config_once, config_load);
	return &config;
}

uint64_t sim__extra_bytes(const struct sim__config *c, int gpu)
{
	uint64_t sum = 0;
	for (int i = 0; i < c->nextra; i++) {
		if (c->extra[i].gpu == gpu)
			sum += c->extra[i].bytes;
	}
	return sum;
}

int sim__broken(const struct sim__config *c, int gpu)
{
	return (c->broken_mask >> gpu) & 1u;
}
