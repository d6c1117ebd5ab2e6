/*
 * The smallest use of the C API: which GPUs this process has opened, one
 * release, its report. Build: cc minimal.c -Iinclude libgpureclaim.a -ldl
 * -lpthread. In a process that never loaded CUDA it prints a 0-byte report.
 */
#include <stdio.h>

#include "gpureclaim.h"

int main(void)
{
	gpr_ctx *ctx = NULL;
	int rc = gpr_open(NULL, &ctx);
	if (rc) {
		fprintf(stderr, "gpr_open: %s\n", gpr_strerror(rc));
		return 1;
	}
	int devices[16], n = 0;
	rc = gpr_devices_in_use(ctx, devices, 16, &n);
	if (rc == 0)
		printf("GPUs in use by this process: %d\n", n);

	gpr_report *report = NULL;
	rc = gpr_release(ctx, NULL, &report);
	if (rc) {
		fprintf(stderr, "gpr_release: %s (%s)\n", gpr_strerror(rc),
			gpr_last_error(ctx));
		gpr_close(ctx);
		return 1;
	}
	char *text = gpr_report_text(report);
	if (text)
		fputs(text, stdout);
	gpr_free(text);
	gpr_report_free(report);
	gpr_close(ctx);
	return 0;
}
