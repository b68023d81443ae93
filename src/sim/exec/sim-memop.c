/*
 * Stream memory operations: cuStreamWaitValue32/64, cuStreamWriteValue32/64
 * and cuStreamBatchMemOp, in every ABI (8.0's and 11.7's _v2, which share
 * prototypes and semantics here, and their per-thread forms).
 *
 * A write stores its value when it is submitted, after the work before it
 * on its stream (data effects happen at submission in cusim, sim-exec.h).
 * A wait whose condition already holds is an ordering point. One that does
 * not hold holds the stream back: its later work cannot start until the
 * condition holds, so the next submission on that stream, a synchronization
 * of it, of its context or of an event recorded after it blocks until the
 * location changes (by the host, another process mapping the memory, or a
 * write on another stream); cuStreamQuery answers CUDA_ERROR_NOT_READY
 * meanwhile. Unlike a GPU, which queues the later work and returns, the
 * thread that submits it waits: a program that queues more work behind an
 * unsatisfied wait and only then writes the flag from the same thread
 * blocks in cusim (docs/cusim.md). A location freed while waited on faults
 * the context (CUDA_ERROR_ILLEGAL_ADDRESS), as a GPU reading freed memory.
 *
 * Remote-write flushes (CU_STREAM_WAIT_VALUE_FLUSH,
 * CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES) need a platform that reports
 * CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, which cusim's do not:
 * CUDA_ERROR_NOT_SUPPORTED.
 */
#include "sim-exec.h"

#include <string.h>

/* Polling period of an unsatisfied wait. */
#define GATE_POLL_NS 50000ull
/* cuda.h: at most this many operations in one batch. */
#define BATCH_MAX 256u

static bool condition_holds(const struct sim_gate *g, uint64_t cur)
{
	uint64_t v = g->value;

	if (!g->wide) {
		cur = (uint32_t)cur;
		v = (uint32_t)v;
	}
	switch (g->flags & 0x3u) {
	case CU_STREAM_WAIT_VALUE_GEQ:
		/* (int32_t)(*addr - value) >= 0: wrap-around aware. */
		return g->wide ? (int64_t)(cur - v) >= 0 : (int32_t)(uint32_t)(cur - v) >= 0;
	case CU_STREAM_WAIT_VALUE_EQ:
		return cur == v;
	case CU_STREAM_WAIT_VALUE_AND:
		return (cur & v) != 0;
	default: /* NOR */
		return g->wide ? ~(cur | v) != 0 : (uint32_t)~(cur | v) != 0;
	}
}

/* Reads the waited-on word; false when its memory is gone. */
static bool read_word(const struct sim_gate *g, uint64_t *ret)
{
	size_t n = g->wide ? 8 : 4;

	*ret = 0;
	if (sim_check_range(g->addr, n, NULL))
		return false;
	/* Another thread or process may be writing it: an atomic read of the aligned word. */
	if (g->wide)
		*ret = __atomic_load_n((const uint64_t *)g->addr, __ATOMIC_ACQUIRE);
	else
		*ret = __atomic_load_n((const uint32_t *)g->addr, __ATOMIC_ACQUIRE);
	return true;
}

bool sim_exec_gate_poll(struct sim_stream *s)
{
	struct sim_gate g;
	uint64_t cur;

	if (!atomic_load_explicit(&s->gated, memory_order_acquire))
		return true;
	g = s->gate;
	if (!read_word(&g, &cur)) {
		int zero = 0;

		atomic_compare_exchange_strong(&sim_exec_of(s->ctx)->sticky, &zero,
					       CUDA_ERROR_ILLEGAL_ADDRESS);
	} else if (!condition_holds(&g, cur)) {
		return false;
	}
	sim_exec_complete_at(s, sim_now_ns());
	atomic_store_explicit(&s->gated, false, memory_order_release);
	return true;
}

void sim_exec_gate_wait(struct sim_stream *s)
{
	while (!sim_exec_gate_poll(s))
		sim_exec_sleep_until(sim_now_ns() + GATE_POLL_NS);
}

/* The address of a memory operation: aligned device-accessible memory. */
static CUresult check_addr(CUdeviceptr addr, bool wide)
{
	size_t n = wide ? 8 : 4;

	if (!addr || addr % n)
		return CUDA_ERROR_INVALID_VALUE;
	return sim_check_range((uintptr_t)addr, n, NULL);
}

