/*
 * Configuration (read once, at load), attachment to the group (once, at
 * cuInit or the first accounted call), fork, and cuInit.
 *
 * Environment:
 *   CUSLICE_GROUP      group name; processes with the same name on a machine
 *                      share one quota per GPU. Default when only a limit is
 *                      given: "pid-<pid>", exported so that children join.
 *   CUSLICE_MEM_LIMIT  the group's memory limit (cs-limits.h forms).
 *   CUSLICE_CORE_LIMIT the group's share of device time, percent (same forms).
 *   CUSLICE_MEM_MODE   hard (default) or oversubscribe: cuMemAlloc* becomes
 *                      unified memory and CUSLICE_MEM_LIMIT may pass the GPU
 *                      (sizes, or percentages up to 1000%).
 *   CUSLICE_OVERSUB_SINGLE  1: one process may hold more than the GPU (default 0).
 *   CUSLICE_OVERSUB_KEEP_DEVICE  size: cuMemAlloc of at least this stays device
 *                      memory (buffers shared by CUDA IPC); default none.
 *   CUSLICE_CORE_MODE  hard (default: never above the share) or burst (may use
 *                      idle device time above it while other processes do not).
 *   CUSLICE_SHM_DIR    where standalone group regions live (default /dev/shm;
 *                      ignored by a set-uid program: secure_getenv).
 *   CUSLICE_CTX_MEM    bytes charged per context (default: measured); at most
 *                      64 GiB and the memory of every device the process sees.
 *   CUSLICE_LOG_LEVEL  error, warn (default), info or debug.
 *   CUSLICE_SOCKET     cusliced's socket (default /run/cuslice/cusliced.sock;
 *                      ignored by a set-uid program).
 *   CUSLICE_DAEMON     off, optional (default: register when cusliced runs),
 *                      required (fail closed without it).
 *   CUSLICE_DAEMON_WAIT how long to wait for a daemon whose socket exists but
 *                      does not answer, then fail closed (default 10s).
 *   CUSLICE_TOKEN      the shared token cusliced may ask for.
 * (include/cuslice/config.h: the names, their defaults, how each is read.)
 * None of CUSLICE_GROUP, CUSLICE_MEM_LIMIT and CUSLICE_CORE_LIMIT set: the
 * library is inert.
 * Any invalid value: the process fails closed (device allocations refused).
 */
#include "cs-preload.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"
#include "cs-size.h"

/* CUSLICE_CTX_MEM above this is a typo (real contexts take hundreds of MiB). */
#define CTX_MEM_MAX (64ull << 30)

struct cs_state cs_process = {
	.gh = {.fd = -1, .slot = -1},
	.daemon_fd = -1,
	.daemon_slot = -1,
};

/* True on the thread that is attaching: calls back into us pass through. */
static __thread bool in_attach __attribute__((tls_model("initial-exec")));

void cs_fail_closed(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cs_process.fail_reason, sizeof(cs_process.fail_reason), fmt, ap);
	va_end(ap);
	atomic_store(&cs_process.mode, CS_MODE_FAIL_CLOSED);
	if (!atomic_exchange(&cs_process.fail_logged, true))
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "%s; GPU memory allocations in this process will fail (out of memory)",
		       cs_process.fail_reason);
}

