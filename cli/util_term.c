/* The terminal the tool writes to: its size, and whether to colour. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void gpr_cli_term_size(int fd, int *width, int *height)
{
	struct winsize ws;
	*width = *height = 0;
	if (!isatty(fd) || ioctl(fd, TIOCGWINSZ, &ws) != 0)
		return;
	*width = ws.ws_col;
	*height = ws.ws_row;
}

int gpr_cli_color(const char *mode, int fd)
{
	if (mode && strcmp(mode, "always") == 0)
		return 1;
	if (mode && strcmp(mode, "never") == 0)
		return 0;
	if (mode && strcmp(mode, "auto") != 0)
		return -1;
	const char *no = getenv("NO_COLOR");
	const char *term = getenv("TERM");
	return isatty(fd) && !(no && *no) &&
	       !(term && strcmp(term, "dumb") == 0);
}
