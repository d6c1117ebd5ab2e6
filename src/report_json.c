/*
 * The report as one JSON document (shape in docs/c-api.md). Strings come
 * from releasers and vendor messages, so every one is escaped: quotes,
 * backslashes, control characters, and bytes that are not UTF-8 (replaced
 * by U+FFFD) so that strict parsers accept the document. Built in a
 * growable buffer: out of memory gives NULL, never half a document.
 */
#include <stdint.h>
#include <string.h>

#include "report.h"
#include "strbuf.h"

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	uint32_t cp, min;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0) {
		len = 2;
		cp = c & 0x1f;
		min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		len = 3;
		cp = c & 0x0f;
		min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		len = 4;
		cp = c & 0x07;
		min = 0x10000;
	} else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static void str(struct gpr__sb *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)p);
	gpr__sb_puts(b, "\"");
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		if (c == '"' || c == '\\') {
			gpr__sb_printf(b, "\\%c", c);
			i++;
		} else if (c == '\n') {
			gpr__sb_puts(b, "\\n");
			i++;
		} else if (c == '\t') {
			gpr__sb_puts(b, "\\t");
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			gpr__sb_printf(b, "\\u%04x", c);
			i++;
		} else {
			size_t len = utf8_len(p + i, n - i);
			if (len == 0) {
				gpr__sb_puts(b, "\\ufffd");
				i++;
			} else {
				gpr__sb_putn(b, (const char *)p + i, len);
				i += len;
			}
		}
	}
	gpr__sb_puts(b, "\"");
}

static void held(struct gpr__sb *b, const struct gpr_held *h)
{
	if (!h->known)
		gpr__sb_puts(b, "null");
	else
		gpr__sb_printf(b, "{\"live\":%llu,\"cached\":%llu}",
			       (unsigned long long)h->live,
			       (unsigned long long)h->cached);
}

/* An unsigned figure, or null when unknown. */
static void num(struct gpr__sb *b, int known, uint64_t v)
{
	if (known)
		gpr__sb_printf(b, "%llu", (unsigned long long)v);
	else
		gpr__sb_puts(b, "null");
}

/*
 * Decimals are written from integers, never with %f: printf follows the
 * caller's LC_NUMERIC, and a host program in a de_DE locale would get
 * "1,5", which is not JSON.
 */
static void gb(struct gpr__sb *b, int64_t bytes)
{
	uint64_t mag = bytes < 0 ? -(uint64_t)bytes : (uint64_t)bytes;
	gpr__sb_printf(b, "%s%llu.%09llu", bytes < 0 ? "-" : "",
		       (unsigned long long)(mag / 1000000000u),
		       (unsigned long long)(mag % 1000000000u));
}

/* Seconds with 6 decimals; negative or not a number: 0. */
static void secs(struct gpr__sb *b, double s)
{
	double us = s * 1e6 + 0.5;
	uint64_t u =
	    us >= 1.0 ? (us < 1e18 ? (uint64_t)us : 1000000000000000000u) : 0;
	gpr__sb_printf(b, "%llu.%06llu", (unsigned long long)(u / 1000000u),
		       (unsigned long long)(u % 1000000u));
}

char *gpr_report_json(const gpr_report *r)
{
	if (!r)
		return NULL;
	struct gpr__sb b = {0};
	gpr__sb_printf(&b, "{\"bytes\":%lld,\"gb\":", (long long)r->bytes);
	gb(&b, r->bytes);
	gpr__sb_puts(&b, ",\"source\":");
	str(&b, r->source);
	gpr__sb_puts(&b, ",\"seconds\":");
	secs(&b, r->seconds);
	gpr__sb_printf(&b, ",\"collected\":%s,\"collect_seconds\":",
		       r->collected ? "true" : "false");
	secs(&b, r->collect_seconds);
	gpr__sb_puts(&b, ",\"gpus\":[");
	for (size_t i = 0; i < r->n_gpus; i++) {
		const struct gpr_report_gpu *g = &r->gpus[i];
		int mem = g->total > 0;
		gpr__sb_printf(&b, "%s{\"device\":", i ? "," : "");
		if (g->name) /* a GPU CUDA does not see: its name */
			str(&b, g->name);
		else
			gpr__sb_printf(&b, "%d", g->device);
		gpr__sb_printf(&b,
			       ",\"nvml_index\":%d,"
			       "\"known\":%s,\"released\":%lld,\"before\":",
			       g->nvml_index, g->known ? "true" : "false",
			       (long long)g->released);
		num(&b, g->known, g->before);
		gpr__sb_puts(&b, ",\"after\":");
		num(&b, g->known, g->after);
		gpr__sb_puts(&b, ",\"used\":");
		num(&b, mem, g->used);
		gpr__sb_puts(&b, ",\"free\":");
		num(&b, mem, g->free);
		gpr__sb_puts(&b, ",\"total\":");
		num(&b, mem, g->total);
		gpr__sb_puts(&b, "}");
	}
	gpr__sb_puts(&b, "],\"releasers\":[");
	for (size_t i = 0; i < r->n_rel; i++) {
		const struct gpr__rrow *x = &r->rel[i];
		gpr__sb_printf(&b, "%s{\"name\":", i ? "," : "");
		str(&b, x->name);
		gpr__sb_printf(&b, ",\"device\":%d,\"known\":%s,\"before\":",
			       x->device, x->known ? "true" : "false");
		held(&b, &x->before);
		gpr__sb_puts(&b, ",\"after\":");
		held(&b, &x->after);
		gpr__sb_printf(&b, ",\"status\":%d}", x->status);
	}
	gpr__sb_puts(&b, "],\"notes\":[");
	for (size_t i = 0; i < r->n_notes; i++) {
		if (i)
			gpr__sb_puts(&b, ",");
		str(&b, r->notes[i]);
	}
	gpr__sb_puts(&b, "]}\n");
	return gpr__sb_finish(&b);
}
