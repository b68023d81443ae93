/*
 * The PCIe link and BAR1.
 *
 * The link's maximum generation and width are the board's (Gen5 x16 for
 * Hopper and Blackwell, Gen4 x16 for Ampere and Ada, Gen3 x16 for Volta and
 * Turing). An active device's link runs at its maximum; an idle one trains
 * down to Gen1, as real GPUs do to save power (the width stays x16). cusim
 * does not count bus traffic: throughput is 0 KB/s and the replay counter 0.
 *
 * BAR1 spans the whole device memory, rounded up to a power of two
 * (resizable BAR, as data-center boards ship), except where the board has a
 * fixed window (T4: 256 MiB). Its use is 1 MiB for the driver plus 2 MiB per
 * process with a context on the device.
 */
#include "nvml-board.h"

/* Per-lane signalling rate of each generation, Mbps (as nvmlDeviceGetPcieSpeed reports). */
static const unsigned lane_mbps[] = {0, 2500, 5000, 8000, 16000, 32000, 64000};

static unsigned current_gen(unsigned index)
{
	struct sim_nvml_activity a;

	sim_nvml_activity(index, &a);
	return a.active ? sim_nvml_board(index)->pcie_gen : 1;
}

NVML_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device,
							  unsigned int *currLinkGen)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, currLinkGen, &i);

	if (r)
		return r;
	*currLinkGen = current_gen(i);
	return NVML_SUCCESS;
}

static nvmlReturn_t max_gen(const char *name, nvmlDevice_t device, unsigned int *gen)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, gen, &i);

	if (r)
		return r;
	*gen = sim_nvml_board(i)->pcie_gen;
	return NVML_SUCCESS;
}

/* The system's and the GPU's maxima agree: every simulated slot matches its board. */
NVML_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device,
							 unsigned int *maxLinkGen)
{
	return max_gen(__func__, device, maxLinkGen);
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device,
							    unsigned int *maxLinkGenDevice)
{
	return max_gen(__func__, device, maxLinkGenDevice);
}

static nvmlReturn_t width(const char *name, nvmlDevice_t device, unsigned int *w)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, w, &i);

	if (r)
		return r;
	*w = sim_nvml_board(i)->pcie_width;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device,
						     unsigned int *currLinkWidth)
{
	return width(__func__, device, currLinkWidth);
}

NVML_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth)
{
	return width(__func__, device, maxLinkWidth);
}

NVML_API nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device,
						  nvmlPcieUtilCounter_t counter,
						  unsigned int *value)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, value, &i);

	if (r)
		return r;
	if ((unsigned)counter >= NVML_PCIE_UTIL_COUNT)
		return NVML_ERROR_INVALID_ARGUMENT;
	*value = 0;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, value, &i);

	if (r)
		return r;
	*value = 0;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPcieSpeed(nvmlDevice_t device, unsigned int *pcieSpeed)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, pcieSpeed, &i);

	if (r)
		return r;
	*pcieSpeed = lane_mbps[current_gen(i)];
	return NVML_SUCCESS;
}

static unsigned long long pow2_at_least(unsigned long long v)
{
	unsigned long long p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

NVML_API nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory)
{
	const struct sim_nvml_board *b;
	struct sim_nvml_activity a;
	unsigned long long total, used;
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, bar1Memory, &i);

	if (r)
		return r;
	b = sim_nvml_board(i);
	total = b->bar1_mib ? (unsigned long long)b->bar1_mib << 20
			    : pow2_at_least(sim_nvml.shm->desc[i].total_mem);
	sim_nvml_activity(i, &a);
	used = (1ull << 20) + (unsigned long long)a.clients * (2ull << 20);
	bar1Memory->bar1Total = total;
	bar1Memory->bar1Used = used < total ? used : total;
	bar1Memory->bar1Free = total - bar1Memory->bar1Used;
	return NVML_SUCCESS;
}
