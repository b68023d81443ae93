/*
 * Where a device sits: its CPU and memory affinity, and its NvLink links.
 *
 * Affinity comes from the host's NUMA layout (/sys/devices/system/node):
 * devices are spread over the nodes in order, as on a two-socket HGX board
 * (devices 0-3 on node 0, 4-7 on node 1); a host with one node (or no NUMA
 * information) gives every device all online CPUs and node 0. A socket
 * scope answers like the node scope (one node per socket).
 *
 * NvLink exists on SXM boards (nvml-board.c: V100 6 links of NvLink 2, A100
 * 12 of NvLink 3, H100/H200 18 of NvLink 4, B200 18 of NvLink 5); PCIe
 * boards answer NVML_ERROR_NOT_SUPPORTED. Links are active when the
 * instance has another NvLink device to talk to. They lead to NVSwitch chips
 * on A100, H100, H200 and B200 baseboards (link l to switch l mod the
 * switch count, at bus 0x05 + switch of the device's PCI domain) and
 * straight to the other GPUs on V100 boards (link l to the l-th other
 * device, round robin). Peers can access each other's memory and atomics
 * over the links; system memory is not reached over NvLink on x86 hosts.
 */
#include "nvml-board.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE_DIR "/sys/devices/system/node"
#define MAX_NODES 64
#define NVSWITCH_FIRST_BUS 0x05u

/* Reads a whole small sysfs file into buf (NUL-terminated); false when absent. */
static bool read_sysfs(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n > 0;
}

/*
 * Calls fn(arg, i) for each number in a sysfs list ("0-3,8,10-11"). False
 * when the text is not such a list.
 */
static bool for_each_in_list(const char *s, void (*fn)(void *, unsigned), void *arg)
{
	while (*s && *s != '\n') {
		char *end;
		unsigned long lo = strtoul(s, &end, 10), hi = lo;

		if (end == s)
			return false;
		if (*end == '-') {
			s = end + 1;
			hi = strtoul(s, &end, 10);
			if (end == s || hi < lo)
				return false;
		}
		for (unsigned long v = lo; v <= hi && v < 4096; v++)
			fn(arg, (unsigned)v);
		s = *end == ',' ? end + 1 : end;
	}
	return true;
}

struct node_list {
	unsigned ids[MAX_NODES];
	unsigned n;
};

static void add_node(void *arg, unsigned id)
{
	struct node_list *l = arg;

	if (l->n < MAX_NODES)
		l->ids[l->n++] = id;
}

/* The host NUMA node of device `index` (0 when the host has no NUMA information). */
static unsigned node_of(unsigned index)
{
	struct node_list l = {.n = 0};
	char buf[512];

	if (!read_sysfs(NODE_DIR "/online", buf, sizeof(buf)) ||
	    !for_each_in_list(buf, add_node, &l) || l.n == 0)
		return 0;
	return l.ids[(size_t)index * l.n / sim_nvml.ndev];
}

struct bitset {
	unsigned long *bits;
	unsigned words;
};

static void set_bit(void *arg, unsigned bit)
{
	struct bitset *b = arg;
	unsigned w = bit / (8 * sizeof(unsigned long));

	if (w < b->words)
		b->bits[w] |= 1ul << (bit % (8 * sizeof(unsigned long)));
}

static nvmlReturn_t affinity_args(const char *name, nvmlDevice_t device, unsigned size,
				  const void *set, nvmlAffinityScope_t scope, unsigned *i)
{
	nvmlReturn_t r = sim_nvml_enter_out(name, device, set, i);

	if (r)
		return r;
	if (size == 0 || (scope != NVML_AFFINITY_SCOPE_NODE && scope != NVML_AFFINITY_SCOPE_SOCKET))
		return NVML_ERROR_INVALID_ARGUMENT;
	return NVML_SUCCESS;
}

static nvmlReturn_t cpu_affinity(const char *name, nvmlDevice_t device, unsigned int cpuSetSize,
				 unsigned long *cpuSet, nvmlAffinityScope_t scope)
{
	struct bitset b = {cpuSet, cpuSetSize};
	char path[128], buf[4096];
	unsigned i;
	nvmlReturn_t r = affinity_args(name, device, cpuSetSize, cpuSet, scope, &i);

	if (r)
		return r;
	memset(cpuSet, 0, cpuSetSize * sizeof(*cpuSet));
	snprintf(path, sizeof(path), NODE_DIR "/node%u/cpulist", node_of(i));
	if ((read_sysfs(path, buf, sizeof(buf)) && for_each_in_list(buf, set_bit, &b)) ||
	    (read_sysfs("/sys/devices/system/cpu/online", buf, sizeof(buf)) &&
	     for_each_in_list(buf, set_bit, &b)))
		return NVML_SUCCESS;
	set_bit(&b, 0);	/* no sysfs: at least the CPU we run on exists */
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
					       unsigned long *cpuSet)
{
	return cpu_affinity(__func__, device, cpuSetSize, cpuSet, NVML_AFFINITY_SCOPE_NODE);
}

