/*
 * The launch API from before CUDA 4.0, still exported and still used by
 * PyCUDA: a function carries its block shape (cuFuncSetBlockShape), its
 * dynamic shared memory (cuFuncSetSharedSize) and a parameter buffer filled
 * byte by byte (cuParamSetSize, cuParamSeti/f/v); cuLaunch, cuLaunchGrid and
 * cuLaunchGridAsync then launch it like cuLaunchKernel with that buffer as
 * CU_LAUNCH_PARAM_BUFFER_POINTER.
 *
 * The settings belong to the function handle (shared by every thread that
 * uses it, as in the driver) and live as long as its module.
 */
#include "sim-launch.h"
#include "sim-module-int.h"

#include <stdlib.h>
#include <string.h>

/*
 * The legacy state of f, made on first use. Caller holds sim_module_lock().
 * NULL when out of host memory.
 */
static struct sim_func_legacy *legacy_of(struct sim_function *f)
{
	if (!f->legacy)
		f->legacy = calloc(1, sizeof(*f->legacy));
	return f->legacy;
}

/*
 * Runs `set` on the legacy state of the function h names, under the module
 * lock: the common body of the cuFuncSet* and cuParamSet* calls.
 */
static CUresult with_legacy(const char *name, CUfunction h,
			    CUresult (*set)(struct sim_func_legacy *l, const void *arg),
			    const void *arg)
{
	struct sim_function *f;
	struct sim_func_legacy *l;
	CUresult r = sim_func_enter(name, h, &f);

	if (r)
		return r;
	l = legacy_of(f);
	r = l ? set(l, arg) : CUDA_ERROR_OUT_OF_MEMORY;
	sim_module_unlock();
	return r;
}

struct shape {
	int x, y, z;
};

static CUresult set_shape(struct sim_func_legacy *l, const void *arg)
{
	const struct shape *s = arg;

	/* The limits are checked at launch, as for cuLaunchKernel; only signs here. */
	if (s->x <= 0 || s->y <= 0 || s->z <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	l->block[0] = (unsigned)s->x;
	l->block[1] = (unsigned)s->y;
	l->block[2] = (unsigned)s->z;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z)
{
	struct shape s = {x, y, z};

	return with_legacy(__func__, hfunc, set_shape, &s);
}

static CUresult set_shared(struct sim_func_legacy *l, const void *arg)
{
	l->shmem = *(const unsigned *)arg;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes)
{
	return with_legacy(__func__, hfunc, set_shared, &bytes);
}

static CUresult set_size(struct sim_func_legacy *l, const void *arg)
{
	unsigned n = *(const unsigned *)arg;

	if (n > SIM_LEGACY_PARAM_BYTES)
		return CUDA_ERROR_INVALID_VALUE;
	l->param_size = n;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuParamSetSize(CUfunction hfunc, unsigned int numbytes)
{
	return with_legacy(__func__, hfunc, set_size, &numbytes);
}

struct param {
	int offset;
	const void *src;
	unsigned n;
};

/* Bytes written anywhere in the 4 KiB parameter space; cuParamSetSize says how many are passed. */
static CUresult set_bytes(struct sim_func_legacy *l, const void *arg)
{
	const struct param *p = arg;

	if (p->offset < 0 || (size_t)p->offset + p->n > SIM_LEGACY_PARAM_BYTES ||
	    (p->n && !p->src))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(l->params + p->offset, p->src, p->n);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuParamSeti(CUfunction hfunc, int offset, unsigned int value)
{
	struct param p = {offset, &value, sizeof(value)};

	return with_legacy(__func__, hfunc, set_bytes, &p);
}

SIM_API CUresult cuParamSetf(CUfunction hfunc, int offset, float value)
{
	struct param p = {offset, &value, sizeof(value)};

	return with_legacy(__func__, hfunc, set_bytes, &p);
}

SIM_API CUresult cuParamSetv(CUfunction hfunc, int offset, void *ptr, unsigned int numbytes)
{
	struct param p = {offset, ptr, numbytes};

	return with_legacy(__func__, hfunc, set_bytes, &p);
}

/*
 * The launch of the legacy calls: the function's block shape, shared memory
 * and parameter buffer (copied under the lock, so a concurrent cuParamSet*
 * cannot tear it), a grid of w x h blocks, on `stream`.
 */
static CUresult legacy_launch(const char *name, CUfunction h, int w, int hgt, CUstream stream)
{
	unsigned char buf[SIM_LEGACY_PARAM_BYTES];
	struct sim_function *f;
	struct sim_func_legacy l;
	size_t size;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			 CU_LAUNCH_PARAM_END};
	struct sim_launch_req q = {0};
	CUresult r = sim_check_init();

	/* Not sim_func_enter: the submission below counts the call for fault injection. */
	if (r)
		return r;
	sim_module_lock();
	r = sim_func_get_locked(h, NULL, &f);
	if (r) {
		sim_module_unlock();
		return r;
	}
	if (f->legacy)
		l = *f->legacy;
	else
		memset(&l, 0, sizeof(l));
	sim_module_unlock();
	if (w <= 0 || hgt <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(buf, l.params, l.param_size);
	size = l.param_size;
	q.f = h;
	q.grid[0] = (unsigned)w;
	q.grid[1] = (unsigned)hgt;
	q.grid[2] = 1;
	memcpy(q.block, l.block, sizeof(q.block));
	q.shmem = l.shmem;
	q.stream = stream;
	q.extra = extra;
	/* No cuParamSetSize (a kernel without parameters): pass no buffer at all. */
	if (l.param_size == 0)
		q.extra = NULL;
	return sim_launch_submit(name, &q);
}

SIM_API CUresult cuLaunch(CUfunction f)
{
	return legacy_launch(__func__, f, 1, 1, NULL);
}

SIM_API CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
	return legacy_launch(__func__, f, grid_width, grid_height, NULL);
}

SIM_API CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream)
{
	return legacy_launch(__func__, f, grid_width, grid_height, hStream);
}
