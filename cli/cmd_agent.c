/*
 * `gpureclaim release --pid N` and `gpureclaim explain --pid N`: one
 * request through the agent's client in C (cli/agent_client.c, which
 * `ps --explain` uses too; the protocol is python/gpureclaim/agent/'s).
 *
 * Why in C: the target is the in-process release plus 5 ms, and a
 * Python interpreter's start with the package's import costs more than
 * that on its own. So the one-process commands are a connect, a line out
 * and a line in; the help, and the forms without --pid, stay in Python
 * (cmd_python.c), and `python3 -m gpureclaim release --pid N` runs this
 * command, so both spellings are one program.
 *
 * The client's checks and bounds are said in cli/agent_client.c; a failure
 * is its one line, after "gpureclaim CMD: ".
 */
#include "agent_client.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "out/buf.h"

static struct env {
	const char *cmd; /* "release" or "explain" */
	long pid;	 /* --pid N */
	int json;	 /* --json: the result's JSON document */
	double timeout;	 /* --timeout SECONDS */
	int workspaces;	 /* release --workspaces */
	int collect;	 /* release --collect: -1 auto, 0 never, 1 always */
	int holders;	 /* explain --holders */
} env;

/* ---------------- the request ---------------- */

static void request_args(struct gpr__buf *r)
{
	const char *sep = "";
	if (env.workspaces) {
		gpr__buf_puts(r, "\"workspaces\":true");
		sep = ",";
	}
	if (env.collect >= 0) {
		gpr__buf_printf(r, "%s\"collect\":%s", sep,
				env.collect ? "true" : "false");
		sep = ",";
	}
	if (env.holders)
		gpr__buf_printf(r, "%s\"holders\":true", sep);
}

static int ask(void)
{
	struct gpr__buf args = {0};
	struct gpr_cli_agent_reply r;
	request_args(&args);
	int rc = gpr_cli_agent_request(env.pid, env.cmd, gpr__buf_str(&args),
				       env.timeout, &r);
	gpr__buf_free(&args);
	if (rc != GPR_CLI_OK) {
		fprintf(stderr, "gpureclaim %s: %s\n", env.cmd, r.error);
		gpr_cli_agent_reply_free(&r);
		return rc;
	}
	/* what the process wrote, as the terminal may safely show it
	 * (agent_client.h) */
	struct gpr__buf out = {0};
	if (env.json || !r.text) {
		gpr_cli_agent_json_put(&out, r.result, r.result_end);
	} else {
		gpr_cli_agent_text_put(&out, r.text, r.end);
		while (out.len && out.data[out.len - 1] == '\n')
			out.len--;
	}
	gpr__buf_puts(&out, "\n");
	rc = gpr__buf_write(&out, stdout) == 0 ? GPR_CLI_OK : GPR_CLI_ERROR;
	gpr__buf_free(&out);
	gpr_cli_agent_reply_free(&r);
	return rc;
}

/* ---------------- the options ---------------- */

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "gpureclaim %s: ", env.cmd);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'gpureclaim %s --help' for the options.\n",
		env.cmd);
	return GPR_CLI_USAGE;
}

int gpr_cli_has_pid(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strncmp(argv[i], "--pid", 5) == 0 &&
		    (argv[i][5] == '\0' || argv[i][5] == '='))
			return 1;
	return 0;
}

int gpr_cli_agent_ask(int argc, char **argv)
{
	enum {
		OPT_PID = 256,
		OPT_JSON,
		OPT_TIMEOUT,
		OPT_WS,
		OPT_COLLECT,
		OPT_HOLDERS
	};
	static const struct option release_opts[] = {
	    {"pid", required_argument, NULL, OPT_PID},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"workspaces", no_argument, NULL, OPT_WS},
	    {"collect", required_argument, NULL, OPT_COLLECT},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static const struct option explain_opts[] = {
	    {"pid", required_argument, NULL, OPT_PID},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"holders", no_argument, NULL, OPT_HOLDERS},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int release = strcmp(argv[0], "release") == 0;
	env = (struct env){.cmd = release ? "release" : "explain",
			   .pid = -1,
			   .timeout = release ? 30 : 10,
			   .collect = -1};
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h",
				release ? release_opts : explain_opts, NULL)) !=
	       -1) {
		char *end;
		switch (c) {
		case 'h':
			/* one help, with the Python side's (help_python.c) */
			return gpr_cli_python_help(argc, argv);
		case OPT_PID:
			errno = 0;
			env.pid = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || env.pid <= 0 ||
			    env.pid > 0x7fffffff)
				return usage_error("--pid needs a process id "
						   "(a positive number), not "
						   "'%s'",
						   optarg);
			break;
		case OPT_JSON:
			env.json = 1;
			break;
		case OPT_TIMEOUT:
			if (gpr_cli_parse_seconds(optarg, &env.timeout) != 0)
				return usage_error(
				    "--timeout needs a number of seconds "
				    "from 0.1 to 86400 (0.5, 10), not '%s'",
				    optarg);
			break;
		case OPT_WS:
			env.workspaces = 1;
			break;
		case OPT_COLLECT:
			if (strcmp(optarg, "auto") == 0)
				env.collect = -1;
			else if (strcmp(optarg, "always") == 0)
				env.collect = 1;
			else if (strcmp(optarg, "never") == 0)
				env.collect = 0;
			else
				return usage_error("--collect needs auto, "
						   "always or never, not '%s'",
						   optarg);
			break;
		case OPT_HOLDERS:
			env.holders = 1;
			break;
		case ':':
			return usage_error("%s needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (env.pid < 0)
		return usage_error("%s", "--pid needs a process id");
	return ask();
}
