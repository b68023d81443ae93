/*
 * A private cusim instance for a test program: every test that runs on the
 * simulated GPU gets its own, so that tests running at once never see each
 * other's memory, contexts or processes.
 */
#ifndef CS_TEST_CUSIM_INSTANCE_H
#define CS_TEST_CUSIM_INSTANCE_H

/*
 * Gives this process (and the children it starts afterwards) a fresh cusim
 * instance "<prefix>-<tag>-<pid>": sets CUSIM_INSTANCE, CUSIM_GPUS = gpus and
 * CUSIM_CTX_MEM = ctx_mem (NULL: unset, cusim's defaults), unsets what would
 * change the simulated devices' behaviour behind the test's back
 * (CUSIM_FAULTS, CUDA_VISIBLE_DEVICES, the unified-memory model's
 * CUSIM_UM_*), and removes an instance of that name a crashed run left. The
 * instance's file (in CUSIM_SHM_DIR, default /dev/shm) is removed at exit by
 * this process, not by its forked children. Call before cuInit; calling it
 * again replaces the instance (the earlier file is removed at exit too only
 * when it is the last one).
 */
void th_cusim_instance(const char *prefix, const char *tag, const char *gpus, const char *ctx_mem);

#endif
