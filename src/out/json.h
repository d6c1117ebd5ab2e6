/*
 * The output toolkit's JSON writer: one document into a gpr__buf, commas
 * placed by the writer (never by the caller), one escaping rule for every
 * string and numbers that do not depend on the locale.
 *
 *	struct gpr__buf b = {0};
 *	struct gpr__json j;
 *	gpr__json_init(&j, &b);
 *	gpr__json_object(&j);
 *	gpr__json_kv_u64(&j, "pid", 42);
 *	gpr__json_key(&j, "gpus");
 *	gpr__json_array(&j);
 *	...
 *	gpr__json_array_end(&j);
 *	gpr__json_object_end(&j);	-> {"pid":42,"gpus":[...]}
 *
 * Strings may hold any byte (command lines, names from a hostile log):
 * quotes, backslashes, the controls C0, DEL and C1 (U+0080..U+009F,
 * which a terminal showing the document would obey) and the bidirectional
 * formatting characters of text.h (U+202E and its kin) are escaped, and
 * bytes that are not valid UTF-8 become U+FFFD, so the document always
 * parses and never carries a raw terminal control.
 *
 * Numbers are written from integers, never with %f: printf follows the
 * process's LC_NUMERIC, and a host program in a de_DE locale would get
 * "1,5", which is not JSON. Errors (out of memory, nesting deeper than
 * GPR__JSON_MAX_DEPTH) mark the buffer failed (b->oom).
 */
#ifndef GPR_OUT_JSON_H
#define GPR_OUT_JSON_H

#include <stdint.h>

#include "buf.h"

#define GPR__JSON_MAX_DEPTH 64

struct gpr__json {
	struct gpr__buf *b;
	unsigned depth;	    /* open objects and arrays */
	uint64_t has_items; /* bit d-1: the container at depth d has one */
	int after_key;	    /* a key was written: its value comes next */
	uint64_t lines;	    /* bit d-1: its items start a line each */
};

/* Starts a document in b (appended to what b holds). */
void gpr__json_init(struct gpr__json *j, struct gpr__buf *b);

void gpr__json_object(struct gpr__json *j);
void gpr__json_object_end(struct gpr__json *j);
void gpr__json_array(struct gpr__json *j);
void gpr__json_array_end(struct gpr__json *j);
/*
 * An array whose items each start a line, and its closing bracket too (a
 * long list of events a reader may grep); other containers stay on one.
 */
void gpr__json_array_lines(struct gpr__json *j);

/* A member's name, inside an object; its value is the next call. */
void gpr__json_key(struct gpr__json *j, const char *key);

/* Values. */
void gpr__json_str(struct gpr__json *j, const char *s); /* NULL: null */
void gpr__json_u64(struct gpr__json *j, uint64_t v);
void gpr__json_i64(struct gpr__json *j, int64_t v);
void gpr__json_bool(struct gpr__json *j, int v);
void gpr__json_null(struct gpr__json *j);
/* v / 10^places, exactly ("1.500" for 1500, 3); places <= 18. */
void gpr__json_fixed(struct gpr__json *j, int64_t v, unsigned places);
void gpr__json_ufixed(struct gpr__json *j, uint64_t v, unsigned places);
/* v rounded to `places` decimals (<= 18); not finite: null. */
void gpr__json_double(struct gpr__json *j, double v, unsigned places);

/* A member: the key, then the value. */
void gpr__json_kv_str(struct gpr__json *j, const char *key, const char *s);
void gpr__json_kv_u64(struct gpr__json *j, const char *key, uint64_t v);
void gpr__json_kv_i64(struct gpr__json *j, const char *key, int64_t v);
void gpr__json_kv_bool(struct gpr__json *j, const char *key, int v);

#endif /* GPR_OUT_JSON_H */
