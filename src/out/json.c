/*
 * The JSON writer of json.h. Each value or container first calls item(),
 * which writes the comma the position needs: none after a key, none for
 * the first item of a container, one otherwise.
 */
#include "json.h"

#include <inttypes.h>
#include <math.h>

#include "text.h"

void gpr__json_init(struct gpr__json *j, struct gpr__buf *b)
{
	*j = (struct gpr__json){.b = b};
}

static void item(struct gpr__json *j)
{
	if (j->after_key) {
		j->after_key = 0;
		return;
	}
	if (j->depth == 0)
		return;
	uint64_t bit = 1ull << (j->depth - 1);
	if (j->has_items & bit)
		gpr__buf_puts(j->b, ",");
	j->has_items |= bit;
	if (j->lines & bit)
		gpr__buf_puts(j->b, "\n");
}

static void begin(struct gpr__json *j, const char *bracket, int lines)
{
	item(j);
	if (j->depth >= GPR__JSON_MAX_DEPTH) {
		j->b->oom = 1; /* a caller's bug: drop the document */
		return;
	}
	gpr__buf_puts(j->b, bracket);
	j->depth++;
	uint64_t bit = 1ull << (j->depth - 1);
	j->has_items &= ~bit;
	j->lines = lines ? j->lines | bit : j->lines & ~bit;
}

static void end(struct gpr__json *j, const char *bracket)
{
	if (j->depth == 0) {
		j->b->oom = 1;
		return;
	}
	uint64_t bit = 1ull << (j->depth - 1);
	if (j->lines & j->has_items & bit)
		gpr__buf_puts(j->b, "\n");
	j->depth--;
	gpr__buf_puts(j->b, bracket);
}

void gpr__json_object(struct gpr__json *j)
{
	begin(j, "{", 0);
}

void gpr__json_object_end(struct gpr__json *j)
{
	end(j, "}");
}

void gpr__json_array(struct gpr__json *j)
{
	begin(j, "[", 0);
}

void gpr__json_array_lines(struct gpr__json *j)
{
	begin(j, "[", 1);
}

void gpr__json_array_end(struct gpr__json *j)
{
	end(j, "]");
}

/* s as a string literal, quotes included, escaped as json.h says. */
static void quoted(struct gpr__buf *b, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	gpr__buf_puts(b, "\"");
	while (*s) {
		unsigned char c = *s;
		if (c == '"' || c == '\\') {
			char esc[2] = {'\\', (char)c};
			gpr__buf_putn(b, esc, 2);
			s++;
		} else if (c < 0x20 || c == 0x7f) {
			switch (c) {
			case '\n':
				gpr__buf_puts(b, "\\n");
				break;
			case '\t':
				gpr__buf_puts(b, "\\t");
				break;
			case '\r':
				gpr__buf_puts(b, "\\r");
				break;
			default:
				gpr__buf_printf(b, "\\u%04x", c);
			}
			s++;
		} else {
			uint32_t cp;
			size_t n = gpr__utf8_len((const char *)s, &cp);
			if (n == 0) {
				gpr__buf_puts(b, "\\ufffd");
				s++;
			} else if (gpr__text_unsafe(cp)) {
				/* C1 controls and bidi formatting (text.h):
				 * legal JSON raw, but a terminal showing the
				 * document would obey them (U+009B starts an
				 * escape sequence, U+202E reverses what
				 * follows) */
				gpr__buf_printf(b, "\\u%04x", (unsigned)cp);
				s += n;
			} else {
				gpr__buf_putn(b, (const char *)s, n);
				s += n;
			}
		}
	}
	gpr__buf_puts(b, "\"");
}

void gpr__json_key(struct gpr__json *j, const char *key)
{
	item(j);
	quoted(j->b, key);
	gpr__buf_puts(j->b, ":");
	j->after_key = 1;
}

void gpr__json_str(struct gpr__json *j, const char *s)
{
	item(j);
	if (s)
		quoted(j->b, s);
	else
		gpr__buf_puts(j->b, "null");
}

void gpr__json_u64(struct gpr__json *j, uint64_t v)
{
	item(j);
	gpr__buf_printf(j->b, "%" PRIu64, v);
}

void gpr__json_i64(struct gpr__json *j, int64_t v)
{
	item(j);
	gpr__buf_printf(j->b, "%" PRId64, v);
}

void gpr__json_bool(struct gpr__json *j, int v)
{
	item(j);
	gpr__buf_puts(j->b, v ? "true" : "false");
}

void gpr__json_null(struct gpr__json *j)
{
	item(j);
	gpr__buf_puts(j->b, "null");
}

static void fixed(struct gpr__json *j, int negative, uint64_t mag,
		  unsigned places)
{
	item(j);
	if (places > 18)
		places = 18;
	uint64_t scale = 1;
	for (unsigned i = 0; i < places; i++)
		scale *= 10;
	const char *sign = negative && mag ? "-" : "";
	if (places == 0)
		gpr__buf_printf(j->b, "%s%" PRIu64, sign, mag);
	else
		gpr__buf_printf(j->b, "%s%" PRIu64 ".%0*" PRIu64, sign,
				mag / scale, (int)places, mag % scale);
}

void gpr__json_fixed(struct gpr__json *j, int64_t v, unsigned places)
{
	fixed(j, v < 0, v < 0 ? -(uint64_t)v : (uint64_t)v, places);
}

void gpr__json_ufixed(struct gpr__json *j, uint64_t v, unsigned places)
{
	fixed(j, 0, v, places);
}

void gpr__json_double(struct gpr__json *j, double v, unsigned places)
{
	if (!isfinite(v)) {
		gpr__json_null(j);
		return;
	}
	if (places > 18)
		places = 18;
	double scaled = v < 0 ? -v : v;
	for (unsigned i = 0; i < places; i++)
		scaled *= 10;
	scaled += 0.5; /* the cast truncates: rounds half up */
	/* beyond 2^64 the figure saturates rather than wraps */
	uint64_t mag =
	    scaled < 18446744073709551616.0 ? (uint64_t)scaled : UINT64_MAX;
	fixed(j, v < 0, mag, places);
}

void gpr__json_kv_str(struct gpr__json *j, const char *key, const char *s)
{
	gpr__json_key(j, key);
	gpr__json_str(j, s);
}

void gpr__json_kv_u64(struct gpr__json *j, const char *key, uint64_t v)
{
	gpr__json_key(j, key);
	gpr__json_u64(j, v);
}

void gpr__json_kv_i64(struct gpr__json *j, const char *key, int64_t v)
{
	gpr__json_key(j, key);
	gpr__json_i64(j, v);
}

void gpr__json_kv_bool(struct gpr__json *j, const char *key, int v)
{
	gpr__json_key(j, key);
	gpr__json_bool(j, v);
}
