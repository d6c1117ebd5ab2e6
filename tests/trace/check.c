/* What the trace test programs share (check.h). */
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int gpr_test_failures;

void gpr_test_run_stderr(struct gpr_test_run *r, const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(r->err, 1, sizeof(r->err) - 1, f) : 0;
	r->err[n] = '\0';
	if (f)
		fclose(f);
}

int gpr_test_exited(const struct gpr_test_run *r, int code)
{
	if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == code)
		return 1;
	fprintf(stderr, "status %#x, expected exit %d; stderr: %s\n", r->status,
		code, r->err);
	return 0;
}

int gpr_test_load(const char *path, struct gpr_trace *t)
{
	char err[256];
	if (gpr_trace_load(path, t, err, sizeof(err)) == 0)
		return 0;
	fprintf(stderr, "%s: %s\n", path, err);
	gpr_test_failures++;
	return -1;
}

int gpr_test_finish(const char *name, const char *dir)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (!gpr_test_failures && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	printf("%s: %s (%d failures)%s%s\n", name,
	       gpr_test_failures ? "FAIL" : "ok", gpr_test_failures,
	       gpr_test_failures ? "; files kept in " : "",
	       gpr_test_failures ? dir : "");
	return gpr_test_failures ? 1 : 0;
}

int gpr_test_setenv_list(const char *list)
{
	char kv[2048];
	int n = snprintf(kv, sizeof(kv), "%s", list ? list : "");
	if (n < 0 || (size_t)n >= sizeof(kv))
		return -1;
	for (char *save = NULL, *tok = strtok_r(kv, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			return -1;
		*eq = '\0';
		setenv(tok, eq + 1, 1);
	}
	return 0;
}
