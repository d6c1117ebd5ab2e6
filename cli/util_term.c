/* The terminal the tool writes to: its size, whether to colour, and how
 * wide a character shows. */
#include "cli.h"

#include <stdio.h>
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

/* The duration in the units' names given, the two largest, `sep`
 * between them, the smaller's figure at least `pad` digits wide. */
static char *duration(double s, const char *const unit[4], const char *sep,
		      int pad, char *out, size_t len)
{
	static const unsigned long long size[4] = {1, 60, 3600, 86400};
	if (s < 0)
		s = 0;
	unsigned long long t = (unsigned long long)(s + 0.5);
	int big = t >= size[3] ? 3 : t >= size[2] ? 2 : t >= size[1] ? 1 : 0;
	if (big == 0)
		snprintf(out, len, "%llu%s", t, unit[0]);
	else
		snprintf(out, len, "%llu%s%s%0*llu%s", t / size[big], unit[big],
			 sep, pad, t % size[big] / size[big - 1],
			 unit[big - 1]);
	return out;
}

char *gpr_cli_fmt_duration(double s, char *out, size_t len)
{
	static const char *const unit[4] = {" s", " min", " h", " d"};
	return duration(s, unit, " ", 1, out, len);
}

char *gpr_cli_fmt_duration_short(double s, char *out, size_t len)
{
	static const char *const unit[4] = {"s", "m", "h", "d"};
	return duration(s, unit, "", 2, out, len);
}
