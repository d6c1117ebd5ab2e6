/* The terminal the tool writes to: its size, whether to colour, and how
 * wide a character shows. */
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

int gpr_cli_term_columns(uint32_t cp)
{
	return (cp >= 0x1100 && cp <= 0x115f) ||
		       (cp >= 0x2e80 && cp <= 0xa4cf && cp != 0x303f) ||
		       (cp >= 0xac00 && cp <= 0xd7a3) ||
		       (cp >= 0xf900 && cp <= 0xfaff) ||
		       (cp >= 0xfe30 && cp <= 0xfe4f) ||
		       (cp >= 0xff00 && cp <= 0xff60) ||
		       (cp >= 0xffe0 && cp <= 0xffe6) ||
		       (cp >= 0x1f300 && cp <= 0x1f64f) ||
		       (cp >= 0x1f900 && cp <= 0x1f9ff) ||
		       (cp >= 0x20000 && cp <= 0x3fffd)
		   ? 2
		   : 1;
}
