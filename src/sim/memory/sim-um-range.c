/*
 * Advice, prefetches, discards and stream attachment of managed memory
 * (cuMemAdvise, cuMemPrefetchAsync, cuMemPrefetchBatchAsync,
 * cuMemDiscardBatchAsync, cuMemDiscardAndPrefetchBatchAsync,
 * cuMemRangeGetAttribute(s), cuStreamAttachMemAsync), both ABIs of each
 * (CUDA 8.0's CUdevice, CUDA 12.2's CUmemLocation).
 *
 * Everything is recorded in the allocation's range state (struct
 * sim_um_range, sim-um.h) with byte precision and answered from there, as
 * cuda.h defines the queries: a value is reported for a range only when
 * every byte of it has that value. The paging model (sim-um.c) reads the
 * advice from there. Prefetches and discards are stream ordered: a
 * prefetch moves the range's chunks to its target at once (sim-um.c) and
 * occupies its stream for the modelled transfer; a discard punches the
 * range's whole pages out of device memory (their contents are
 * indeterminate by definition), gives up its whole chunks wherever they
 * are, and marks it discarded until prefetched again.
 */
#include "sim-exec.h"
#include "sim-um.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The range state of a managed allocation (made with it: sim_um_alloc). Caller holds sim.lock. */
static struct sim_um_range *range_of(struct sim_alloc *a)
{
	return a->um;
}

/* Splits so that a segment boundary falls at off; false when out of memory. */
static bool split_at(struct sim_um_range *r, size_t off)
{
	for (unsigned i = 0; i < r->nsegs; i++) {
		struct sim_um_seg *s = &r->segs[i];

		if (off <= s->off || off >= s->off + s->len)
			continue;
		if (r->nsegs == r->cap) {
			unsigned cap = r->cap * 2;
			struct sim_um_seg *v = realloc(r->segs, cap * sizeof(*v));

			if (!v)
				return false;
			r->segs = v;
			r->cap = cap;
			s = &r->segs[i];
		}
		memmove(s + 1, s, (r->nsegs - i) * sizeof(*s));
		r->nsegs++;
		s[1].off = off;
		s[1].len = s->off + s->len - off;
		s->len = off - s->off;
		return true;
	}
	return true;
}

static bool loc_eq(struct sim_um_loc a, struct sim_um_loc b)
{
	return a.type == b.type && (a.type == CU_MEM_LOCATION_TYPE_INVALID || a.id == b.id);
}

static bool seg_same(const struct sim_um_seg *a, const struct sim_um_seg *b)
{
	return a->read_mostly == b->read_mostly && a->discarded == b->discarded &&
	       a->accessed_by == b->accessed_by && loc_eq(a->preferred, b->preferred) &&
	       loc_eq(a->prefetched, b->prefetched);
}

/* Merges neighbours with equal state, so the segment count stays small. */
static void coalesce(struct sim_um_range *r)
{
	unsigned j = 0;

	for (unsigned i = 1; i < r->nsegs; i++) {
		if (seg_same(&r->segs[j], &r->segs[i]))
			r->segs[j].len += r->segs[i].len;
		else
			r->segs[++j] = r->segs[i];
	}
	r->nsegs = j + 1;
}

/* What an operation does to each segment of its range. */
struct seg_op {
	CUmem_advise advice;		/* 0: not advice */
	bool prefetch, discard;
	struct sim_um_loc loc;
	uint32_t bit;			/* accessed-by bit of loc */
	int target;			/* prefetch: instance device, -1: the host */
	uint64_t ns;			/* prefetch: the transfer's modelled time */
};

static void apply(struct sim_um_seg *s, struct seg_op *op)
{
	switch (op->advice) {
	case CU_MEM_ADVISE_SET_READ_MOSTLY:
		s->read_mostly = true;
		break;
	case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
		s->read_mostly = false;
		break;
	case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
		s->preferred = op->loc;
		break;
	case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
		s->preferred = (struct sim_um_loc){CU_MEM_LOCATION_TYPE_INVALID, 0};
		break;
	case CU_MEM_ADVISE_SET_ACCESSED_BY:
		s->accessed_by |= op->bit;
		break;
	case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
		s->accessed_by &= ~op->bit;
		break;
	default:
		break;
	}
	if (op->discard)
		s->discarded = true;
	if (op->prefetch) {
		s->prefetched = op->loc;
		s->discarded = false;
	}
}

