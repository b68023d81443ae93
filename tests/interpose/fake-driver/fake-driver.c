/*
 * A fake CUDA driver and NVML that export almost nothing: for
 * test-missing, where libcuslice's wrappers meet a real library without
 * the function they wrap. Built twice, as libcuda.so.1 and as
 * libnvidia-ml.so.1; each exports its one init function.
 */
#ifdef FAKE_NVML
int nvmlInit_v2(void);

int nvmlInit_v2(void)
{
	return 0;
}
#else
int cuInit(unsigned int flags);

int cuInit(unsigned int flags)
{
	(void)flags;
	return 0;
}
#endif
