/*
 * Which processes did work on a GPU lately: nvmlDeviceGetProcessUtilization,
 * the driver's per-process samples of SM and memory utilization, each
 * stamped with the CPU time in microseconds. The driver keeps a buffer of
 * them (its length is its own) and answers with the samples newer than
 * the stamp it is given; a process shows only in samples where it did
 * some work. So the latest sample of a pid is the last time it was seen
 * busy, and a pid with none did no work in what the driver kept.
 *
 * Two quirks of the call: a NULL buffer is meant to return the count
 * needed, but drivers have answered a fixed 100 whatever the processes,
 * so the call is made with a buffer at once and grown on
 * NVML_ERROR_INSUFFICIENT_SIZE; and "no sample" is NVML_ERROR_NOT_FOUND,
 * not an empty success. One pid may have several samples: the latest
 * that showed work is kept.
 */
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "gpureclaim.h"
#include "loader.h"
#include "nvml_int.h"

#define FIRST_GUESS 64u
#define MAX_ROUNDS 6
#define MAX_SAMPLES 65536u

static struct gpr__nvml_work *find(struct gpr__nvml_work *w, size_t n,
				   uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (w[i].pid == pid)
			return &w[i];
	return NULL;
}

/* The samples in s[0..count) that showed work, one per pid, into *out. */
static int keep_work(const gpr_nvmlProcessUtilizationSample_t *s,
		     unsigned count, struct gpr__nvml_work **out, size_t *n,
		     char *err, size_t errlen)
{
	struct gpr__nvml_work *w = count ? calloc(count, sizeof *w) : NULL;
	if (count && !w) {
		gpr__errf(err, errlen, "out of memory");
		return GPR_E_NOMEM;
	}
	size_t k = 0;
	for (unsigned i = 0; i < count; i++) {
		/* utilization is a percent; anything else is not a sample */
		if (s[i].pid == 0 || s[i].smUtil > 100 || s[i].memUtil > 100 ||
		    (s[i].smUtil == 0 && s[i].memUtil == 0))
			continue;
		struct gpr__nvml_work *e = find(w, k, s[i].pid);
		if (e && e->time_us >= s[i].timeStamp)
			continue;
		if (!e)
			e = &w[k++];
		*e = (struct gpr__nvml_work){s[i].pid, s[i].timeStamp,
					     s[i].smUtil, s[i].memUtil};
	}
	if (k == 0) {
		free(w);
		w = NULL;
	}
	*out = w;
	*n = k;
	return 0;
}

int gpr__nvml_work(struct gpr__nvml *m, int index, uint64_t since_us,
		   struct gpr__nvml_work **out, size_t *n, char *err,
		   size_t errlen)
{
	*out = NULL;
	*n = 0;
	nvmlDevice_t dev;
	int e = gpr__nvml_handle(m, index, &dev, err, errlen);
	if (e)
		return e;
	if (!m->api.device_get_process_utilization) {
		gpr__errf(err, errlen,
			  "%s exports no nvmlDeviceGetProcessUtilization",
			  m->path);
		return GPR_E_NO_PER_PROCESS;
	}
	gpr_nvmlProcessUtilizationSample_t *buf = NULL;
	unsigned cap = FIRST_GUESS, count = 0;
	nvmlReturn_t r = NVML_ERROR_UNKNOWN;
	for (int round = 0; round < MAX_ROUNDS; round++) {
		gpr_nvmlProcessUtilizationSample_t *grown =
		    realloc(buf, (size_t)cap * sizeof *buf);
		if (!grown) {
			free(buf);
			gpr__errf(err, errlen, "out of memory");
			return GPR_E_NOMEM;
		}
		buf = grown;
		memset(buf, 0, (size_t)cap * sizeof *buf);
		count = cap;
		double t0 = gpr__nvml_step_start(m);
		r = m->api.device_get_process_utilization(dev, buf, &count,
							  since_us);
		gpr__nvml_step_end(m, "nvmlDeviceGetProcessUtilization", index,
				   t0, r);
		if (r != NVML_ERROR_INSUFFICIENT_SIZE)
			break;
		if (count > MAX_SAMPLES) {
			free(buf);
			gpr__errf(err, errlen,
				  "nvmlDeviceGetProcessUtilization on GPU %d: "
				  "implausible count %u",
				  index, count);
			return GPR_E_NVML;
		}
		cap = count > cap ? count + count / 4 + 8 : cap * 2;
	}
	if (r == NVML_ERROR_NOT_FOUND) { /* no sample newer than since_us */
		free(buf);
		return 0;
	}
	if (r == NVML_ERROR_NOT_SUPPORTED) {
		free(buf);
		gpr__errf(err, errlen,
			  "nvmlDeviceGetProcessUtilization on GPU %d: not "
			  "supported (MIG, or an older GPU)",
			  index);
		return GPR_E_NO_PER_PROCESS;
	}
	if (r != NVML_SUCCESS) {
		free(buf);
		return gpr__nvml_fail(m, "nvmlDeviceGetProcessUtilization",
				      index, r, err, errlen);
	}
	if (count > cap) {
		free(buf);
		gpr__errf(err, errlen,
			  "nvmlDeviceGetProcessUtilization on GPU %d: %u "
			  "samples reported in room for %u",
			  index, count, cap);
		return GPR_E_NVML;
	}
	e = keep_work(buf, count, out, n, err, errlen);
	free(buf);
	return e;
}