/*
 * The managed allocation holding [p, p+count), locked: sim.lock is held on
 * success. CUDA_ERROR_INVALID_VALUE (lock released) for anything else.
 */
static CUresult managed_locked(CUdeviceptr p, size_t count, struct sim_alloc **ret)
{
	struct sim_alloc *a;

	if (count == 0 || p + count < p)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim.lock);
	a = sim_registry_find_locked((uintptr_t)p);
	if (!a || a->kind != SIM_ALLOC_MANAGED || p + count > a->base + a->size) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*ret = a;
	return CUDA_SUCCESS;
}

/* Applies op to [p, p+count) of its managed allocation. */
static CUresult range_apply(CUdeviceptr p, size_t count, struct seg_op *op)
{
	struct sim_alloc *a;
	struct sim_um_range *r;
	size_t lo, hi;
	CUresult res = managed_locked(p, count, &a);

	if (res)
		return res;
	r = range_of(a);
	lo = (size_t)(p - a->base);
	hi = lo + count;
	if (!r || !split_at(r, lo) || !split_at(r, hi)) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (unsigned i = 0; i < r->nsegs; i++)
		if (r->segs[i].off >= lo && r->segs[i].off + r->segs[i].len <= hi)
			apply(&r->segs[i], op);
	coalesce(r);
	if (op->discard) {
		/* The whole 4 KiB pages of the range go back: their contents are no longer wanted. */
		uintptr_t first = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
		uintptr_t last = ((uintptr_t)p + count) & ~(uintptr_t)4095;

		if (last > first)
			fallocate(sim_vram_fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  (off_t)(a->arena_off + (first - a->base)), (off_t)(last - first));
		sim_um_discard_locked(a, lo, count);
	}
	if (op->prefetch)
		op->ns += sim_um_prefetch_locked(a, lo, count, op->target);
	pthread_mutex_unlock(&sim.lock);
	return CUDA_SUCCESS;
}

/* ---- locations ---- */

