/*
 * The output toolkit (src/out/): the buffer, the JSON writer's commas,
 * escaping and numbers, the terminal-safe text rule, the byte and time
 * formatters, the table and the HTML building blocks, each against the
 * exact text it must produce.
 */
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "out/buf.h"
#include "out/fmt.h"
#include "out/html.h"
#include "out/json.h"
#include "out/table.h"
#include "out/text.h"
#include "support.h"

static void t_buf(void **state)
{
	(void)state;
	struct gpr__buf b = {0};
	assert_string_equal(gpr__buf_str(&b), "");
	gpr__buf_puts(&b, "ab");
	gpr__buf_putn(&b, "cdef", 2);
	gpr__buf_printf(&b, "-%d-%s", 42, "x");
	assert_string_equal(gpr__buf_str(&b), "abcd-42-x");
	assert_int_equal(b.len, 9);
	gpr__buf_reset(&b);
	assert_string_equal(gpr__buf_str(&b), "");
	for (int i = 0; i < 1000; i++)
		gpr__buf_puts(&b, "0123456789");
	assert_int_equal(b.len, 10000);
	char *s = gpr__buf_finish(&b);
	assert_non_null(s);
	assert_int_equal(strlen(s), 10000);
	free(s);
	assert_null(b.data);

	/* a size that cannot be added fails the buffer for good */
	gpr__buf_puts(&b, "kept?");
	gpr__buf_putn(&b, "x", SIZE_MAX - 1);
	assert_true(b.oom);
	gpr__buf_puts(&b, "more");
	assert_null(gpr__buf_finish(&b));
	assert_null(b.data);
	assert_false(b.oom);
}

/* What b holds, compared whole; b is emptied for the next. */
static void expect(struct gpr__buf *b, const char *want)
{
	assert_false(b->oom);
	assert_string_equal(gpr__buf_str(b), want);
	gpr__buf_reset(b);
}

static void t_json_commas(void **state)
{
	(void)state;
	struct gpr__buf b = {0};
	struct gpr__json j;
	gpr__json_init(&j, &b);
	gpr__json_object(&j);
	gpr__json_kv_u64(&j, "a", 1);
	gpr__json_key(&j, "b");
	gpr__json_array(&j);
	gpr__json_i64(&j, -2);
	gpr__json_str(&j, "s");
	gpr__json_object(&j);
	gpr__json_key(&j, "c");
	gpr__json_null(&j);
	gpr__json_object_end(&j);
	gpr__json_array(&j);
	gpr__json_array_end(&j);
	gpr__json_array_end(&j);
	gpr__json_key(&j, "d");
	gpr__json_object(&j);
	gpr__json_object_end(&j);
	gpr__json_kv_bool(&j, "e", 1);
	gpr__json_kv_str(&j, "f", NULL);
	gpr__json_kv_i64(&j, "g", INT64_MIN);
	gpr__json_object_end(&j);
	expect(&b, "{\"a\":1,\"b\":[-2,\"s\",{\"c\":null},[]],\"d\":{},"
		   "\"e\":true,\"f\":null,\"g\":-9223372036854775808}");

	/* an array of lines: its items and its end on lines of their own,
	 * the objects inside on one line each */
	gpr__json_init(&j, &b);
	gpr__json_object(&j);
	gpr__json_key(&j, "ev");
	gpr__json_array_lines(&j);
	gpr__json_object(&j);
	gpr__json_kv_u64(&j, "x", 1);
	gpr__json_kv_u64(&j, "y", 2);
	gpr__json_object_end(&j);
	gpr__json_u64(&j, UINT64_MAX);
	gpr__json_array_end(&j);
	gpr__json_key(&j, "empty");
	gpr__json_array_lines(&j);
	gpr__json_array_end(&j);
	gpr__json_object_end(&j);
	expect(&b, "{\"ev\":[\n{\"x\":1,\"y\":2},\n18446744073709551615\n],"
		   "\"empty\":[]}");

	/* too deep, or an end without a beginning: the document is dropped */
	gpr__json_init(&j, &b);
	for (int i = 0; i <= GPR__JSON_MAX_DEPTH; i++)
		gpr__json_array(&j);
	assert_true(b.oom);
	gpr__buf_reset(&b);
	gpr__json_init(&j, &b);
	gpr__json_object_end(&j);
	assert_true(b.oom);
	gpr__buf_free(&b);
}

