/*
 * `top`'s view in a build without ncurses (meson: the `ncurses` option,
 * docs/build.md): one line that says how to get it. The one-shot reading
 * (stdout not a terminal, --json) needs no terminal library and works.
 */
#include "top.h"

#include <stdio.h>

int gpr_cli_top_screen(const struct gpr_cli_top_opts *o)
{
	(void)o;
	fprintf(stderr,
		"gpureclaim top: this gpureclaim was built without ncurses, "
		"so it has no terminal view: install libncurses-dev and "
		"build again (docs/build.md); gpureclaim top | cat prints one "
		"reading\n");
	return GPR_CLI_ERROR;
}