/* Validates a location as advice or a prefetch may name it; fills op->loc and op->bit. */
static CUresult check_loc(CUmemLocation l, bool prefetch, struct seg_op *op)
{
	switch (l.type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		if (sim_check_device(l.id))
			return CUDA_ERROR_INVALID_DEVICE;
		op->loc = (struct sim_um_loc){CU_MEM_LOCATION_TYPE_DEVICE, l.id};
		op->bit = 1u << l.id;
		op->target = sim_dev_index(l.id);
		return CUDA_SUCCESS;
	case CU_MEM_LOCATION_TYPE_HOST:
		op->loc = (struct sim_um_loc){CU_MEM_LOCATION_TYPE_HOST, 0};
		op->bit = SIM_UM_ACCESSED_BY_HOST;
		op->target = -1;
		return CUDA_SUCCESS;
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
		/* The simulated host is one NUMA node, 0. */
		if (l.id != 0)
			return CUDA_ERROR_INVALID_VALUE;
		op->loc = (struct sim_um_loc){CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
		op->bit = SIM_UM_ACCESSED_BY_HOST;
		op->target = -1;
		return CUDA_SUCCESS;
	case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
		if (!prefetch)
			return CUDA_ERROR_INVALID_VALUE;
		op->loc = (struct sim_um_loc){CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
		op->bit = SIM_UM_ACCESSED_BY_HOST;
		op->target = -1;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* CUDA 8.0's location argument: a device ordinal or CU_DEVICE_CPU. */
static CUmemLocation loc_of_device(CUdevice d)
{
	CUmemLocation l = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d};

	if (d == CU_DEVICE_CPU)
		l.type = CU_MEM_LOCATION_TYPE_HOST;
	return l;
}

/* ---- cuMemAdvise ---- */

static CUresult advise(const char *name, CUdeviceptr p, size_t count, CUmem_advise advice,
		       CUmemLocation loc)
{
	struct seg_op op = {.advice = advice};
	CUresult r = sim_enter(name);

	if (r)
		return r;
	switch (advice) {
	case CU_MEM_ADVISE_SET_READ_MOSTLY:
	case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
	case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
		break;	/* the location is ignored */
	case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
	case CU_MEM_ADVISE_SET_ACCESSED_BY:
	case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
		r = check_loc(loc, false, &op);
		if (r)
			return r;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return range_apply(p, count, &op);
}

SIM_API CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
				CUmemLocation location)
{
	return advise(__func__, devPtr, count, advice, location);
}

SIM_API CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
			     CUdevice device)
{
	return advise(__func__, devPtr, count, advice, loc_of_device(device));
}

/* ---- prefetches and discards ---- */

/* A prefetch's time on its stream: the operation's latency and the transfer. */
static uint64_t prefetch_ns(uint64_t transfer_ns)
{
	return sim_exec_copy_ns(0, false) + transfer_ns;
}

static CUresult prefetch(const char *name, CUdeviceptr p, size_t count, CUmemLocation loc,
			 unsigned flags, CUstream h, bool ptds)
{
	struct seg_op op = {.prefetch = true};
	struct sim_stream *s;
	CUresult r = sim_enter_args(name, flags == 0);

	if (r)
		return r;
	r = check_loc(loc, true, &op);
	if (r)
		return r;
	r = sim_exec_stream_uncaptured(h, ptds, &s);
	if (r)
		return r;
	r = range_apply(p, count, &op);
	if (r == CUDA_SUCCESS)
		sim_exec_copy(s, prefetch_ns(op.ns));
	return r;
}

SIM_API CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
				       unsigned int flags, CUstream hStream)
{
	return prefetch(__func__, devPtr, count, location, flags, hStream, false);
}

SIM_API CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
					    CUmemLocation location, unsigned int flags,
					    CUstream hStream)
{
	return prefetch(__func__, devPtr, count, location, flags, hStream, true);
}

SIM_API CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
				    CUstream hStream)
{
	return prefetch(__func__, devPtr, count, loc_of_device(dstDevice), 0, hStream, false);
}

SIM_API CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
					 CUstream hStream)
{
	return prefetch(__func__, devPtr, count, loc_of_device(dstDevice), 0, hStream, true);
}

/*
 * The common body of the batch calls: every range checked before any is
 * touched; discards first, then prefetches to the location whose
 * prefetchLocIdxs entry covers each operation (cuda.h: the first index is
 * 0 and they increase). The batch runs in stream order; not on the legacy
 * NULL stream.
 */
static CUresult batch(const char *name, CUdeviceptr *dptrs, size_t *sizes, size_t count,
		      CUmemLocation *locs, size_t *loc_idxs, size_t nlocs, unsigned long long flags,
		      CUstream h, bool ptds, bool discard, bool pf)
{
	struct sim_stream *s;
	uint64_t ns = 0;
	CUresult r = sim_enter_args(name, dptrs && sizes && count != 0 && flags == 0 && h != NULL);

	if (r)
		return r;
	if (pf) {
		if (!locs || !loc_idxs || nlocs == 0 || nlocs > count || loc_idxs[0] != 0)
			return CUDA_ERROR_INVALID_VALUE;
		for (size_t i = 0; i < nlocs; i++) {
			struct seg_op op;

			if ((i && loc_idxs[i] <= loc_idxs[i - 1]) || loc_idxs[i] >= count ||
			    check_loc(locs[i], true, &op))
				return CUDA_ERROR_INVALID_VALUE;
		}
	}
	r = sim_exec_stream_uncaptured(h, ptds, &s);
	if (r)
		return r;
	if (s->legacy)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		struct sim_alloc *a;

		r = managed_locked(dptrs[i], sizes[i], &a);
		if (r)
			return r;
		pthread_mutex_unlock(&sim.lock);
	}
	for (size_t i = 0, li = 0; i < count; i++) {
		struct seg_op op = {.discard = discard};

		if (discard) {
			r = range_apply(dptrs[i], sizes[i], &op);
			if (r)
				return r;
		}
		if (!pf)
			continue;
		while (li + 1 < nlocs && loc_idxs[li + 1] <= i)
			li++;
		op = (struct seg_op){.prefetch = true};
		check_loc(locs[li], true, &op);
		r = range_apply(dptrs[i], sizes[i], &op);
		if (r)
			return r;
		ns += op.ns;
	}
	sim_exec_copy(s, prefetch_ns(ns));
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
					 CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
					 size_t numPrefetchLocs, unsigned long long flags,
					 CUstream hStream)
{
	return batch(__func__, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
		     flags, hStream, false, false, true);
}