NVML_API nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device,
							  unsigned int cpuSetSize,
							  unsigned long *cpuSet,
							  nvmlAffinityScope_t scope)
{
	return cpu_affinity(__func__, device, cpuSetSize, cpuSet, scope);
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
						  unsigned long *nodeSet, nvmlAffinityScope_t scope)
{
	struct bitset b = {nodeSet, nodeSetSize};
	unsigned i;
	nvmlReturn_t r = affinity_args(__func__, device, nodeSetSize, nodeSet, scope, &i);

	if (r)
		return r;
	memset(nodeSet, 0, nodeSetSize * sizeof(*nodeSet));
	set_bit(&b, node_of(i));
	return NVML_SUCCESS;
}

/* ---- NvLink ---- */

/* The prologue of a link query: NOT_SUPPORTED without NvLink, INVALID_ARGUMENT past the last link. */
static nvmlReturn_t link_enter(const char *name, nvmlDevice_t device, unsigned link,
			       const void *out, unsigned *i)
{
	nvmlReturn_t r = sim_nvml_enter_out(name, device, out, i);

	if (r)
		return r;
	if (sim_nvml_board(*i)->nvlinks == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	return link < sim_nvml_board(*i)->nvlinks ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

/* Whether another device of the instance has NvLink (the links then train up). */
static bool links_up(unsigned index)
{
	for (unsigned d = 0; d < sim_nvml.ndev; d++)
		if (d != index && sim_nvml_board(d)->nvlinks)
			return true;
	return false;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
					       nvmlEnableState_t *isActive)
{
	unsigned i;
	nvmlReturn_t r = link_enter(__func__, device, link, isActive, &i);

	if (r)
		return r;
	*isActive = links_up(i) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
						 unsigned int *version)
{
	unsigned i;
	nvmlReturn_t r = link_enter(__func__, device, link, version, &i);

	if (r)
		return r;
	*version = sim_nvml_board(i)->nvlink_version;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
						    nvmlNvLinkCapability_t capability,
						    unsigned int *capResult)
{
	unsigned i;
	nvmlReturn_t r = link_enter(__func__, device, link, capResult, &i);

	if (r)
		return r;
	switch (capability) {
	case NVML_NVLINK_CAP_P2P_SUPPORTED:
	case NVML_NVLINK_CAP_P2P_ATOMICS:
		*capResult = 1;
		return NVML_SUCCESS;
	case NVML_NVLINK_CAP_SYSMEM_ACCESS:
	case NVML_NVLINK_CAP_SYSMEM_ATOMICS:
	case NVML_NVLINK_CAP_SLI_BRIDGE:
		*capResult = 0;
		return NVML_SUCCESS;
	case NVML_NVLINK_CAP_VALID:
		*capResult = links_up(i);
		return NVML_SUCCESS;
	default:
		return NVML_ERROR_INVALID_ARGUMENT;
	}
}

/* The other end of link `link` of device `index`: a switch, or (direct links) the peer's index. */
static bool remote_is_switch(unsigned index, unsigned link, unsigned *peer)
{
	unsigned others = sim_nvml.ndev - 1;

	if (sim_nvml_board(index)->nvswitches)
		return true;
	*peer = (index + 1 + link % (others ? others : 1)) % sim_nvml.ndev;
	return false;
}

static nvmlReturn_t remote_pci(const char *name, nvmlDevice_t device, unsigned link,
			       nvmlPciInfo_t *pci, bool bus_id)
{
	const struct sim_device_desc *d;
	const struct sim_nvml_board *b;
	unsigned i, peer = 0;
	nvmlReturn_t r = link_enter(name, device, link, pci, &i);

	if (r)
		return r;
	if (!links_up(i))
		return NVML_ERROR_NOT_FOUND;	/* nothing at the other end */
	d = &sim_nvml.shm->desc[i];
	b = sim_nvml_board(i);
	if (remote_is_switch(i, link, &peer)) {
		struct sim_pci_ids ids = {b->nvswitch_pci_id, 0};

		sim_nvml_fill_pci(d->pci_domain, NVSWITCH_FIRST_BUS + link % b->nvswitches, 0, ids,
				  bus_id, pci);
	} else {
		const struct sim_device_desc *p = &sim_nvml.shm->desc[peer];

		sim_nvml_fill_pci(p->pci_domain, p->pci_bus, p->pci_device, sim_pci_get_ids(p),
				  bus_id, pci);
	}
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
						       nvmlPciInfo_t *pci)
{
	return remote_pci(__func__, device, link, pci, false);
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
							  nvmlPciInfo_t *pci)
{
	return remote_pci(__func__, device, link, pci, true);
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
							  nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
	unsigned i, peer;
	nvmlReturn_t r = link_enter(__func__, device, link, pNvLinkDeviceType, &i);

	if (r)
		return r;
	if (!links_up(i))
		*pNvLinkDeviceType = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
	else
		*pNvLinkDeviceType = remote_is_switch(i, link, &peer) ? NVML_NVLINK_DEVICE_TYPE_SWITCH
								      : NVML_NVLINK_DEVICE_TYPE_GPU;
	return NVML_SUCCESS;
}
