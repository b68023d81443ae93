/* A private cusim instance for a test program (cusim-instance.h). */
#include "cusim-instance.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char path[PATH_MAX];
static pid_t owner;

static void remove_instance(void)
{
	/* Only the process that created the instance removes it. */
	if (path[0] && getpid() == owner)
		unlink(path);
}

static void set_or_unset(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

void th_cusim_instance(const char *prefix, const char *tag, const char *gpus, const char *ctx_mem)
{
	static const char *const reset[] = {
	    "CUSIM_FAULTS",	 "CUDA_VISIBLE_DEVICES", "CUSIM_UM_BANDWIDTH", "CUSIM_UM_FAULT_NS",
	    "CUSIM_UM_BATCH_NS", "CUSIM_UM_BATCH_FAULTS", "CUSIM_UM_LRU",
	};
	static bool registered;
	const char *dir = getenv("CUSIM_SHM_DIR");
	char name[128];

	snprintf(name, sizeof(name), "%s-%s-%ld", prefix, tag, (long)getpid());
	setenv("CUSIM_INSTANCE", name, 1);
	set_or_unset("CUSIM_GPUS", gpus);
	set_or_unset("CUSIM_CTX_MEM", ctx_mem);
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		unsetenv(reset[i]);
	snprintf(path, sizeof(path), "%s/cusim-%s", dir && *dir ? dir : "/dev/shm", name);
	unlink(path);
	owner = getpid();
	if (!registered)
		registered = atexit(remove_instance) == 0;
}