SIM_API CUresult cuMemPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
					      CUmemLocation *prefetchLocs,
					      size_t *prefetchLocIdxs, size_t numPrefetchLocs,
					      unsigned long long flags, CUstream hStream)
{
	return batch(__func__, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
		     flags, hStream, true, false, true);
}

SIM_API CUresult cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
					unsigned long long flags, CUstream hStream)
{
	return batch(__func__, dptrs, sizes, count, NULL, NULL, 0, flags, hStream, false, true,
		     false);
}

SIM_API CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
					     unsigned long long flags, CUstream hStream)
{
	return batch(__func__, dptrs, sizes, count, NULL, NULL, 0, flags, hStream, true, true,
		     false);
}

SIM_API CUresult cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes,
						   size_t count, CUmemLocation *prefetchLocs,
						   size_t *prefetchLocIdxs, size_t numPrefetchLocs,
						   unsigned long long flags, CUstream hStream)
{
	return batch(__func__, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
		     flags, hStream, false, true, true);
}

SIM_API CUresult cuMemDiscardAndPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes,
							size_t count, CUmemLocation *prefetchLocs,
							size_t *prefetchLocIdxs,
							size_t numPrefetchLocs,
							unsigned long long flags, CUstream hStream)
{
	return batch(__func__, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
		     flags, hStream, true, true, true);
}

/* ---- range attributes ---- */

/* The CUDA 8.0 form of a location: ordinal, CU_DEVICE_CPU, or CU_DEVICE_INVALID. */
static int device_of(struct sim_um_loc l)
{
	switch (l.type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		return l.id;
	case CU_MEM_LOCATION_TYPE_HOST:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
		return CU_DEVICE_CPU;
	default:
		return CU_DEVICE_INVALID;
	}
}

/*
 * Answers one attribute for [lo, hi) of r (NULL: nothing ever recorded).
 * Caller holds sim.lock.
 */
