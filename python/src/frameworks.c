/*
 * The frameworks gpureclaim knows, in one table: each one's kind, probe,
 * releaser and explainer. The order is the order releases run them in, the
 * order releasers() lists them, and the order explain() asks them.
 */
#include "ext.h"

#include <string.h>

const struct gpr_py_framework gpr_py_frameworks[] = {
    {"cuda", gpr_py_torch_cuda, &gpr_py_torch_releaser, gpr_py_explain_torch},
    {"cuda", gpr_py_cupy, &gpr_py_cupy_releaser, gpr_py_explain_cupy},
    {"cuda", gpr_py_numba, &gpr_py_numba_releaser, NULL},
    {"cuda", gpr_py_jax, &gpr_py_jax_releaser, gpr_py_explain_jax},
    {"cuda", gpr_py_rmm, &gpr_py_rmm_releaser, gpr_py_explain_rmm},
    {"metal", gpr_py_torch_mps, &gpr_py_mps_releaser, gpr_py_explain_mps},
    {"metal", gpr_py_mlx, &gpr_py_mlx_releaser, gpr_py_explain_mlx},
};
const size_t gpr_py_n_frameworks =
    sizeof gpr_py_frameworks / sizeof gpr_py_frameworks[0];

const struct gpr_py_framework *gpr_py_framework(const char *name)
{
	for (size_t i = 0; i < gpr_py_n_frameworks; i++)
		if (strcmp(gpr_py_frameworks[i].releaser->name, name) == 0)
			return &gpr_py_frameworks[i];
	return NULL;
}

int gpr_py_active(const struct gpr_py_framework *f, char *why, size_t len)
{
	PyObject *handle = f->probe(why, len);
	Py_XDECREF(handle);
	return handle != NULL;
}

int gpr_py_register_builtin(struct gpr_py_state *st)
{
	for (size_t i = 0; i < gpr_py_n_frameworks; i++) {
		struct gpr_releaser r = *gpr_py_frameworks[i].releaser;
		if (!r.data)
			r.data = st;
		int rc = gpr_register(st->ctx, &r);
		if (rc)
			return rc;
	}
	return 0;
}
