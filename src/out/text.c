/* The terminal-safe text rule of text.h, and the UTF-8 decoding it and
 * the JSON writer share. */
#include "text.h"

size_t gpr__utf8_len(const char *str, uint32_t *cp_out)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80) {
		if (cp_out)
			*cp_out = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0; /* also stops at the NUL */
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	if (cp_out)
		*cp_out = cp;
	return n;
}

int gpr__text_unsafe(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || /* C0, DEL, C1 */
	       (cp >= 0x202a && cp <= 0x202e) || /* embeddings, overrides */
	       (cp >= 0x2066 && cp <= 0x2069) || /* isolates */
	       cp == 0x200e || cp == 0x200f || cp == 0x061c; /* marks */
}

/* The character at s as shown: its length in bytes, 0 if it shows as '?'. */
static size_t shown(const char *s, size_t *advance)
{
	uint32_t cp;
	size_t len = gpr__utf8_len(s, &cp);
	*advance = len ? len : 1;
	if (len == 0 || gpr__text_unsafe(cp))
		return 0;
	return len;
}

void gpr__text_put(struct gpr__buf *b, const char *s, int max, int pad)
{
	int n = 0;
	while (*s && (max <= 0 || n < max)) {
		size_t adv, len = shown(s, &adv);
		if (len)
			gpr__buf_putn(b, s, len);
		else
			gpr__buf_putn(b, "?", 1);
		s += adv;
		n++;
	}
	for (; pad && n < max; n++)
		gpr__buf_putn(b, " ", 1);
}

int gpr__text_len(const char *s)
{
	int n = 0;
	for (size_t adv; *s; s += adv, n++)
		shown(s, &adv);
	return n;
}

void gpr__text_notes(struct gpr__buf *b, const char *const *notes, size_t n)
{
	if (!n)
		return;
	gpr__buf_puts(b, "\nnotes:\n");
	for (size_t i = 0; i < n; i++) {
		gpr__buf_puts(b, "  - ");
		gpr__text_put(b, notes[i], 0, 0);
		gpr__buf_puts(b, "\n");
	}
}
