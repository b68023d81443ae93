/*
 * Peer access between simulated GPUs: cuCtxEnablePeerAccess /
 * cuCtxDisablePeerAccess, the atomic capabilities of links and of the host.
 *
 * Every pair of distinct simulated devices can peer (cuDeviceCanAccessPeer),
 * as on an NVLink-connected board. Enabling access records the peer context
 * in the current one; kernels of a context may then touch device memory
 * allocated in that peer context. cusim enforces it where it runs code: a
 * built-in kernel given device memory of another device whose context is
 * not a peer faults (CUDA_ERROR_ILLEGAL_ADDRESS, sticky), as a real kernel
 * dereferencing unmapped peer memory does. Copies between devices
 * (cuMemcpyPeer, cuMemcpy with unified addresses) need no peer access, as
 * in the driver (they are staged when there is none).
 */
#include "sim.h"

#include <string.h>

/* The peer entry of `peer` in c, or -1. Caller holds sim.lock. */
static int peer_index(const struct sim_ctx *c, const struct sim_ctx *peer)
{
	for (unsigned i = 0; i < c->npeers; i++)
		if (c->peers[i].ctx == peer && c->peers[i].id == peer->id)
			return (int)i;
	return -1;
}

/* Drops entries whose peer context was destroyed since. Caller holds sim.lock. */
static void prune(struct sim_ctx *c)
{
	unsigned j = 0;

	for (unsigned i = 0; i < c->npeers; i++)
		if (sim_ctx_valid(c->peers[i].ctx) && c->peers[i].ctx->id == c->peers[i].id)
			c->peers[j++] = c->peers[i];
	c->npeers = j;
}

/*
 * The prologue of enabling and disabling peer access: sim_enter_args, then
 * the current context in *ret_c and the live peer context in *ret_p.
 */
static CUresult peer_enter(const char *name, bool args_ok, CUcontext peer, struct sim_ctx **ret_c,
			   struct sim_ctx **ret_p)
{
	CUresult r = sim_enter_args(name, args_ok);

	if (r == CUDA_SUCCESS)
		r = sim_ctx_resolve(NULL, ret_c);
	if (r)
		return r;
	*ret_p = (struct sim_ctx *)peer;
	return sim_ctx_valid(*ret_p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	struct sim_ctx *c, *p;
	CUresult r = peer_enter(__func__, Flags == 0, peerContext, &c, &p);

	if (r)
		return r;
	/* cuDeviceCanAccessPeer says no for a device and itself. */
	if (p->device == c->device)
		return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	pthread_mutex_lock(&sim.lock);
	prune(c);
	if (peer_index(c, p) >= 0)
		r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
	else if (c->npeers == SIM_CTX_MAX_PEERS)
		r = CUDA_ERROR_TOO_MANY_PEERS;
	else
		c->peers[c->npeers++] = (struct sim_ctx_peer){p, p->id};
	pthread_mutex_unlock(&sim.lock);
	return r;
}

SIM_API CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
	struct sim_ctx *c, *p;
	CUresult r = peer_enter(__func__, true, peerContext, &c, &p);
	int i;

	if (r)
		return r;
	pthread_mutex_lock(&sim.lock);
	prune(c);
	i = peer_index(c, p);
	if (i < 0) {
		r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
	} else {
		c->peers[i] = c->peers[c->npeers - 1];
		c->npeers--;
	}
	pthread_mutex_unlock(&sim.lock);
	return r;
}

CUresult sim_peer_check_range(struct sim_ctx *c, uintptr_t p, size_t len)
{
	struct sim_alloc a;
	bool ok;

	if (sim_check_range(p, len, &a))
		return CUDA_ERROR_INVALID_VALUE;
	switch (a.kind) {
	case SIM_ALLOC_DEVICE:
	case SIM_ALLOC_POOL:
	case SIM_ALLOC_ARRAY:
		break;
	default:
		/* Host, managed, IPC and VMM memory have their own access rules. */
		return CUDA_SUCCESS;
	}
	if (a.device == c->device)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&sim.lock);
	ok = a.ctx && peer_index(c, a.ctx) >= 0;
	pthread_mutex_unlock(&sim.lock);
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- atomics over links and with the host ---- */

