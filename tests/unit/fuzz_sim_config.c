/*
 * libFuzzer target: the GPURECLAIM_SIM parser (sim/config.c, docs/sim.md).
 * Whatever the text, it must not crash, and what it accepts must keep the
 * parser's promises: GPU indexes below `gpus`, `context` and each extra
 * process within `memory`, the extras of a GPU within it together, no pid
 * twice in one list of one GPU; what it refuses has a one-line reason.
 * It aborts otherwise. The `fuzz` suite (part of `make check`) runs it
 * over tests/unit/corpus_sim/; scripts/fuzz-long.sh runs it for longer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *text, const char *what)
{
	fprintf(stderr, "GPURECLAIM_SIM='%s': %s\n", text, what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct sim__config c;
	char why[256];
	memset(why, 'x', sizeof why);
	if (sim__config_parse(text, &c, why, sizeof why) != 0) {
		if (c.ok || !memchr(why, '\0', sizeof why) || !why[0] ||
		    strchr(why, '\n'))
			broken(text, "refused without a one-line reason");
		free(text);
		return 0;
	}
	if (!c.ok || c.gpus < 1 || c.gpus > SIM_MAX_GPUS)
		broken(text, "accepted with gpus out of range");
	if (c.memory == 0 || c.context > c.memory)
		broken(text, "accepted with memory or context out of range");
	if (c.broken_mask >> c.gpus)
		broken(text, "accepted with a broken GPU beyond gpus");
	for (int g = 0; g < c.gpus; g++) {
		uint64_t sum = 0;
		for (int i = 0; i < c.nextra; i++) {
			const struct sim__extra *e = &c.extra[i];
			if (e->gpu < 0 || e->gpu >= c.gpus || e->pid == 0)
				broken(text, "accepted with an extra on no GPU "
					     "or pid 0");
			if (e->gpu != g)
				continue;
			if (e->bytes > c.memory ||
			    __builtin_add_overflow(sum, e->bytes, &sum))
				broken(text,
				       "accepted with an extra beyond memory");
			for (int j = 0; j < i; j++)
				if (c.extra[j].gpu == g &&
				    c.extra[j].pid == e->pid &&
				    c.extra[j].graphics == e->graphics)
					broken(text, "accepted with a pid "
						     "twice in one list");
		}
		if (sum > c.memory || sum != sim__extra_bytes(&c, g))
			broken(
			    text,
			    "accepted with the extras of a GPU beyond memory");
	}
	free(text);
	return 0;
}
