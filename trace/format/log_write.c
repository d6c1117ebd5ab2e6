/*
 * The trace log writer. Each chunk goes out in one writev(); after a
 * failed write (a full disk, any error) the file is cut back to the end
 * of its last complete chunk, so what was written stays readable. The
 * header is rewritten at close with the counts and the complete flag.
 */
#include "log_write.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "trace_ops.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the log is little-endian and written as laid out in memory");

/* Writes all of iov, retrying short writes and EINTR. */
static int write_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t k = writev(fd, iov, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EIO;
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}

/*
 * Appends one chunk (all of iov): w->good moves past it, or on failure
 * the file is cut back to w->good and the error kept in w->err.
 */
static int put_chunk(struct gpr_trace_writer *w, struct iovec *iov, int n)
{
	uint64_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	int rc = write_all(w->fd, iov, n);
	if (rc < 0) {
		w->err = -rc;
		if (ftruncate(w->fd, (off_t)w->good) == 0)
			lseek(w->fd, (off_t)w->good, SEEK_SET);
		return rc;
	}
	w->good += len;
	return 0;
}

static void chunk_header(unsigned char out[GPR_TRACE_CHUNK_HEADER_SIZE],
			 const char tag[4], uint32_t count, uint64_t len)
{
	memcpy(out, tag, 4);
	memcpy(out + 4, &count, 4);
	memcpy(out + 8, &len, 8);
}

int gpr_trace_writer_open(struct gpr_trace_writer *w, const char *path,
			  uint32_t pid, uint64_t start_realtime_ns,
			  uint64_t start_mono_ns)
{
	memset(w, 0, sizeof(*w));
	w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		     0600);
	if (w->fd < 0)
		return -errno;
	memcpy(w->hdr.magic, GPR_TRACE_MAGIC, 8);
	w->hdr.version = GPR_TRACE_VERSION;
	w->hdr.header_size = GPR_TRACE_HEADER_SIZE;
	w->hdr.record_size = GPR_TRACE_RECORD_SIZE;
	w->hdr.pid = pid;
	w->hdr.clock = GPR_TRACE_CLOCK_MONOTONIC;
	w->hdr.start_realtime_ns = start_realtime_ns;
	w->hdr.start_mono_ns = start_mono_ns;
	struct iovec iov = {&w->hdr, sizeof(w->hdr)};
	int rc = write_all(w->fd, &iov, 1);
	w->good = sizeof(w->hdr);
	if (rc == 0) {
		const char *names[GPR_TRACE_N_OPS];
		for (unsigned i = 0; i < GPR_TRACE_N_OPS; i++)
			names[i] = gpr_trace_op_name(i);
		rc = gpr_trace_writer_strings(w, names, GPR_TRACE_N_OPS);
	}
	if (rc < 0) {
		close(w->fd);
		unlink(path);
		w->fd = -1;
	}
	return rc;
}

int gpr_trace_writer_strings(struct gpr_trace_writer *w, const char *const *s,
			     uint32_t n)
{
	if (w->err)
		return -w->err;
	if (n == 0)
		return 0;
	/* Batches of up to 64 strings: 3 iovecs each, within IOV_MAX. */
	enum { BATCH = 64 };
	uint32_t done = 0;
	while (done < n) {
		uint32_t k = n - done < BATCH ? n - done : BATCH;
		unsigned char ch[GPR_TRACE_CHUNK_HEADER_SIZE];
		uint32_t first = w->strings + done;
		uint32_t lens[BATCH];
		struct iovec iov[2 + 2 * BATCH];
		uint64_t payload = 4;
		int m = 2;
		for (uint32_t i = 0; i < k; i++) {
			const char *str = s[done + i] ? s[done + i] : "";
			size_t len = strlen(str);
			if (len > GPR_TRACE_MAX_STRING)
				len = GPR_TRACE_MAX_STRING;
			lens[i] = (uint32_t)len;
			iov[m].iov_base = &lens[i];
			iov[m++].iov_len = 4;
			iov[m].iov_base = (void *)str;
			iov[m++].iov_len = len;
			payload += 4 + len;
		}
		chunk_header(ch, "STRS", k, payload);
		iov[0].iov_base = ch;
		iov[0].iov_len = sizeof(ch);
		iov[1].iov_base = &first;
		iov[1].iov_len = 4;
		int rc = put_chunk(w, iov, m);
		if (rc < 0)
			return rc;
		done += k;
	}
	w->strings += n;
	return 0;
}

int gpr_trace_writer_meta(struct gpr_trace_writer *w, const char *const *kv,
			  uint32_t n)
{
	if (w->err)
		return -w->err;
	if (n == 0)
		return 0;
	enum { MAX = 64 };
	if (n > MAX)
		n = MAX;
	unsigned char ch[GPR_TRACE_CHUNK_HEADER_SIZE];
	struct iovec iov[1 + 2 * MAX];
	uint64_t payload = 0;
	int m = 1;
	for (uint32_t i = 0; i < n; i++) {
		const char *line = kv[i] ? kv[i] : "";
		size_t len = strcspn(line, "\n");
		if (len > GPR_TRACE_MAX_STRING)
			len = GPR_TRACE_MAX_STRING;
		iov[m].iov_base = (void *)line;
		iov[m++].iov_len = len;
		iov[m].iov_base = (void *)"\n";
		iov[m++].iov_len = 1;
		payload += len + 1;
	}
	chunk_header(ch, "META", n, payload);
	iov[0].iov_base = ch;
	iov[0].iov_len = sizeof(ch);
	return put_chunk(w, iov, m);
}

int gpr_trace_writer_records(struct gpr_trace_writer *w,
			     const struct gpr_trace_rec *r, size_t n)
{
	if (w->err)
		return -w->err;
	while (n > 0) {
		/* A chunk's count is 32-bit; stay well inside it. */
		uint32_t k = n > (1u << 20) ? (1u << 20) : (uint32_t)n;
		unsigned char ch[GPR_TRACE_CHUNK_HEADER_SIZE];
		chunk_header(ch, "RECS", k, (uint64_t)k * sizeof(*r));
		struct iovec iov[2] = {{ch, sizeof(ch)},
				       {(void *)r, (size_t)k * sizeof(*r)}};
		int rc = put_chunk(w, iov, 2);
		if (rc < 0)
			return rc;
		w->records += k;
		r += k;
		n -= k;
	}
	return 0;
}

int gpr_trace_writer_close(struct gpr_trace_writer *w, uint64_t end_mono_ns,
			   uint32_t dropped)
{
	int rc = -w->err;
	if (rc == 0) {
		w->hdr.flags |= GPR_TRACE_F_COMPLETE;
		w->hdr.end_mono_ns = end_mono_ns;
		w->hdr.record_count = w->records;
		w->hdr.string_count = w->strings;
		w->hdr.dropped = dropped;
		ssize_t k = pwrite(w->fd, &w->hdr, sizeof(w->hdr), 0);
		if (k != (ssize_t)sizeof(w->hdr))
			rc = k < 0 ? -errno : -EIO;
	}
	if (close(w->fd) < 0 && rc == 0)
		rc = -errno;
	w->fd = -1;
	return rc;
}