/*
 * What a link natively supports for one operation. Simulated GPUs are
 * joined by an NVLink-like fabric on which every CUDA atomic is native
 * (CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 1); 128-bit exchange
 * and compare-and-swap arrived with Hopper. -1: not a CUatomicOperation.
 */
static int link_caps(CUatomicOperation op, bool hopper)
{
	const unsigned ints = CU_ATOMIC_CAPABILITY_SIGNED | CU_ATOMIC_CAPABILITY_UNSIGNED |
			      CU_ATOMIC_CAPABILITY_SCALAR_32 | CU_ATOMIC_CAPABILITY_SCALAR_64;

	switch (op) {
	case CU_ATOMIC_OPERATION_INTEGER_ADD:
	case CU_ATOMIC_OPERATION_INTEGER_MIN:
	case CU_ATOMIC_OPERATION_INTEGER_MAX:
	case CU_ATOMIC_OPERATION_INTEGER_INCREMENT:
	case CU_ATOMIC_OPERATION_INTEGER_DECREMENT:
	case CU_ATOMIC_OPERATION_AND:
	case CU_ATOMIC_OPERATION_OR:
	case CU_ATOMIC_OPERATION_XOR:
		return (int)(ints | CU_ATOMIC_CAPABILITY_REDUCTION);
	case CU_ATOMIC_OPERATION_EXCHANGE:
	case CU_ATOMIC_OPERATION_CAS:
		return (int)(ints | (hopper ? CU_ATOMIC_CAPABILITY_SCALAR_128 : 0));
	case CU_ATOMIC_OPERATION_FLOAT_ADD:
		return (int)(CU_ATOMIC_CAPABILITY_SIGNED | CU_ATOMIC_CAPABILITY_SCALAR_32 |
			     CU_ATOMIC_CAPABILITY_SCALAR_64 | CU_ATOMIC_CAPABILITY_REDUCTION);
	case CU_ATOMIC_OPERATION_FLOAT_MIN:
	case CU_ATOMIC_OPERATION_FLOAT_MAX:
		/* No native floating-point min/max atomics in CUDA C++ on these parts. */
		return 0;
	default:
		return -1;
	}
}

static bool is_hopper_or_later(CUdevice dev)
{
	int major = 0;

	sim_attr_get(&sim.shm->desc[sim_dev_index(dev)],
		     CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major);
	return major >= 9;
}

SIM_API CUresult cuDeviceGetP2PAtomicCapabilities(unsigned int *capabilities,
						  const CUatomicOperation *operations,
						  unsigned int count, CUdevice srcDevice,
						  CUdevice dstDevice)
{
	CUresult r = sim_enter(__func__);
	bool hopper;

	if (r)
		return r;
	if (sim_check_device(srcDevice) || sim_check_device(dstDevice) || srcDevice == dstDevice)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!capabilities || !operations || count == 0)
		return CUDA_ERROR_INVALID_VALUE;
	hopper = is_hopper_or_later(srcDevice) && is_hopper_or_later(dstDevice);
	for (unsigned i = 0; i < count; i++)
		if (link_caps(operations[i], hopper) < 0)
			return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < count; i++)
		capabilities[i] = (unsigned)link_caps(operations[i], hopper);
	return CUDA_SUCCESS;
}

/*
 * The simulated host is an x86-64 machine over PCIe without native atomics
 * to device memory (CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = 0):
 * no operation is natively supported, each capability is 0.
 */
SIM_API CUresult cuDeviceGetHostAtomicCapabilities(unsigned int *capabilities,
						   const CUatomicOperation *operations,
						   unsigned int count, CUdevice dev)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (sim_check_device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (!capabilities || !operations || count == 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < count; i++)
		if (link_caps(operations[i], false) < 0)
			return CUDA_ERROR_INVALID_VALUE;
	memset(capabilities, 0, count * sizeof(*capabilities));
	return CUDA_SUCCESS;
}