static void t_json_strings(void **state)
{
	(void)state;
	struct gpr__buf b = {0};
	struct gpr__json j;
	gpr__json_init(&j, &b);
	/* quote, backslash, the named controls, other C0, DEL, C1 as UTF-8
	 * (U+0085, U+009B), a raw 0x9b, a cut sequence, an overlong form, a
	 * surrogate; then valid UTF-8 kept as it is */
	gpr__json_str(&j, "q\"b\\n\nt\tr\r\x01\x1f\x7f|\xc2\x85\xc2\x9b|"
			  "\x9b|\xe2\x82|\xc0\xaf|\xed\xa0\x80|caf\xc3\xa9 "
			  "\xe2\x82\xac \xf0\x9f\x98\x80");
	expect(&b, "\"q\\\"b\\\\n\\nt\\tr\\r\\u0001\\u001f\\u007f|"
		   "\\u0085\\u009b|\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd|"
		   "\\ufffd\\ufffd\\ufffd|caf\xc3\xa9 \xe2\x82\xac "
		   "\xf0\x9f\x98\x80\"");
	/* keys follow the same rule */
	gpr__json_init(&j, &b);
	gpr__json_object(&j);
	gpr__json_kv_str(&j, "k\x9b\xc2\x9b", "");
	gpr__json_object_end(&j);
	expect(&b, "{\"k\\ufffd\\u009b\":\"\"}");
	/* bidi embeddings, overrides, isolates and marks escaped (the value
	 * parses back the same); Hebrew and Arabic letters kept */
	gpr__json_init(&j, &b);
	gpr__json_str(&j, "a\xe2\x80\xaa\xe2\x80\xae\xe2\x81\xa6\xe2\x81\xa9"
			  "\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c\xd7\x90\xd8\xa7"
			  "\xe2\x80\xaf");
	expect(&b, "\"a\\u202a\\u202e\\u2066\\u2069\\u200e\\u200f\\u061c"
		   "\xd7\x90\xd8\xa7\xe2\x80\xaf\"");
	gpr__buf_free(&b);
}

/* Decimals as JSON wants them, whatever LC_NUMERIC the host program set. */
static void numbers(struct gpr__buf *b)
{
	struct gpr__json j;
	gpr__json_init(&j, b);
	gpr__json_array(&j);
	gpr__json_fixed(&j, 1500, 3);
	gpr__json_fixed(&j, -1500, 3);
	gpr__json_fixed(&j, 5, 3);
	gpr__json_fixed(&j, INT64_MIN, 9);
	gpr__json_ufixed(&j, UINT64_MAX, 18);
	gpr__json_ufixed(&j, 7, 0);
	gpr__json_double(&j, 0.25, 6);
	gpr__json_double(&j, -2.0 / 3.0, 3);
	gpr__json_double(&j, 1e30, 2); /* saturates, never wraps */
	gpr__json_double(&j, NAN, 3);
	gpr__json_double(&j, -INFINITY, 3);
	gpr__json_array_end(&j);
	expect(b, "[1.500,-1.500,0.005,-9223372036.854775808,"
		  "18.446744073709551615,7,0.250000,-0.667,"
		  "184467440737095516.15,null,null]");
}

static void t_json_numbers(void **state)
{
	(void)state;
	struct gpr__buf b = {0};
	numbers(&b);
	if (!comma_locale())
		skip();
	numbers(&b);
	setlocale(LC_NUMERIC, "C");
	gpr__buf_free(&b);
}

static void t_text(void **state)
{
	(void)state;
	struct gpr__buf b = {0};
	/* C0, ESC, DEL, C1 as UTF-8, a raw 0x9b, a cut sequence: each one
	 * '?'; valid UTF-8 kept, one column a character */
	const char *s = "a\x01\x1b[2Jb\x7f\xc2\x9b\x9b\xe2\x82-caf\xc3\xa9";
	gpr__text_put(&b, s, 0, 0);
	assert_string_equal(gpr__buf_str(&b), "a??[2Jb?????"
					      "-caf\xc3\xa9");
	assert_int_equal(gpr__text_len(s), 17);
	gpr__buf_reset(&b);
	/* the bidi formatting characters (U+202A-202E, U+2066-2069, LRM, RLM,
	 * ALM) each '?', their neighbours (U+2029, U+206A, U+200D) and
	 * right-to-left letters kept */
	gpr__text_put(&b,
		      "x\xe2\x80\xa9\xe2\x80\xaa\xe2\x80\xae\xe2\x80\xaf"
		      "\xe2\x81\xa5\xe2\x81\xa6\xe2\x81\xa9\xe2\x81\xaa"
		      "\xe2\x80\x8d\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c\xd7\x90",
		      0, 0);
	assert_string_equal(gpr__buf_str(&b),
			    "x\xe2\x80\xa9??\xe2\x80\xaf\xe2\x81\xa5??"
			    "\xe2\x81\xaa\xe2\x80\x8d???\xd7\x90");
	gpr__buf_reset(&b);
	/* cut at a width, never inside a character; padded with spaces */
	gpr__text_put(&b, "caf\xc3\xa9s", 4, 1);
	gpr__buf_puts(&b, "|");
	gpr__text_put(&b, "ab", 4, 1);
	gpr__buf_puts(&b, "|");
	gpr__text_put(&b, "ab", 4, 0);
	assert_string_equal(gpr__buf_str(&b), "caf\xc3\xa9|ab  |ab");

	uint32_t cp = 0;
	assert_int_equal(gpr__utf8_len("\xf0\x9f\x98\x80", &cp), 4);
	assert_int_equal(cp, 0x1f600);
	assert_int_equal(gpr__utf8_len("\xf4\x90\x80\x80", &cp), 0);
	assert_int_equal(gpr__utf8_len("", &cp), 1);
	gpr__buf_free(&b);
}

