/*
 * libFuzzer target: the agent's answers as the C client reads them
 * (cli/agent_client.c, docs/agent.md "The protocol"). Whatever line an
 * agent sends, the client must not crash and must keep its promises:
 * a failure is one of the six kinds with a one-line, terminal-safe
 * reason; an answer taken has its result inside the line; what the
 * commands read from it (the flat integer members, the report's text, the
 * result's JSON) comes out terminal-safe. It aborts otherwise. The `fuzz`
 * suite (part of `make check`) runs it over tests/cli/corpus_agent/;
 * scripts/fuzz-long.sh runs it for longer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/agent_client.h"
#include "out/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what)
{
	fprintf(stderr, "agent answer: %s\n", what);
	abort();
}

/* Every character of s[0..n) is valid UTF-8 and shown as itself by the
 * terminal-safe rule; a newline too where lines is set. */
static void safe(const char *s, size_t n, int lines, const char *what)
{
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		if (lines && s[i] == '\n') {
			i++;
			continue;
		}
		size_t len = s[i] ? gpr__utf8_len(s + i, &cp) : 0;
		if (len == 0 || i + len > n || gpr__text_unsafe(cp))
			broken(what);
		i += len;
	}
}

static const char *const kinds[] = {"no_agent", "refused",    "timeout",
				    "died",	"bad_answer", "error"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gpr_cli_agent_reply r;
	if (gpr_cli_agent_answer(4242, (const char *)data, size, &r) != 0) {
		int known = 0;
		for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
			known |= r.kind && strcmp(r.kind, kinds[i]) == 0;
		if (!known)
			broken("a failure of no known kind");
		if (!memchr(r.error, '\0', sizeof(r.error)) || !r.error[0])
			broken("a failure without a reason");
		safe(r.error, strlen(r.error), 0, "a reason not one safe line");
		gpr_cli_agent_reply_free(&r);
		return 0;
	}
	const char *line = r.line.data, *end = line + r.line.len;
	if (!r.result || r.result < line || r.result_end > end ||
	    r.result >= r.result_end)
		broken("a result outside the answer");
	long long n[64];
	static const char *const members[] = {"groups", "returned", "ordinals",
					      "release_seconds", "text"};
	for (size_t i = 0; i < sizeof(members) / sizeof(*members); i++) {
		const char *v, *e;
		if (gpr_cli_agent_member(&r, members[i], &v, &e) != 0)
			continue;
		if (v < line || e > end || v >= e)
			broken("a member outside the answer");
		if (gpr_cli_agent_ints(v, e, n, 64) > 64)
			broken("more integers than asked for");
	}
	struct gpr__buf out = {0};
	gpr_cli_agent_json_put(&out, r.result, r.result_end);
	if (!out.oom)
		safe(out.data ? out.data : "", out.len, 0,
		     "the result's JSON not terminal-safe");
	gpr__buf_free(&out);
	if (r.text) {
		gpr_cli_agent_text_put(&out, r.text, r.end);
		if (!out.oom)
			safe(out.data ? out.data : "", out.len, 1,
			     "the report's text not terminal-safe");
		gpr__buf_free(&out);
	}
	gpr_cli_agent_reply_free(&r);
	return 0;
}
