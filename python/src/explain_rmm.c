/*
 * RMM's share of a GPU (only when the user imported rmm, and set a
 * resource for that GPU from Python): the resource chain, and
 * - a PoolMemoryResource: its pool_size(), exact; live bytes where a
 *   statistics or tracking adaptor counts them; the rest of the pool never
 *   shrinks (RMM has no public shrink; rmm.reinitialize would invalidate
 *   every live buffer): a "pool" part, with a hint for the next start;
 * - a CudaAsyncMemoryResource: the reserve and the bytes in use of its
 *   pool from the driver, once a release() found the pool's handle (Python
 *   does not expose it, and explain() allocates nothing to find it); the
 *   reserve above what is used is what release() trims, unless that is
 *   what the last trim left (chunks holding live allocations);
 * - any other resource: the counting adaptors' live bytes, if any.
 * RMM's default resource (nothing set from Python) keeps no cache.
 */
#include "ext.h"

#include <stdio.h>

static const char ADAPTOR_LIVE[] =
    "the statistics/tracking adaptor's live bytes";

/* RMM's live bytes (known: counted by an adaptor in the chain). */
static int live_part(struct gpr_py_xgpu *g, int64_t live, int known,
		     const char *how, PyObject *d)
{
	return gpr_py_xadd(g, &(struct gpr_py_part){.kind = "live",
						    .source = "rmm",
						    .bytes = live,
						    .known = known,
						    .exact = 1,
						    .advice = "free_arrays",
						    .how = how,
						    .detail = d});
}

static int async_parts(struct gpr_py_xcall *c, struct gpr_py_xgpu *g,
		       PyObject *leaf, int64_t live, int live_known,
		       PyObject *d)
{
	struct gpr_py_rmm_pool *p = gpr_py_rmm_pool(c->st, g->device, leaf);
	uint64_t reserved = 0, used = 0;
	int err =
	    p ? gpr_pool_bytes(c->st->ctx, p->pool, &reserved, &used) : -1;
	if (err) {
		return live_part(g, live, live_known, ADAPTOR_LIVE, d) ||
			       gpr_py_xadd(
				   g,
				   &(struct gpr_py_part){
				       .kind = "releasable",
				       .source = "rmm (CUDA async pool)",
				       .known = 0,
				       .advice = "release",
				       .how = "the reserve of RMM's CUDA async "
					      "pool: read once a release() has "
					      "found the pool (Python does not "
					      "expose its handle); in the rest "
					      "until then"})
			   ? -1
			   : 0;
	}
	int trimmed = reserved <= p->trimmed_to;
	char how[300];
	snprintf(how, sizeof how,
		 trimmed ? "the pool's reserve above its bytes in use, as "
			   "release()'s trim left it: chunks that hold live "
			   "allocations (cuMemPoolGetAttribute)"
			 : "the pool's reserve above its bytes in use "
			   "(cuMemPoolGetAttribute RESERVED - USED): "
			   "release() trims it");
	return gpr_py_xadd(
		   g,
		   &(struct gpr_py_part){
		       .kind = "live",
		       .source = "rmm",
		       .bytes = (int64_t)used,
		       .known = 1,
		       .exact = 1,
		       .evidence = "driver_pool",
		       .advice = "free_arrays",
		       .how = "USED_MEM_CURRENT of RMM's CUDA async pool",
		       .detail = d}) ||
		       gpr_py_xadd(
			   g,
			   &(struct gpr_py_part){
			       .kind = trimmed ? "fragmented" : "releasable",
			       .source = "rmm (CUDA async pool)",
			       .bytes = (int64_t)(reserved - used),
			       .known = 1,
			       .exact = 1,
			       .evidence = "driver_pool",
			       .advice = trimmed ? NULL : "release",
			       .how = how})
		   ? -1
		   : 0;
}

/* A PoolMemoryResource of `size` bytes (its pool_size()). */
static int pool_parts(struct gpr_py_xgpu *g, int64_t size, int64_t live,
		      int live_known, PyObject *d)
{
	if (live_known && live_part(g, live, 1, ADAPTOR_LIVE, d))
		return -1;
	return gpr_py_xadd(
	    g, &(struct gpr_py_part){
		   .kind = "pool",
		   .source = "rmm",
		   .bytes = live_known ? size - live : size,
		   .known = 1,
		   .exact = 1,
		   .hint = "rmm_pool",
		   .how = live_known
			      ? "PoolMemoryResource.pool_size() minus the live "
				"bytes: RMM's pool never returns memory "
				"(no public shrink; rmm.reinitialize() would "
				"invalidate every live buffer)"
			      : "PoolMemoryResource.pool_size(), live bytes "
				"included (add a StatisticsResourceAdaptor to "
				"count them): RMM's pool never returns memory",
		   .detail = live_known ? NULL : d});
}

int gpr_py_explain_rmm(struct gpr_py_xcall *c, struct gpr_py_xgpu *g)
{
	PyObject *mr = gpr_py_rmm(NULL, 0);
	if (!mr)
		return 0;
	struct gpr_py_rmm_chain ch;
	int found = gpr_py_rmm_chain(mr, g->device, &ch);
	int rc = found < 0 ? -1 : 0;
	if (found == 1) {
		int64_t live = 0, size = -1;
		int live_known = gpr_py_rmm_live(&ch, &live) == 0;
		/* a pool whose size cannot be read is an error (raised) */
		if (ch.pool &&
		    gpr_py_call_i64(ch.pool, "pool_size", &size, NULL))
			rc = -1;
		PyObject *d =
		    rc ? NULL
		       : Py_BuildValue("{s:O,s:L,s:L}", "chain", ch.names,
				       "pool_size", (long long)size,
				       "current_bytes",
				       (long long)(live_known ? live : -1));
		if (!d)
			rc = -1;
		else if (ch.pool)
			rc = pool_parts(g, size, live, live_known, d);
		else if (ch.async)
			rc = async_parts(c, g, ch.leaf, live, live_known, d);
		else
			rc = live_part(
			    g, live, live_known,
			    live_known ? ADAPTOR_LIVE
				       : "RMM's resource keeps no figure (add "
					 "a StatisticsResourceAdaptor): in the "
					 "rest",
			    d);
		Py_XDECREF(d);
	}
	gpr_py_rmm_chain_free(&ch);
	Py_DECREF(mr);
	return rc;
}
