/*
 * Process-wide state of cusim's driver: cuInit, the instance attachment,
 * CUDA_VISIBLE_DEVICES, fork and exit.
 */
#include "sim.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sim-config.h"
#include "sim-exec.h"
#include "sim-proc-lock.h"
#include "sim-um.h"

struct sim_state sim = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.next_id = 1,
};

/* Bumped in a forked child: per-thread state from before the fork is void. */
_Atomic unsigned sim_epoch;

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

pid_t sim_self_pid(void)
{
	char buf[32];
	ssize_t n;

	/*
	 * /proc/self resolves in the pid namespace of the /proc mount, which is
	 * the host's for a process started with `unshare --pid --fork` without
	 * its own /proc: that is the pid NVML and the other processes see.
	 */
	n = readlink("/proc/self", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		long v = strtol(buf, NULL, 10);
		if (v > 0)
			return (pid_t)v;
	}
	return getpid();
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&sim.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&sim.lock);
}

/*
 * A child of a CUDA process cannot use its parent's contexts or memory (the
 * real driver refuses them too). Forget all of it so the child can cuInit
 * and work as a new process; the parent's instance slot stays the parent's.
 */
static void atfork_child(void)
{
	pthread_mutex_init(&sim.lock, NULL);
	atomic_fetch_add(&sim_epoch, 1);
	sim_vram_forget_after_fork();
	sim_um_forget_after_fork();
	sim_exec_forget_after_fork();
	/* The parent's slot lock is the parent's: the child's copy of it must not keep it. */
	sim_lock_forget_after_fork();
	memset(sim.primary, 0, sizeof(sim.primary));
	memset(sim.primary_refs, 0, sizeof(sim.primary_refs));
	memset(sim.primary_flags, 0, sizeof(sim.primary_flags));
	sim.slot = NULL;
	atomic_store(&sim.initialized, 0);
}

static void install_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/*
 * Applies CUDA_VISIBLE_DEVICES the way the real driver does: a comma list of
 * device indices or GPU UUIDs (a unique prefix is enough, "GPU-" optional);
 * the list is cut at the first entry that names no device or repeats one.
 */
static void apply_visible_devices(void)
{
	const char *env = getenv("CUDA_VISIBLE_DEVICES");
	char buf[1024], *save = NULL, *tok;
	bool used[SIM_MAX_DEVICES] = {false};
	int n = 0;

	if (!env) {
		sim.ndev = (int)sim.shm->ndevices;
		for (int i = 0; i < sim.ndev; i++)
			sim.dev_of_ordinal[i] = i;
		return;
	}
	snprintf(buf, sizeof(buf), "%s", env);
	for (tok = strtok_r(buf, ",", &save); tok && n < SIM_MAX_DEVICES;
	     tok = strtok_r(NULL, ",", &save)) {
		int idx = -1;

		while (*tok == ' ')
			tok++;
		if (*tok >= '0' && *tok <= '9') {
			char *end;
			long v = strtol(tok, &end, 10);
			if (*end == '\0' && v >= 0 && v < (long)sim.shm->ndevices)
				idx = (int)v;
		} else {
			const char *want = strncasecmp(tok, "GPU-", 4) == 0 ? tok + 4 : tok;
			size_t len = strlen(want);
			for (unsigned d = 0; len && d < sim.shm->ndevices; d++) {
				if (strncasecmp(sim.shm->desc[d].uuid + 4, want, len) == 0) {
					if (idx >= 0) { /* ambiguous prefix */
						idx = -1;
						break;
					}
					idx = (int)d;
				}
			}
		}
		if (idx < 0 || used[idx])
			break;
		used[idx] = true;
		sim.dev_of_ordinal[n++] = idx;
	}
	sim.ndev = n;
}

static CUresult init_locked(void)
{
	char err[512];
	struct sim_shared *sh;
	int r;

	sim_fault_load_env(SIM_FAULT_CUDA);
	r = sim.shm ? 0 : sim_shared_open(&sh, err, sizeof(err));
	if (r == 0 && sim.shm)
		sh = sim.shm;
	if (r < 0) {
		fprintf(stderr, "cusim: cuInit failed: %s\n", err);
		return r == -EINVAL ? CUDA_ERROR_NO_DEVICE : CUDA_ERROR_OPERATING_SYSTEM;
	}
	sim.shm = sh;
	sim_fault_bind(sh);
	r = sim_fault("cuInit", SIM_FAULT_CUDA);
	if (r)
		return (CUresult)r;
	sim.pid = sim_self_pid();
	sim_proc_reclaim_dead(sh);
	apply_visible_devices();
	if (sim.ndev == 0)
		return CUDA_ERROR_NO_DEVICE;
	r = sim_vram_init(sh);
	if (r < 0) {
		fprintf(stderr, "cusim: cuInit failed: cannot map device memory: %s\n",
			strerror(-r));
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	sim.slot = sim_proc_register(sh, sim.pid, sim_vram_fd());
	if (!sim.slot) {
		fprintf(stderr, "cusim: cuInit failed: %d processes already use the simulated GPU\n",
			SIM_MAX_PROCS);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

SIM_API CUresult cuInit(unsigned int flags)
{
	CUresult r;

	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&atfork_once, install_atfork);
	if (atomic_load_explicit(&sim.initialized, memory_order_acquire))
		return CUDA_SUCCESS;
	pthread_mutex_lock(&sim.lock);
	if (atomic_load(&sim.initialized)) {
		r = CUDA_SUCCESS;
	} else {
		/* A failed cuInit may be retried (e.g. after an injected fault). */
		r = init_locked();
		if (r == CUDA_SUCCESS)
			atomic_store_explicit(&sim.initialized, 1, memory_order_release);
	}
	pthread_mutex_unlock(&sim.lock);
	return r;
}

SIM_API CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = SIM_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

/* At exit the process's device memory returns to the device at once. */
__attribute__((destructor)) static void sim_exit(void)
{
	if (atomic_load(&sim.initialized) && sim.slot && sim.shm)
		sim_proc_release(sim.shm, sim.slot);
}
