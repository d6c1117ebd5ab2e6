/*
 * The agent's client (cli/agent_client.c): one request to one process's
 * agent, checked as python/gpureclaim/agent/ checks it, and the agents
 * this user may ask. Thread-safe: `ps --explain` asks every agent at once.
 */
#ifndef GPR_CLI_AGENT_CLIENT_H
#define GPR_CLI_AGENT_CLIENT_H

#include <stddef.h>

#include "cli.h"
#include "out/buf.h"

struct gpr_cli_agent_reply {
	/* on failure: no_agent, refused, timeout, died, bad_answer or error
	 * (agent/_protocol.py KINDS), and the one line that says why
	 * ("process N ..."), terminal-safe (src/out/text.h) */
	const char *kind;
	char error[640];
	/* on success: the answer's line, and in it the members read */
	struct gpr__buf line;
	const char *result, *result_end; /* the result's JSON */
	const char *text;		 /* the "text" string, or NULL */
	const char *groups, *groups_end; /* the "groups" array, or NULL */
	const char *end;		 /* of the line */
};

/* Asks pid's agent op with args (a JSON object's members, "" for none),
 * waiting at most timeout seconds in all. GPR_CLI_OK with r's answer, or
 * GPR_CLI_ERROR with r's kind and error; either way free r after. */
int gpr_cli_agent_request(long pid, const char *op, const char *args,
			  double timeout, struct gpr_cli_agent_reply *r);
void gpr_cli_agent_reply_free(struct gpr_cli_agent_reply *r);
/* The same, bounded by deadline (gpr_cli_agent_now's clock) rather than a
 * timeout: the bound of a whole command that asks several agents. Past
 * it, a timeout that says the process was not asked. */
int gpr_cli_agent_request_by(long pid, const char *op, const char *args,
			     double deadline, struct gpr_cli_agent_reply *r);
double gpr_cli_agent_now(void);

/* The checks of gpr_cli_agent_request on an answer's line (n bytes, no
 * newline) from pid, as if it had come from the socket: for the fuzz
 * target (tests/cli/fuzz_agent_answer.c). */
int gpr_cli_agent_answer(long pid, const char *line, size_t n,
			 struct gpr_cli_agent_reply *r);

/* The JSON string opening at s (an answer's "text"), onto o, line by
 * line by the terminal-safe rule (src/out/text.h). */
void gpr_cli_agent_text_put(struct gpr__buf *o, const char *s, const char *end);
/* The JSON value [v, end) of a checked answer onto o, its strings written
 * again by the JSON writer (src/out/json.h): no raw terminal control,
 * C1 or bidi character, no invalid UTF-8. */
void gpr_cli_agent_json_put(struct gpr__buf *o, const char *v, const char *end);

/* The JSON string opening at s, decoded onto o; 0, or -1 if malformed. */
int gpr_cli_agent_string(const char *s, const char *end, struct gpr__buf *o);

/* The integers of the flat JSON array at v (at most cap of them); how
 * many were read (the reading stops at anything else). */
size_t gpr_cli_agent_ints(const char *v, const char *end, long long *out,
			  size_t cap);

/* A top-level member of an answered request: 0 with its value's JSON in
 * [*v, *v_end), or -1 when the answer has no such member. */
int gpr_cli_agent_member(const struct gpr_cli_agent_reply *r, const char *name,
			 const char **v, const char **v_end);

/* The pids of the live agents this user may ask (every user's, as root),
 * in order, malloc'd into *pids (free it); 0. */
int gpr_cli_agent_discover(long **pids, size_t *n);

#endif /* GPR_CLI_AGENT_CLIENT_H */