static void t_fmt_bytes(void **state)
{
	(void)state;
	static const struct {
		uint64_t v;
		const char *want;
	} cases[] = {
	    {0, "0 B"},
	    {1023, "1023 B"},
	    {1024, "1.0 KiB"},
	    {1536, "1.5 KiB"},
	    {1048575, "1.0 MiB"}, /* not "1024.0 KiB" */
	    {512ull << 20, "512.0 MiB"},
	    {80ull << 30, "80.0 GiB"},
	    {1616904192, "1.5 GiB"},
	    {UINT64_MAX, "16.0 EiB"},
	};
	char out[32];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		assert_string_equal(gpr__fmt_bytes(cases[i].v, out, sizeof out),
				    cases[i].want);
	assert_string_equal(gpr__fmt_sbytes(-1536, out, sizeof out),
			    "-1.5 KiB");
	assert_string_equal(gpr__fmt_sbytes(INT64_MIN, out, sizeof out),
			    "-8.0 EiB");
	assert_string_equal(gpr__fmt_sbytes(512, out, sizeof out), "512 B");
	/* a short buffer is cut, never overrun */
	assert_string_equal(gpr__fmt_bytes(80ull << 30, out, 4), "80.");
	assert_string_equal(gpr__fmt_sbytes(-5, out, 1), "");
	/* a count agrees with its noun */
	assert_string_equal(gpr__fmt_count(1, "call", "calls", out, sizeof out),
			    "1 call");
	assert_string_equal(gpr__fmt_count(0, "call", "calls", out, sizeof out),
			    "0 calls");
	assert_string_equal(
	    gpr__fmt_count(3, "process", "processes", out, sizeof out),
	    "3 processes");
}

static void t_fmt_secs(void **state)
{
	(void)state;
	char out[32];
	assert_string_equal(gpr__fmt_secs(0.0003, out, sizeof out), "0.3 ms");
	assert_string_equal(gpr__fmt_secs(0.0856, out, sizeof out), "85.6 ms");
	assert_string_equal(gpr__fmt_secs(1.25, out, sizeof out), "1.25 s");
	assert_string_equal(gpr__fmt_secs(-1, out, sizeof out), "0.0 ms");
	assert_string_equal(gpr__fmt_secs(NAN, out, sizeof out), "0.0 ms");
}

/* A share in percent: one decimal; a tiny one never reads as none. */
static void t_fmt_percent(void **state)
{
	(void)state;
	char out[16];
	assert_string_equal(gpr__fmt_percent(100.0 / 3, out, sizeof out),
			    "33.3%");
	assert_string_equal(gpr__fmt_percent(0.0, out, sizeof out), "0.0%");
	assert_string_equal(gpr__fmt_percent(0.04, out, sizeof out), "<0.1%");
	assert_string_equal(gpr__fmt_percent(0.1, out, sizeof out), "0.1%");
	assert_string_equal(gpr__fmt_percent(100.0, out, sizeof out), "100.0%");
	/* more than the whole keeps a column's width (a garbage figure) */
	assert_string_equal(gpr__fmt_percent(1342177281.2, out, sizeof out),
			    ">100%");
}

/* Notes as text: a heading and one terminal-safe line each; none, none. */
static void t_text_notes(void **state)
{
	(void)state;
	struct gpr__buf b = {0};
	const char *notes[] = {"cupy: skipped", "a\x1b[2J"};
	gpr__text_notes(&b, notes, 0);
	assert_string_equal(gpr__buf_str(&b), "");
	gpr__text_notes(&b, notes, 2);
	assert_string_equal(gpr__buf_str(&b),
			    "\nnotes:\n  - cupy: skipped\n  - a?[2J\n");
	gpr__buf_free(&b);
}

static const struct gpr__col COLS[] = {{"name", GPR__COL_TEXT},
				       {"bytes", GPR__COL_BYTES},
				       {"note", GPR__COL_TEXT}};

/* Prose left, figures right, the last column unpadded; a line under a
 * row; cells from outside shown terminal-safe. */
