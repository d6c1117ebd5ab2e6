/*
 * JSON writing into a cli_buf. Strings from the system (command lines,
 * GPU names, trace logs) may hold any byte: escape what JSON forbids and
 * the C1 controls, and replace invalid UTF-8 so every document parses.
 */
#include "cli.h"

#include <inttypes.h>
#include <string.h>

void cli_json_str(struct cli_buf *b, const char *str)
{
	if (!str) {
		cli_buf_puts(b, "null");
		return;
	}
	const unsigned char *s = (const unsigned char *)str;
	cli_buf_puts(b, "\"");
	while (*s) {
		unsigned char c = *s;
		if (c == '"' || c == '\\') {
			char esc[2] = {'\\', (char)c};
			cli_buf_append(b, esc, 2);
			s++;
		} else if (c < 0x20 || c == 0x7f) {
			switch (c) {
			case '\n':
				cli_buf_puts(b, "\\n");
				break;
			case '\t':
				cli_buf_puts(b, "\\t");
				break;
			case '\r':
				cli_buf_puts(b, "\\r");
				break;
			default:
				cli_buf_printf(b, "\\u%04x", c);
			}
			s++;
		} else {
			uint32_t cp;
			size_t n = cli_utf8_len((const char *)s, &cp);
			if (n == 0) {
				cli_buf_puts(b, "\\ufffd");
				s++;
			} else if (cp >= 0x80 && cp <= 0x9f) {
				/* C1 controls: legal JSON raw, but a terminal
				 * showing the document would obey them (U+009B
				 * starts an escape sequence) */
				cli_buf_printf(b, "\\u%04x", (unsigned)cp);
				s += n;
			} else {
				cli_buf_append(b, (const char *)s, n);
				s += n;
			}
		}
	}
	cli_buf_puts(b, "\"");
}

void cli_json_key(struct cli_buf *b, const char *key)
{
	cli_json_str(b, key);
	cli_buf_puts(b, ":");
}

void cli_json_kv_str(struct cli_buf *b, const char *key, const char *s)
{
	cli_json_key(b, key);
	cli_json_str(b, s);
}

void cli_json_kv_u64(struct cli_buf *b, const char *key, uint64_t v)
{
	cli_json_key(b, key);
	cli_buf_printf(b, "%" PRIu64, v);
}

void cli_json_kv_int(struct cli_buf *b, const char *key, long long v)
{
	cli_json_key(b, key);
	cli_buf_printf(b, "%lld", v);
}

void cli_json_kv_bool(struct cli_buf *b, const char *key, int v)
{
	cli_json_key(b, key);
	cli_buf_puts(b, v ? "true" : "false");
}
