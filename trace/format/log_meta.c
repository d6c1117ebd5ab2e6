/*
 * META chunks: "key=value\n" lines. Keys are short and plain
 * ([a-z0-9._-], at most 64 bytes); values are any bytes but NUL and
 * newline (a NUL inside becomes '?', as in strings), at most
 * GPR_TRACE_MAX_STRING bytes. Anything else is a corrupt log.
 */
#include "log_meta.h"

#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "trace_format.h"

#define MAX_KEY 64

static int key_ok(const unsigned char *k, size_t len)
{
	if (len == 0 || len > MAX_KEY)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = k[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static char *dup_text(const unsigned char *s, size_t len)
{
	char *d = malloc(len + 1);
	if (!d)
		return NULL;
	memcpy(d, s, len);
	for (size_t i = 0; i < len; i++)
		if (d[i] == '\0')
			d[i] = '?';
	d[len] = '\0';
	return d;
}

static int put(struct gpr_trace_kv **kv, uint32_t *n, const unsigned char *k,
	       size_t klen, const unsigned char *v, size_t vlen)
{
	char *value = dup_text(v, vlen);
	if (!value)
		return -1;
	for (uint32_t i = 0; i < *n; i++)
		if (strlen((*kv)[i].key) == klen &&
		    memcmp((*kv)[i].key, k, klen) == 0) {
			free((*kv)[i].value);
			(*kv)[i].value = value;
			return 0;
		}
	char *key = dup_text(k, klen);
	struct gpr_trace_kv *p = realloc(*kv, (*n + 1) * sizeof(**kv));
	if (!key || !p) {
		free(key);
		free(value);
		if (p)
			*kv = p;
		return -1;
	}
	*kv = p;
	p[*n].key = key;
	p[*n].value = value;
	(*n)++;
	return 0;
}

int gpr_trace_meta_chunk(const unsigned char *p, uint64_t plen, uint32_t count,
			 uint32_t *lines, struct gpr_trace_kv **into,
			 uint32_t *n, const char **why, uint32_t *line)
{
	*line = 0;
	if (count > GPR_TRACE_MAX_META - *lines) {
		*why = "more than 256 META lines in the log";
		return GPR_E_FORMAT;
	}
	uint64_t q = 0;
	for (uint32_t i = 0; i < count; i++) {
		const unsigned char *at = p + q;
		const unsigned char *nl = memchr(at, '\n', plen - q);
		*line = i + 1;
		if (!nl) {
			*why = "a line runs past its chunk";
			return GPR_E_FORMAT;
		}
		size_t len = (size_t)(nl - at);
		const unsigned char *eq = memchr(at, '=', len);
		size_t klen = eq ? (size_t)(eq - at) : 0;
		if (!eq || !key_ok(at, klen) ||
		    len - klen - 1 > GPR_TRACE_MAX_STRING) {
			*why = "a line is not key=value";
			return GPR_E_FORMAT;
		}
		if (into && put(into, n, at, klen, eq + 1, len - klen - 1))
			return GPR_E_NOMEM;
		q += len + 1;
	}
	if (q != plen) {
		*why = "bytes are left over after its lines";
		return GPR_E_FORMAT;
	}
	*lines += count;
	return 0;
}

void gpr_trace_meta_free(struct gpr_trace_kv *kv, uint32_t n)
{
	for (uint32_t i = 0; kv && i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}