static void t_table_text(void **state)
{
	(void)state;
	struct gpr__table t;
	struct gpr__buf b = {0};
	gpr__table_init(&t, COLS, 3);
	gpr__table_text(&b, &t, 2);
	assert_string_equal(gpr__buf_str(&b), ""); /* no row: nothing */
	gpr__table_cell(&t, "torch");
	gpr__table_bytes(&t, 1, 1536);
	gpr__table_cell(&t, "ok");
	gpr__table_sub(&t, "how: measured");
	gpr__table_cell(&t, "a\x1b[31mb");
	gpr__table_bytes(&t, 0, 0);
	gpr__table_cell(&t, NULL);
	gpr__table_text(&b, &t, 2);
	assert_string_equal(gpr__buf_str(&b), "  name       bytes  note\n"
					      "  torch    1.5 KiB  ok\n"
					      "      how: measured\n"
					      "  a?[31mb        -  -\n");
	assert_int_equal(gpr__table_rows(&t), 2);
	gpr__table_free(&t);
	gpr__buf_free(&b);
}

/* Markup and attribute characters become entities; what a terminal must
 * not get is '?' here too. */
static void t_html_esc(void **state)
{
	(void)state;
	struct gpr__buf b = {0};
	gpr__html_esc(&b, "<a href=\"x\">&'</a>\xe2\x80\xae\xff ok");
	assert_string_equal(
	    gpr__buf_str(&b),
	    "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;?? "
	    "ok");
	gpr__buf_free(&b);
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

/* Every part with bytes has a segment, a legend entry and its exact
 * bytes in their titles; a part far below a pixel keeps a minimum width
 * and is labelled outside; a colour that is not one is not written into
 * the style; a table cell keeps its exact bytes in a title. */
static void t_html_bar_and_table(void **state)
{
	(void)state;
	struct gpr__buf b = {0};
	struct gpr__html_part parts[] = {
	    {"live <torch>", 80ull << 30, "#4e79a7"},
	    {"tiny", 4096, "red;background:url(x)"},
	    {"none", 0, NULL},
	    {"released", 1ull << 30, "@returned"}};
	gpr__html_bar(&b, "GPU 0", parts, 4);
	const char *h = gpr__buf_str(&b);
	assert_int_equal(count(h, "class=\"gpr-seg\""), 3);
	assert_non_null(strstr(h, "85899345920 bytes"));
	assert_non_null(strstr(h, "4096 bytes"));
	assert_non_null(strstr(h, "1073741824 bytes"));
	assert_null(strstr(h, "none"));
	assert_null(strstr(h, "url("));
	assert_non_null(strstr(h, "live &lt;torch&gt;"));
	assert_non_null(strstr(h, "#59a14f")); /* the role's colour */
	/* the tiny part: outside, with a line, at the minimum width */
	assert_int_equal(count(h, "class=\"gpr-ol"), 2);
	assert_non_null(strstr(h, "width:0.455%"));
	assert_int_equal(count(h, "<span title="), 3); /* the legend */

	struct gpr__table t;
	gpr__table_init(&t, COLS, 3);
	gpr__table_cell(&t, "x");
	gpr__table_swatch(&t, "#4e79a7");
	gpr__table_bytes(&t, 1, 2048);
	gpr__table_cell(&t, "y");
	gpr__buf_reset(&b);
	gpr__html_table(&b, "per GPU", &t);
	assert_string_equal(
	    gpr__buf_str(&b),
	    "<div class=\"gpr-scroll\"><table class=\"gpr-tab\"><caption>per "
	    "GPU</caption><thead><tr>"
	    "<th>name</th><th class=\"r\">bytes</th><th>note</th></tr>"
	    "</thead><tbody><tr><td><span class=\"gpr-nw\"><span "
	    "class=\"gpr-sw\" style=\"background:#4e79a7\"></span>x</span>"
	    "</td><td class=\"r\" title=\"2048 bytes\">2.0 KiB</td><td>y</td>"
	    "</tr></tbody></table></div>");
	gpr__table_free(&t);
	gpr__buf_free(&b);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_buf),
	    cmocka_unit_test(t_json_commas),
	    cmocka_unit_test(t_json_strings),
	    cmocka_unit_test(t_json_numbers),
	    cmocka_unit_test(t_text),
	    cmocka_unit_test(t_fmt_bytes),
	    cmocka_unit_test(t_fmt_secs),
	    cmocka_unit_test(t_fmt_percent),
	    cmocka_unit_test(t_text_notes),
	    cmocka_unit_test(t_table_text),
	    cmocka_unit_test(t_html_esc),
	    cmocka_unit_test(t_html_bar_and_table),
	};
	return gpr_test_main(argc, argv, "out", tests,
			     sizeof tests / sizeof tests[0]);
}