static CUresult do_wait(struct sim_stream *s, CUdeviceptr addr, uint64_t value, unsigned flags,
			bool wide)
{
	struct sim_gate g = {(uintptr_t)addr, value, flags, wide};
	CUresult r;

	if (flags & CU_STREAM_WAIT_VALUE_FLUSH)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (flags & ~3u)
		return CUDA_ERROR_INVALID_VALUE;
	r = check_addr(addr, wide);
	if (r)
		return r;
	/* Ordered after the work before it (and after an earlier wait of the stream). */
	sim_exec_copy(s, sim_exec_copy_ns(0, false));
	s->gate = g;
	atomic_store_explicit(&s->gated, true, memory_order_release);
	/* Satisfied already: the stream goes on at once. */
	sim_exec_gate_poll(s);
	return CUDA_SUCCESS;
}

static CUresult do_write(struct sim_stream *s, CUdeviceptr addr, uint64_t value, unsigned flags,
			 bool wide)
{
	CUresult r;

	if (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
		return CUDA_ERROR_INVALID_VALUE;
	r = check_addr(addr, wide);
	if (r)
		return r;
	/* After the work before it (sim_exec_deps waits out a pending wait). */
	sim_exec_copy(s, sim_exec_copy_ns(wide ? 8 : 4, false));
	if (wide)
		__atomic_store_n((uint64_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
	else
		__atomic_store_n((uint32_t *)(uintptr_t)addr, (uint32_t)value, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

/* The body of the single-operation entry points. */
static CUresult memop(const char *fn, CUstream stream, bool ptds, CUdeviceptr addr, uint64_t value,
		      unsigned flags, bool wide, bool write)
{
	struct sim_stream *s;
	CUresult r = sim_enter(fn);

	if (r)
		return r;
	r = sim_exec_stream_uncaptured(stream, ptds, &s);
	if (r)
		return r;
	return write ? do_write(s, addr, value, flags, wide) : do_wait(s, addr, value, flags, wide);
}

/*
 * The single-operation entry points: X(symbol, value type, write, ptds).
 * The value type gives the width (cuuint64_t: a 64-bit word); write: a
 * WriteValue, else a WaitValue; ptds: the per-thread-stream form.
 */
#define SINGLE_OPS(X)                                                                              \
	X(cuStreamWaitValue32, cuuint32_t, false, false)                                           \
	X(cuStreamWaitValue32_ptsz, cuuint32_t, false, true)                                       \
	X(cuStreamWaitValue32_v2, cuuint32_t, false, false)                                        \
	X(cuStreamWaitValue32_v2_ptsz, cuuint32_t, false, true)                                    \
	X(cuStreamWaitValue64, cuuint64_t, false, false)                                           \
	X(cuStreamWaitValue64_ptsz, cuuint64_t, false, true)                                       \
	X(cuStreamWaitValue64_v2, cuuint64_t, false, false)                                        \
	X(cuStreamWaitValue64_v2_ptsz, cuuint64_t, false, true)                                    \
	X(cuStreamWriteValue32, cuuint32_t, true, false)                                           \
	X(cuStreamWriteValue32_ptsz, cuuint32_t, true, true)                                       \
	X(cuStreamWriteValue32_v2, cuuint32_t, true, false)                                        \
	X(cuStreamWriteValue32_v2_ptsz, cuuint32_t, true, true)                                    \
	X(cuStreamWriteValue64, cuuint64_t, true, false)                                           \
	X(cuStreamWriteValue64_ptsz, cuuint64_t, true, true)                                       \
	X(cuStreamWriteValue64_v2, cuuint64_t, true, false)                                        \
	X(cuStreamWriteValue64_v2_ptsz, cuuint64_t, true, true)

#define DEFINE_OP(symbol, value_t, write, ptds)                                                    \
	SIM_API CUresult symbol(CUstream stream, CUdeviceptr addr, value_t value,                  \
				unsigned int flags)                                                \
	{                                                                                          \
		return memop(__func__, stream, ptds, addr, value, flags,                           \
			     sizeof(value_t) == sizeof(cuuint64_t), write);                        \
	}
SINGLE_OPS(DEFINE_OP)
#undef DEFINE_OP

/*
 * Validates every operation of a batch before running any: a batch that
 * fails leaves memory and the stream untouched.
 */
static CUresult batch_check(unsigned count, const CUstreamBatchMemOpParams *ops)
{
	for (unsigned i = 0; i < count; i++) {
		const CUstreamBatchMemOpParams *o = &ops[i];
		bool wide = o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64 ||
			    o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
		CUresult r;

		switch (o->operation) {
		case CU_STREAM_MEM_OP_WAIT_VALUE_32:
		case CU_STREAM_MEM_OP_WAIT_VALUE_64:
			if (o->waitValue.flags & CU_STREAM_WAIT_VALUE_FLUSH)
				return CUDA_ERROR_NOT_SUPPORTED;
			if (o->waitValue.flags & ~3u)
				return CUDA_ERROR_INVALID_VALUE;
			r = check_addr(o->waitValue.address, wide);
			break;
		case CU_STREAM_MEM_OP_WRITE_VALUE_32:
		case CU_STREAM_MEM_OP_WRITE_VALUE_64:
			if (o->writeValue.flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
				return CUDA_ERROR_INVALID_VALUE;
			r = check_addr(o->writeValue.address, wide);
			break;
		case CU_STREAM_MEM_OP_BARRIER:
			r = o->memoryBarrier.flags == CU_STREAM_MEMORY_BARRIER_TYPE_SYS ||
					    o->memoryBarrier.flags == CU_STREAM_MEMORY_BARRIER_TYPE_GPU
				    ? CUDA_SUCCESS
				    : CUDA_ERROR_INVALID_VALUE;
			break;
		case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
			return CUDA_ERROR_NOT_SUPPORTED;
		default:
			return CUDA_ERROR_INVALID_VALUE;
		}
		if (r)
			return r;
	}
	return CUDA_SUCCESS;
}

CUresult sim_memop_batch(struct sim_stream *s, unsigned count, const CUstreamBatchMemOpParams *ops,
			 bool check_only)
{
	CUresult r;

	if (count == 0 || count > BATCH_MAX || !ops)
		return CUDA_ERROR_INVALID_VALUE;
	r = batch_check(count, ops);
	if (r || check_only)
		return r;
	for (unsigned i = 0; i < count && r == CUDA_SUCCESS; i++) {
		const CUstreamBatchMemOpParams *o = &ops[i];

		switch (o->operation) {
		case CU_STREAM_MEM_OP_WAIT_VALUE_32:
			r = do_wait(s, o->waitValue.address, o->waitValue.value, o->waitValue.flags,
				    false);
			break;
		case CU_STREAM_MEM_OP_WAIT_VALUE_64:
			r = do_wait(s, o->waitValue.address, o->waitValue.value64,
				    o->waitValue.flags, true);
			break;
		case CU_STREAM_MEM_OP_WRITE_VALUE_32:
			r = do_write(s, o->writeValue.address, o->writeValue.value,
				     o->writeValue.flags, false);
			break;
		case CU_STREAM_MEM_OP_WRITE_VALUE_64:
			r = do_write(s, o->writeValue.address, o->writeValue.value64,
				     o->writeValue.flags, true);
			break;
		default:
			/* A barrier orders the memory effects before it: they are already visible. */
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			break;
		}
	}
	return r;
}

static CUresult batch(const char *fn, CUstream stream, unsigned count,
		      CUstreamBatchMemOpParams *ops, unsigned flags, bool ptds)
{
	struct sim_stream *s;
	CUresult r = sim_enter_args(fn, count != 0 && count <= BATCH_MAX && ops && flags == 0);

	if (r)
		return r;
	r = sim_exec_stream_uncaptured(stream, ptds, &s);
	return r ? r : sim_memop_batch(s, count, ops, false);
}

/* X(symbol, ptds): cuStreamBatchMemOp in its four ABI forms. */
#define BATCH_OPS(X)                                                                               \
	X(cuStreamBatchMemOp, false)                                                               \
	X(cuStreamBatchMemOp_ptsz, true)                                                           \
	X(cuStreamBatchMemOp_v2, false)                                                            \
	X(cuStreamBatchMemOp_v2_ptsz, true)

#define DEFINE_BATCH(symbol, ptds)                                                                 \
	SIM_API CUresult symbol(CUstream stream, unsigned int count,                               \
				CUstreamBatchMemOpParams *paramArray, unsigned int flags)          \
	{                                                                                          \
		return batch(__func__, stream, count, paramArray, flags, ptds);                    \
	}
BATCH_OPS(DEFINE_BATCH)
#undef DEFINE_BATCH