void cs_format_uuid(const CUuuid *u, char out[CS_GROUP_UUID_LEN])
{
	const unsigned char *b = (const unsigned char *)u->bytes;

	snprintf(out, CS_GROUP_UUID_LEN,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
}

static void load_log_level(void)
{
	const char *v = cs_env_get(CS_ENV_LOG_LEVEL);

	if (!v)
		return;
	/* Any case: CUSLICE_LOG_LEVEL=DEBUG works, as it always has. */
	for (int i = 0; i < CS_LOG_LEVEL_COUNT; i++) {
		if (strcasecmp(v, cs_log_level_name((enum cs_log_level)i)) == 0) {
			cs_log_threshold = i;
			return;
		}
	}
	cs_log(CS_LOG_ERROR, CS_LOG_NAME,
	       "CUSLICE_LOG_LEVEL=\"%s\": accepted: error, warn, info, debug; using warn", v);
}

/* CUSLICE_MEM_MODE and its options into cs_process.env_*; -EINVAL when failed closed. */
static int load_oversub_config(void)
{
	const char *mode = cs_env_get(CS_ENV_MEM_MODE);
	const char *single = cs_env_get(CS_ENV_OVERSUB_SINGLE);
	const char *keep = cs_env_get(CS_ENV_OVERSUB_KEEP_DEVICE);

	if (mode && strcmp(mode, "oversubscribe") == 0) {
		cs_process.env_oversub = true;
	} else if (mode && strcmp(mode, "hard") != 0) {
		cs_fail_closed("CUSLICE_MEM_MODE=\"%s\": accepted: hard (device memory, never more "
			       "than the GPU) or oversubscribe (unified memory, the limit may pass "
			       "the GPU)",
			       mode);
		return -EINVAL;
	}
	if (single && strcmp(single, "1") == 0) {
		cs_process.env_oversub_single = true;
	} else if (single && strcmp(single, "0") != 0) {
		cs_fail_closed("CUSLICE_OVERSUB_SINGLE=\"%s\": accepted: 0 (a process holds at most "
			       "the GPU's memory) or 1 (one process may oversubscribe alone)",
			       single);
		return -EINVAL;
	}
	if (keep && cs_size_parse(keep, &cs_process.env_keep_device) != 0) {
		cs_fail_closed("CUSLICE_OVERSUB_KEEP_DEVICE=\"%s\": expected a size, %s: cuMemAlloc "
			       "of at least this many bytes stays device memory",
			       keep, CS_SIZE_FORMS);
		return -EINVAL;
	}
	return 0;
}

/* Reads the environment; decides OFF, ACTIVE or FAIL_CLOSED. */
static void load_config(void)
{
	const char *group = cs_env_get(CS_ENV_GROUP);
	const char *limit = cs_env_get(CS_ENV_MEM_LIMIT);
	const char *dir = cs_env_get(CS_ENV_SHM_DIR);
	const char *ctx = cs_env_get(CS_ENV_CTX_MEM);
	const char *core = cs_env_get(CS_ENV_CORE_LIMIT);
	const char *core_mode = cs_env_get(CS_ENV_CORE_MODE);
	char err[1024];

	load_log_level();
	if (!group && !limit && !core)
		return;
	atomic_store(&cs_process.mode, CS_MODE_ACTIVE);
	if (load_oversub_config() < 0 || cs_oom_wait_load() < 0)
		return;

	if (!dir)
		dir = CS_DEFAULT_SHM_DIR;
	if (dir[0] != '/' || strlen(dir) >= sizeof(cs_process.shm_dir)) {
		cs_fail_closed("CUSLICE_SHM_DIR=\"%s\": expected an absolute directory path shorter "
			       "than %zu characters",
			       dir, sizeof(cs_process.shm_dir));
		return;
	}
	strcpy(cs_process.shm_dir, dir);

	if (group) {
		if (!cs_group_name_valid(group)) {
			cs_fail_closed("CUSLICE_GROUP=\"%s\": expected 1 to %d characters of "
				       "A-Z a-z 0-9 . _ -, not starting with '.' or '-'",
				       group, CS_GROUP_NAME_MAX);
			return;
		}
		strcpy(cs_process.group_name, group);
	} else {
		snprintf(cs_process.group_name, sizeof(cs_process.group_name), "pid-%d", (int)getpid());
		/* Children (a job's workers) share the quota of the process that was given it. */
		setenv(cs_env_name(CS_ENV_GROUP), cs_process.group_name, 1);
	}

	if (limit) {
		if (cs_limits_parse("CUSLICE_MEM_LIMIT", limit,
				    CS_LIMIT_SIZES | CS_LIMIT_PERCENT |
					    (cs_process.env_oversub ? CS_LIMIT_OVER : 0),
				    &cs_process.limits, err, sizeof(err)) != 0) {
			cs_fail_closed("%s", err);
			return;
		}
		cs_process.has_limits = true;
	}

	if (core) {
		if (cs_limits_parse("CUSLICE_CORE_LIMIT", core, CS_LIMIT_PERCENT, &cs_process.core_limits,
				    err, sizeof(err)) != 0 ||
		    cs_limits_check_shares(&cs_process.core_limits, err, sizeof(err)) != 0) {
			cs_fail_closed("%s", err);
			return;
		}
		cs_process.has_core = true;
	}
	if (core_mode) {
		if (strcmp(core_mode, "burst") == 0) {
			cs_process.core_burst = true;
		} else if (strcmp(core_mode, "hard") != 0) {
			cs_fail_closed("CUSLICE_CORE_MODE=\"%s\": accepted: hard (never above the "
				       "share) or burst (may use idle device time above it)",
				       core_mode);
			return;
		}
	}

	if (ctx && (cs_size_parse(ctx, &cs_process.ctx_mem_override) != 0 ||
		    cs_process.ctx_mem_override > CTX_MEM_MAX)) {
		cs_fail_closed("CUSLICE_CTX_MEM=\"%s\": expected a size from 0 to 64GiB (and at most "
			       "the memory of the GPU), %s",
			       ctx, CS_SIZE_FORMS);
		return;
	}
	(void)cs_daemon_load_config();
}

static void atfork_child(void)
{
	/*
	 * The child has no CUDA contexts or memory of its own yet: it is a new
	 * member of the group, registered when it initialises CUDA. The
	 * parent's slot (and its lock) stays the parent's.
	 */
	if (cs_process.gh.fd >= 0)
		cs_group_forget_after_fork(&cs_process.gh);
	cs_process.g = NULL;
	cs_process.self = NULL;
	for (int i = 0; i < CS_MAX_ORDINALS; i++) {
		atomic_store(&cs_process.dev[i].primary_refs, 0);
		atomic_store(&cs_process.dev[i].primary_charged, 0);
	}
	cs_pools_forget();
	atomic_store(&cs_process.core_watch, false);
	cs_core_after_fork();
	cs_prio_after_fork();
	cs_daemon_after_fork();
	atomic_store(&cs_process.attach, CS_DETACHED);
}

__attribute__((constructor)) static void cs_load(void)
{
	/* Before anything else: a program that opted out is not touched at all. */
	if (cs_inject_skipped()) {
		cs_process.skipped = true;
		return;
	}
	cs_inject_repair_env();
	load_config();
	pthread_atfork(NULL, NULL, atfork_child);
}

/*
 * The configured core limit of ordinal i, under the limit rule (cs-group.h):
 * the group's share when it is tighter or equal; ours when the group has
 * none or an earlier run's looser one; refused (false, failed closed) when a
 * running member holds a looser one. A managed group's share is its
 * policy's (the region's rule: libcuslice never writes it there).
 */
static bool set_core_limit(int i, int gdev)
{
	struct cs_limit_device ld = {.ordinal = i, .uuid = cs_process.dev[i].uuid, .total = CS_CORE_PPM};
	uint32_t want, have = CS_CORE_NONE;
	uint64_t v;
	int r;

	if (!cs_process.has_core)
		return true;
	v = cs_limits_resolve(&cs_process.core_limits, &ld);
	if (v == CS_LIMIT_NONE)
		return true;
	want = v > CS_CORE_PPM ? CS_CORE_PPM : (uint32_t)v;
	r = cs_group_adopt_core(&cs_process.gh, (unsigned)gdev, want,
				cs_process.core_burst ? CS_CORE_BURST : 0u, &have);
	if (r == -EPERM) {
		if (have != want)
			cs_log(CS_LOG_WARN, CS_LOG_NAME,
			       "group %s's policy (cusliced) gives device %d (%s) a core limit of "
			       "%.4g%%; CUSLICE_CORE_LIMIT asks %.4g%%: the policy applies",
			       cs_process.group_name, i, cs_process.dev[i].uuid,
			       have == CS_CORE_NONE ? 100.0 : have / 1e4, want / 1e4);
		return true;
	}
	if (r == -EBUSY) {
		cs_fail_closed("group %s: a running member holds a core limit of %.4g%% on device %d "
			       "(%s), looser than CUSLICE_CORE_LIMIT asks (%.4g%%): a process never "
			       "runs under a looser limit than its own configuration; give the "
			       "group's processes the same limit",
			       cs_process.group_name, have == CS_CORE_NONE ? 100.0 : have / 1e4, i,
			       cs_process.dev[i].uuid, want / 1e4);
		return false;
	}
	if (r < 0) {
		cs_fail_closed("group %s: cannot set the core limit of device %d (%s): %s",
			       cs_process.group_name, i, cs_process.dev[i].uuid, strerror(-r));
		return false;
	}
	if (have < want)
		cs_log(CS_LOG_WARN, CS_LOG_NAME,
		       "group %s already has a core limit of %.4g%% on device %d (%s); "
		       "CUSLICE_CORE_LIMIT asks %.4g%%: the group's tighter limit applies",
		       cs_process.group_name, have / 1e4, i, cs_process.dev[i].uuid, want / 1e4);
	return true;
}

/* The memory limit of ordinal i under the same rule. */
static bool set_mem_limit(int i, int gdev, uint64_t want)
{
	char a[32], b[32];
	uint64_t have = CS_LIMIT_NONE;
	int r;

	if (!cs_process.has_limits)
		return true;
	r = cs_group_adopt_limit(&cs_process.gh, (unsigned)gdev, want, &have);
	if (r == -EPERM) {
		if (have != want)
			cs_log(CS_LOG_WARN, CS_LOG_NAME,
			       "group %s's policy (cusliced) gives device %d (%s) a limit of %llu "
			       "bytes; CUSLICE_MEM_LIMIT asks %llu: the policy applies",
			       cs_process.group_name, i, cs_process.dev[i].uuid, (unsigned long long)have,
			       (unsigned long long)want);
		return true;
	}
	if (r == -EBUSY) {
		cs_fail_closed("group %s: a running member holds limit %s on device %d (%s), looser "
			       "than CUSLICE_MEM_LIMIT asks (%s): a process never runs under a looser "
			       "limit than its own configuration; give the group's processes the "
			       "same limit",
			       cs_process.group_name,
			       have == CS_LIMIT_NONE ? "none" : cs_size_format(have, a, sizeof(a)), i,
			       cs_process.dev[i].uuid, cs_size_format(want, b, sizeof(b)));
		return false;
	}
	if (r < 0) {
		cs_fail_closed("group %s: cannot set the limit of device %d (%s): %s", cs_process.group_name,
			       i, cs_process.dev[i].uuid, strerror(-r));
		return false;
	}
	if (r == 1)
		cs_log(CS_LOG_INFO, CS_LOG_NAME,
		       "group %s: device %d (%s): the looser limit an earlier run left is replaced "
		       "by CUSLICE_MEM_LIMIT's %llu bytes",
		       cs_process.group_name, i, cs_process.dev[i].uuid, (unsigned long long)want);
	else if (have < want)
		cs_log(CS_LOG_WARN, CS_LOG_NAME,
		       "group %s already has limit %llu bytes on device %d (%s); CUSLICE_MEM_LIMIT "
		       "asks %llu: the group's tighter limit applies",
		       cs_process.group_name, (unsigned long long)have, i, cs_process.dev[i].uuid,
		       (unsigned long long)want);
	return true;
}

/*
 * UUID keys of CUSLICE_MEM_LIMIT / CUSLICE_CORE_LIMIT must name a GPU of
 * the node (NVML's list; the devices this process sees when NVML is not
 * there), and a prefix must not name two of the GPUs we see. False when
 * failed closed.
 */
static bool check_uuid_keys(int n)
{
	static char node[CS_MAX_ORDINALS * 4][CS_GROUP_UUID_LEN];
	const char *uuids[CS_MAX_ORDINALS * 4];
	struct cs_limit_device devs[CS_MAX_ORDINALS];
	const struct cs_limits *all[2] = {cs_process.has_limits ? &cs_process.limits : NULL,
					  cs_process.has_core ? &cs_process.core_limits : NULL};
	char err[1024];
	int k = cs_nvml_uuids(node, CS_MAX_ORDINALS * 4);

	for (int i = 0; i < n; i++)
		devs[i] = (struct cs_limit_device){.ordinal = i, .uuid = cs_process.dev[i].uuid,
						   .total = cs_process.dev[i].total};
	if (k < 0) {
		for (int i = 0; i < n; i++)
			uuids[i] = cs_process.dev[i].uuid;
		k = n;
	} else {
		for (int i = 0; i < k; i++)
			uuids[i] = node[i];
	}
	for (int j = 0; j < 2; j++) {
		if (!all[j])
			continue;
		if (cs_limits_check_uuid_keys(all[j], uuids, (unsigned)k, err, sizeof(err)) != 0 ||
		    cs_limits_check_uuids(all[j], devs, (unsigned)n, err, sizeof(err)) != 0) {
			cs_fail_closed("%s", err);
			return false;
		}
	}
	return true;
}

/* Maps this process's CUDA devices to the group's entries. */
static CUresult map_devices(void)
{
	char err[1024];
	int n = 0;
	CUresult r;

	r = cs_drv.cuDeviceGetCount(&n);
	if (r != CUDA_SUCCESS)
		return r;
	if (n > CS_MAX_ORDINALS) {
		cs_log(CS_LOG_WARN, CS_LOG_NAME,
		       "%d CUDA devices visible; devices from %d on are refused allocations", n,
		       CS_MAX_ORDINALS);
		n = CS_MAX_ORDINALS;
	}
	if ((cs_process.has_limits &&
	     cs_limits_check_ordinals(&cs_process.limits, n, err, sizeof(err)) != 0) ||
	    (cs_process.has_core &&
	     cs_limits_check_ordinals(&cs_process.core_limits, n, err, sizeof(err)) != 0)) {
		cs_fail_closed("%s", err);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < n; i++) {
		struct cs_device *d = &cs_process.dev[i];
		CUdevice dev;
		CUuuid uuid;
		size_t total = 0;

		d->gdev = -1;
		r = cs_drv.cuDeviceGet(&dev, i);
		if (r == CUDA_SUCCESS)
			r = cs_drv.cuDeviceGetUuid_v2(&uuid, dev);
		if (r == CUDA_SUCCESS)
			r = CS_REAL(cuDeviceTotalMem_v2)(&total, dev);
		if (r != CUDA_SUCCESS)
			return r;
		cs_format_uuid(&uuid, d->uuid);
		d->total = total;
	}
	if (!check_uuid_keys(n))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < n; i++) {
		struct cs_device *d = &cs_process.dev[i];
		struct cs_limit_device ld = {.ordinal = i, .uuid = d->uuid, .total = d->total};
		uint64_t want = cs_process.has_limits ? cs_limits_resolve(&cs_process.limits, &ld)
						      : CS_LIMIT_NONE;
		int gdev;

		if (cs_process.ctx_mem_override > d->total) {
			char a[32], b[32];

			cs_fail_closed("CUSLICE_CTX_MEM=%s: more than device %d (%s) has (%s)",
				       cs_size_format(cs_process.ctx_mem_override, a, sizeof(a)), i, d->uuid,
				       cs_size_format(d->total, b, sizeof(b)));
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		gdev = cs_group_device(&cs_process.gh, d->uuid, d->total, want);
		cs_core_bind(i, gdev);
		if (gdev < 0) {
			cs_log(CS_LOG_ERROR, CS_LOG_NAME,
			       "group %s: no room for device %d (%s): its allocations are refused",
			       cs_process.group_name, i, d->uuid);
			continue;
		}
		d->gdev = gdev;
		if (!set_mem_limit(i, gdev, want) || !set_core_limit(i, gdev))
			return CUDA_ERROR_OUT_OF_MEMORY;
		if (cs_process.ctx_mem_override)
			atomic_store(&d->ctx_bytes, cs_process.ctx_mem_override);
	}
	/* From now on we count as a member whose limits others must not loosen. */
	cs_group_bind(&cs_process.gh);
	cs_process.ndev = n;
	return CUDA_SUCCESS;
}

/*
 * Oversubscription: the group's policy when cusliced owns it (the region
 * says), else this process's environment, which a standalone member also
 * writes into the region for cuslice ps. Before any charge: fixed for the
 * life of the attachment.
 */
static void decide_memory_mode(void)
{
	char b[32];

	if (atomic_load(&cs_process.g->flags) & CS_GROUP_MANAGED) {
		cs_process.oversub = atomic_load(&cs_process.g->mem_mode) == CS_MEM_OVERSUBSCRIBE;
		cs_process.oversub_single = atomic_load(&cs_process.g->um_flags) & CS_UM_SINGLE;
		cs_process.keep_device_min = atomic_load(&cs_process.g->keep_device_min);
	} else {
		cs_process.oversub = cs_process.env_oversub;
		cs_process.oversub_single = cs_process.env_oversub_single;
		cs_process.keep_device_min = cs_process.env_keep_device;
		if (cs_process.oversub) {
			atomic_store(&cs_process.g->mem_mode, CS_MEM_OVERSUBSCRIBE);
			atomic_store(&cs_process.g->um_flags, cs_process.oversub_single ? CS_UM_SINGLE : 0u);
			atomic_store(&cs_process.g->keep_device_min, cs_process.keep_device_min);
		}
	}
	if (cs_process.oversub)
		cs_log(CS_LOG_INFO, CS_LOG_NAME,
		       "group %s: oversubscribing unified memory (cuMemAlloc* becomes managed%s%s%s)%s",
		       cs_process.group_name, cs_process.keep_device_min ? ", except allocations of " : "",
		       cs_process.keep_device_min ? cs_size_format(cs_process.keep_device_min, b, sizeof(b)) : "",
		       cs_process.keep_device_min ? " or more" : "",
		       cs_process.oversub_single ? "; one process may pass the GPU" : "");
}

/* Compute: gates on, and a controller thread when any of our devices has a core limit or the group
 * a priority. */
static void start_compute(void)
{
	bool limited = false;

	for (int i = 0; i < cs_process.ndev; i++)
		if (cs_process.dev[i].gdev >= 0 &&
		    atomic_load(&cs_process.g->dev[cs_process.dev[i].gdev].core_limit) != CS_CORE_NONE)
			limited = true;
	atomic_store(&cs_process.core_watch, true);
	/* A prioritized group's launch costs are measured too (cs-prio.c needs them). */
	if (limited || cs_process.prio_role != CS_PRIORITY_NORMAL)
		cs_core_start_controller();
}

/*
 * Standalone: the group's region in CUSLICE_SHM_DIR, created or adopted
 * (only when it is this user's private file: anyone can plant one in
 * /dev/shm), and a slot in it. False when failed closed.
 */
static bool open_standalone(void)
{
	char what[PATH_MAX + 128];
	int e = cs_process.gh.fd >= 0
		    ? 0
		    : cs_group_open(&cs_process.gh, cs_process.shm_dir, cs_process.group_name);

	if (e == -ENOENT || e == -ENOTDIR || e == -EACCES || e == -EROFS) {
		cs_fail_closed("CUSLICE_SHM_DIR=\"%s\": cannot create the region of group %s there: "
			       "%s; expected an existing directory this user can write (default "
			       "/dev/shm)",
			       cs_process.shm_dir, cs_process.group_name, strerror(-e));
		return false;
	}
	if (e == -EPERM || e == -EPROTO || e == -ELOOP) {
		char want[96];

		cs_group_describe(cs_process.shm_dir, cs_process.group_name, what, sizeof(what));
		if (e == -EPERM)
			snprintf(want, sizeof(want), "a regular file of uid %u with mode 0600",
				 (unsigned)geteuid());
		else
			snprintf(want, sizeof(want), "a cuslice region of this version");
		cs_fail_closed("group %s: refusing the existing region %s: expected %s; remove it "
			       "(someone may have planted it), or use another CUSLICE_GROUP or "
			       "CUSLICE_SHM_DIR",
			       cs_process.group_name, what, want);
		return false;
	}
	if (e) {
		cs_fail_closed("group %s: cannot open %s/cuslice-group-%s: %s", cs_process.group_name,
			       cs_process.shm_dir, cs_process.group_name, strerror(-e));
		return false;
	}
	e = cs_group_register(&cs_process.gh);
	if (e < 0) {
		cs_fail_closed("group %s: cannot register this process: %s", cs_process.group_name,
			       e == -ENOSPC ? "all process slots are taken" : strerror(-e));
		return false;
	}
	return true;
}

/* cs_attach's steps, run by the one caller that attaches. */
static CUresult attach_steps(void)
{
	char missing[256];
	CUresult r;
	int e;

	r = CS_REAL(cuInit)(0);
	if (r != CUDA_SUCCESS)
		return r;
	if (!cs_driver_api_load(missing, sizeof(missing))) {
		cs_fail_closed("the CUDA driver lacks functions cuslice needs: %s", missing);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!cs_process.map_ready) {
		e = cs_ptrmap_init(&cs_process.map, CS_PTRMAP_LOG2_DEFAULT);
		if (e) {
			cs_fail_closed("cannot reserve the allocation table: %s", strerror(-e));
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		cs_process.map_ready = true;
	} else {
		cs_ptrmap_reset(&cs_process.map);	/* a fork child: the parent's entries are not ours */
	}
	if (cs_process.gh.fd < 0 && cs_process.daemon_fd < 0 && cs_daemon_register() == CS_REFUSED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (cs_process.daemon_fd >= 0) {
		/* The region cusliced handed over, in the slot it assigned. */
		e = cs_group_register_slot(&cs_process.gh, cs_process.daemon_slot);
		if (e < 0) {
			cs_fail_closed("group %s: cannot take slot %d that cusliced assigned: %s",
				       cs_process.group_name, cs_process.daemon_slot,
				       e == -EBUSY ? "another process holds it" : strerror(-e));
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	} else if (!open_standalone()) {
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	cs_process.g = cs_process.gh.g;
	cs_process.self = &cs_process.g->proc[cs_process.gh.slot];
	cs_pid_identity_self(&cs_process.id);
	decide_memory_mode();
	r = map_devices();
	if (r != CUDA_SUCCESS)
		return r;
	start_compute();
	cs_log(CS_LOG_INFO, CS_LOG_NAME, "group %s: attached as slot %d with %d device(s)",
	       cs_process.group_name, cs_process.gh.slot, cs_process.ndev);
	return CUDA_SUCCESS;
}

CUresult cs_attach(void)
{
	int expected = CS_DETACHED;
	CUresult r;

	if (atomic_load_explicit(&cs_process.attach, memory_order_acquire) == CS_ATTACHED)
		return CUDA_SUCCESS;
	if (cs_mode() == CS_MODE_FAIL_CLOSED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (cs_mode() != CS_MODE_ACTIVE || in_attach)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!atomic_compare_exchange_strong(&cs_process.attach, &expected, CS_ATTACHING)) {
		struct timespec pause = {0, 100000};

		while (atomic_load_explicit(&cs_process.attach, memory_order_acquire) == CS_ATTACHING)
			nanosleep(&pause, NULL);
		return atomic_load(&cs_process.attach) == CS_ATTACHED ? CUDA_SUCCESS
							      : CUDA_ERROR_OUT_OF_MEMORY;
	}
	in_attach = true;
	r = attach_steps();
	in_attach = false;
	atomic_store_explicit(&cs_process.attach, r == CUDA_SUCCESS ? CS_ATTACHED : CS_DETACHED,
			      memory_order_release);
	return r;
}

CS_EXPORT CUresult cuInit(unsigned int Flags)
{
	CUresult r = CS_REAL(cuInit)(Flags);

	if (r == CUDA_SUCCESS && cs_mode() == CS_MODE_ACTIVE && !in_attach)
		cs_attach();
	return r;
}