static CUresult answer(const struct sim_um_range *r, size_t size, size_t lo, size_t hi,
		       void *data, size_t dataSize, CUmem_range_attribute attr)
{
	struct sim_um_seg none = {.len = size};
	const struct sim_um_seg *segs = r ? r->segs : &none;
	unsigned n = r ? r->nsegs : 1;
	bool first = true, same_pref = true, same_pf = true, rm = true;
	struct sim_um_loc pref = {0}, pf = {0};
	uint32_t acc = ~0u;

	for (unsigned i = 0; i < n; i++) {
		const struct sim_um_seg *s = &segs[i];

		if (s->off + s->len <= lo || s->off >= hi)
			continue;
		if (first) {
			pref = s->preferred;
			pf = s->prefetched;
			first = false;
		}
		same_pref = same_pref && loc_eq(pref, s->preferred);
		same_pf = same_pf && loc_eq(pf, s->prefetched);
		rm = rm && s->read_mostly;
		acc &= s->accessed_by;
	}
	if (!same_pref)
		pref.type = CU_MEM_LOCATION_TYPE_INVALID;
	if (!same_pf)
		pf.type = CU_MEM_LOCATION_TYPE_INVALID;
	switch (attr) {
	case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
		if (dataSize != 4)
			return CUDA_ERROR_INVALID_VALUE;
		*(int *)data = rm;
		return CUDA_SUCCESS;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
		if (dataSize != 4)
			return CUDA_ERROR_INVALID_VALUE;
		*(int *)data = device_of(attr == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION ? pref : pf);
		return CUDA_SUCCESS;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
		if (dataSize != sizeof(CUmemLocationType))
			return CUDA_ERROR_INVALID_VALUE;
		*(CUmemLocationType *)data =
			(attr == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE ? pref : pf).type;
		return CUDA_SUCCESS;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
		if (dataSize != 4)
			return CUDA_ERROR_INVALID_VALUE;
		*(int *)data = (attr == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID ? pref : pf).id;
		return CUDA_SUCCESS;
	case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
		size_t slots = dataSize / 4, k = 0;
		int *out = data;

		if (dataSize == 0 || dataSize % 4)
			return CUDA_ERROR_INVALID_VALUE;
		/* Devices only: the host is a location for advice, not a device id here. */
		for (int d = 0; d < sim.ndev && k < slots; d++)
			if (acc & (1u << d))
				out[k++] = d;
		for (; k < slots; k++)
			out[k] = CU_DEVICE_INVALID;
		return CUDA_SUCCESS;
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult range_attrs(const char *name, void **data, size_t *sizes,
			    CUmem_range_attribute *attrs, size_t n, CUdeviceptr p, size_t count)
{
	struct sim_alloc *a;
	CUresult r = sim_enter_args(name, data && sizes && attrs && n != 0);

	if (r)
		return r;
	for (size_t i = 0; i < n; i++)
		if (!data[i])
			return CUDA_ERROR_INVALID_VALUE;
	r = managed_locked(p, count, &a);
	if (r)
		return r;
	for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++)
		r = answer(a->um, a->size, (size_t)(p - a->base), (size_t)(p - a->base) + count,
			   data[i], sizes[i], attrs[i]);
	pthread_mutex_unlock(&sim.lock);
	return r;
}

SIM_API CUresult cuMemRangeGetAttribute(void *data, size_t dataSize,
					CUmem_range_attribute attribute, CUdeviceptr devPtr,
					size_t count)
{
	return range_attrs(__func__, &data, &dataSize, &attribute, 1, devPtr, count);
}

SIM_API CUresult cuMemRangeGetAttributes(void **data, size_t *dataSizes,
					 CUmem_range_attribute *attributes, size_t numAttributes,
					 CUdeviceptr devPtr, size_t count)
{
	return range_attrs(__func__, data, dataSizes, attributes, numAttributes, devPtr, count);
}

/* ---- stream attachment ---- */

static CUresult attach(const char *name, CUstream h, CUdeviceptr dptr, size_t length,
		       unsigned flags, bool ptds)
{
	struct sim_stream *s;
	struct sim_alloc *a;
	struct sim_um_range *r;
	CUresult res = sim_enter(name);

	if (res)
		return res;
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
	    flags != CU_MEM_ATTACH_SINGLE)
		return CUDA_ERROR_INVALID_VALUE;
	res = sim_exec_stream_uncaptured(h, ptds, &s);
	if (res)
		return res;
	/* cuda.h: attaching singly to the NULL stream (a virtual global stream) is an error. */
	if (flags == CU_MEM_ATTACH_SINGLE && (s->legacy || s->per_thread))
		return CUDA_ERROR_INVALID_VALUE;
	res = managed_locked(dptr, 1, &a);
	if (res)
		return res;
	/* The whole allocation: length 0 or its size, from its base. */
	if (dptr != a->base || (length != 0 && length != a->size)) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	r = range_of(a);
	if (r) {
		r->attach = flags;
		r->attach_stream = flags == CU_MEM_ATTACH_SINGLE ? s : NULL;
	}
	pthread_mutex_unlock(&sim.lock);
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	sim_exec_copy(s, sim_exec_copy_ns(0, false));
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
					unsigned int flags)
{
	return attach(__func__, hStream, dptr, length, flags, false);
}

SIM_API CUresult cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length,
					     unsigned int flags)
{
	return attach(__func__, hStream, dptr, length, flags, true);
}
