/*
 * JAX/XLA's share of a GPU, from the memory_stats() of its device in a
 * backend already started (jax.devices() would start one and take the
 * pool): bytes_in_use is live, pool_bytes (bytes_reserved on allocators
 * without a pool figure) minus that is a pool that never shrinks: XLA
 * returns it only when the process ends.
 */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>

int gpr_py_explain_jax(struct gpr_py_xcall *c, struct gpr_py_xgpu *g)
{
	(void)c;
	PyObject *b = gpr_py_jax(NULL, 0);
	if (!b)
		return 0;
	PyObject *key, *backend, *dev = NULL;
	Py_ssize_t pos = 0;
	while (!dev && PyDict_Next(b, &pos, &key, &backend))
		dev = gpr_py_jax_device(backend, g->device);
	Py_DECREF(b);
	if (!dev)
		return 0;
	PyObject *stats = gpr_py_call(dev, "memory_stats", NULL);
	Py_DECREF(dev);
	if (!stats)
		return -1;
	int64_t in_use = gpr_py_item_i64(stats, "bytes_in_use");
	int64_t pool = gpr_py_item_i64(stats, "pool_bytes");
	const char *what = "pool_bytes - bytes_in_use";
	if (pool < 0) {
		pool = gpr_py_item_i64(stats, "bytes_reserved");
		what = "bytes_reserved - bytes_in_use";
	}
	Py_DECREF(stats);
	if (in_use < 0 || pool < 0)
		return gpr_py_xnote(
		    g,
		    "jax: GPU %d: memory_stats() gives no bytes_in_use or "
		    "pool_bytes; JAX's memory is in the rest",
		    g->device);
	char how[300];
	const char *pre = getenv("XLA_PYTHON_CLIENT_PREALLOCATE");
	const char *frac = getenv("XLA_PYTHON_CLIENT_MEM_FRACTION");
	snprintf(how, sizeof how,
		 "%s of the device's memory_stats(); "
		 "XLA_PYTHON_CLIENT_PREALLOCATE=%s, "
		 "XLA_PYTHON_CLIENT_MEM_FRACTION=%s",
		 what, pre ? pre : "unset", frac ? frac : "unset");
	if (gpr_py_xadd(
		g, &(struct gpr_py_part){.kind = "live",
					 .source = "jax",
					 .bytes = in_use,
					 .known = 1,
					 .exact = 1,
					 .advice = "free_arrays",
					 .how = "bytes_in_use of the device's "
						"memory_stats()"}))
		return -1;
	return gpr_py_xadd(g, &(struct gpr_py_part){.kind = "pool",
						    .source = "jax",
						    .bytes = pool - in_use,
						    .known = 1,
						    .exact = 1,
						    .hint = "xla_preallocate",
						    .how = how});
}
