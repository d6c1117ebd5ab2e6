/*
 * The C client of the agent (cli/agent_client.c) on one request, for the
 * replay of tests/agent_protocol/'s recorded exchanges
 * (tests/cli/test_agent_protocol.py): asks PID's agent OP with ARGS (the
 * members of the args object) within TIMEOUT seconds and prints what the
 * client made of the answer, one line: "ok RESULT" (the result's JSON as
 * it came) or "fail KIND<TAB>LINE". Exit status 0 either way, 2 bad usage.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../cli/agent_client.h"

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: agent_replay PID OP ARGS TIMEOUT\n");
		return 2;
	}
	struct gpr_cli_agent_reply r;
	int rc = gpr_cli_agent_request(strtol(argv[1], NULL, 10), argv[2],
				       argv[3], strtod(argv[4], NULL), &r);
	if (rc == GPR_CLI_OK)
		printf("ok %.*s\n", (int)(r.result_end - r.result), r.result);
	else
		printf("fail %s\t%s\n", r.kind, r.error);
	gpr_cli_agent_reply_free(&r);
	return 0;
}
