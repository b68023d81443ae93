/*
 * The instance file (see sim-shared.h): creating and opening it, process
 * slots (registration, liveness by their lock and /proc start time,
 * reclaiming the dead),
 * capacity charged under each device's accounting lock, and the busy-time
 * buckets NVML's utilization is read from. The chunk tables of unified
 * memory that follow the struct are sized here and kept by sim-um-lru.c.
 */
#include "sim-shared.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cs-size.h"
#include "sim-config.h"
#include "sim-proc-lock.h"
#include "sim-um-lru.h"

static const char *shm_dir(void)
{
	const char *d = getenv("CUSIM_SHM_DIR");
	return d && *d ? d : "/dev/shm";
}

void sim_shared_path(char *buf, size_t len)
{
	const char *inst = "default";
	char err[8];

	if (sim_config_instance(&inst, err, sizeof(err)) < 0)
		inst = "invalid";
	snprintf(buf, len, "%s/cusim-%s", shm_dir(), inst);
}

int sim_shared_unlink(void)
{
	char path[512];

	sim_shared_path(path, sizeof(path));
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

/* True when every device's chunk table lies inside the file, sized to its capacity. */
static bool tables_fit(const struct sim_shared *sh)
{
	for (unsigned d = 0; d < sh->ndevices; d++) {
		const struct sim_um_dev *u = &sh->um[d];

		if (u->nchunks != sh->desc[d].total_mem / SIM_UM_CHUNK || u->table_off < sizeof(*sh) ||
		    u->table_off > sh->file_size ||
		    (sh->file_size - u->table_off) / sizeof(struct sim_um_chunk) < u->nchunks ||
		    u->hw > u->nchunks)
			return false;
	}
	return true;
}

static int map_fd(int fd, struct sim_shared **ret, const char *path, char *err, size_t errlen)
{
	struct stat st;
	struct sim_shared *sh;

	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
		return -errno;
	}
	if ((size_t)st.st_size < sizeof(struct sim_shared)) {
		snprintf(err, errlen,
			 "%s has size %lld, expected at least %zu: made by another cusim version; "
			 "reset the instance (cusim-ctl reset)",
			 path, (long long)st.st_size, sizeof(struct sim_shared));
		return -EPROTO;
	}
	sh = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (sh == MAP_FAILED) {
		snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
		return -errno;
	}
	if (sh->magic != SIM_SHM_MAGIC || sh->version != SIM_SHM_VERSION ||
	    sh->size != sizeof(*sh) || sh->file_size != (uint64_t)st.st_size || sh->ndevices == 0 ||
	    sh->ndevices > SIM_MAX_DEVICES || !tables_fit(sh)) {
		munmap(sh, (size_t)st.st_size);
		snprintf(err, errlen,
			 "%s is not a cusim v%u instance; reset it (cusim-ctl reset)", path,
			 SIM_SHM_VERSION);
		return -EPROTO;
	}
	sim_lock_attach(sh, fd);
	*ret = sh;
	return 0;
}

void sim_shared_close(struct sim_shared *sh)
{
	if (!sh)
		return;
	sim_lock_detach(sh);
	munmap(sh, sh->file_size);
}

int sim_shared_open_existing(struct sim_shared **ret, char *err, size_t errlen)
{
	char path[512];
	const char *inst;
	int fd, r;

	r = sim_config_instance(&inst, err, errlen);
	if (r < 0)
		return r;
	sim_shared_path(path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return r;
	}
	r = map_fd(fd, ret, path, err, errlen);
	close(fd);
	return r;
}

/* Initializes a robust, process-shared mutex in the instance. */
static void shared_mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/* The configuration an instance is made from, parsed before the file is sized. */
struct build_config {
	struct sim_device_desc desc[SIM_MAX_DEVICES];
	unsigned ndevices;
	uint64_t ctx_mem;
	uint32_t util_sample_ms;
	struct sim_um_params um;
};

static int parse_config(const char *inst, struct build_config *c, char *err, size_t errlen)
{
	const char *ctx = getenv("CUSIM_CTX_MEM");
	const char *period = getenv("CUSIM_UTIL_SAMPLE_MS");
	int n;

	memset(c, 0, sizeof(*c));
	n = sim_config_parse_gpus(getenv("CUSIM_GPUS"), inst, c->desc, SIM_MAX_DEVICES, err,
				  errlen);
	if (n < 0)
		return n;
	c->ndevices = (unsigned)n;
	c->ctx_mem = SIM_DEFAULT_CTX_MEM;
	if (ctx && *ctx) {
		uint64_t v;
		if (cs_size_parse(ctx, &v) < 0 || v > (64ull << 30)) {
			snprintf(err, errlen, "CUSIM_CTX_MEM=\"%s\" is invalid: expected %s, at most 64GiB",
				 ctx, CS_SIZE_FORMS);
			return -EINVAL;
		}
		c->ctx_mem = v;
	}
	if (period && *period) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(period, &end, 10);
		if (errno || *end || period[0] < '0' || period[0] > '9' ||
		    v < SIM_UTIL_SAMPLE_MIN_MS || v > SIM_UTIL_SAMPLE_MAX_MS) {
			snprintf(err, errlen,
				 "CUSIM_UTIL_SAMPLE_MS=\"%s\" is invalid: expected milliseconds from %u "
				 "to %u (a real GPU samples about every 167)",
				 period, SIM_UTIL_SAMPLE_MIN_MS, SIM_UTIL_SAMPLE_MAX_MS);
			return -EINVAL;
		}
		/* The default period is the bucket: 0 keeps today's sampling exactly. */
		c->util_sample_ms = v * 1000000ull == SIM_BUCKET_NS ? 0u : (uint32_t)v;
	}
	return sim_config_um(&c->um, err, errlen);
}

static int build_instance(int fd, const char *inst, char *err, size_t errlen)
{
	struct build_config *c = malloc(sizeof(*c));
	const char *spec = getenv("CUSIM_GPUS");
	struct sim_shared *sh;
	struct timespec ts;
	uint64_t size, off;
	int r;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r = parse_config(inst, c, err, errlen);
	if (r < 0)
		goto out_free;
	/* The chunk tables follow the struct, one per device, sized to its capacity. */
	off = (sizeof(*sh) + 4095) & ~(uint64_t)4095;
	size = off;
	for (unsigned d = 0; d < c->ndevices; d++)
		size += c->desc[d].total_mem / SIM_UM_CHUNK * sizeof(struct sim_um_chunk);
	if (ftruncate(fd, (off_t)size) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot size the instance file: %s", strerror(errno));
		goto out_free;
	}
	sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (sh == MAP_FAILED) {
		r = -errno;
		snprintf(err, errlen, "cannot map the instance file: %s", strerror(errno));
		goto out_free;
	}
	memcpy(sh->desc, c->desc, sizeof(sh->desc));
	sh->ndevices = c->ndevices;
	sh->ctx_mem = c->ctx_mem;
	sh->util_sample_ms = c->util_sample_ms;
	sh->um_params = c->um;
	sh->file_size = size;
	snprintf(sh->gpus_spec, sizeof(sh->gpus_spec), "%s",
		 spec && *spec ? spec : SIM_DEFAULT_GPUS);
	clock_gettime(CLOCK_REALTIME, &ts);
	sh->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	for (unsigned d = 0; d < SIM_MAX_DEVICES; d++) {
		shared_mutex_init(&sh->dev[d].acct);
		shared_mutex_init(&sh->um[d].lock);
		if (d >= c->ndevices)
			continue;
		sh->um[d].table_off = off;
		sh->um[d].nchunks = (uint32_t)(c->desc[d].total_mem / SIM_UM_CHUNK);
		off += (uint64_t)sh->um[d].nchunks * sizeof(struct sim_um_chunk);
	}
	sh->size = sizeof(*sh);
	sh->version = SIM_SHM_VERSION;
	/* Magic last: an opener that maps the file early sees it as incomplete. */
	atomic_thread_fence(memory_order_release);
	sh->magic = SIM_SHM_MAGIC;
	munmap(sh, size);
	r = 0;
out_free:
	free(c);
	return r;
}

int sim_shared_open(struct sim_shared **ret, char *err, size_t errlen)
{
	char path[512], tmp[600];
	const char *inst;
	int fd, r;

	r = sim_config_instance(&inst, err, errlen);
	if (r < 0)
		return r;
	sim_shared_path(path, sizeof(path));
	for (int attempt = 0; attempt < 3; attempt++) {
		r = sim_shared_open_existing(ret, err, errlen);
		if (r != -ENOENT)
			return r;
		snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
		fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0) {
			r = -errno;
			snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
			return r;
		}
		/* Mode 0666 regardless of umask: every user's processes share one GPU. */
		(void)fchmod(fd, 0666);
		r = build_instance(fd, inst, err, errlen);
		close(fd);
		if (r == 0 && link(tmp, path) < 0 && errno != EEXIST) {
			r = -errno;
			snprintf(err, errlen, "cannot publish %s: %s", path, strerror(errno));
		}
		unlink(tmp);
		if (r < 0)
			return r;
		/* Ours or a concurrent creator's: open whichever won. */
	}
	snprintf(err, errlen, "%s keeps disappearing while being opened", path);
	return -EAGAIN;
}

/*
 * Field 22 of /proc/<pid>/stat, 0 when there is no such process, or when it
 * has begun to exit.
 */
uint64_t sim_proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	ssize_t n;
	int fd;
	char *p;
	unsigned long long start = 0;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command name may contain spaces and parentheses: start after the last ')'. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	/*
	 * Without a slot lock to tell when its descriptors close, a process
	 * that has begun to exit is gone for the device, as its zombie is: the
	 * leader's PF_EXITING (field 9, flags) is set before they close.
	 */
	if (p[2] == 'Z' || p[2] == 'X')
		return 0;
	p += 3;
	for (int field = 4; field <= 22; field++) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno || end == p)
			return 0;
		if (field == 9 && (v & 0x4)) /* PF_EXITING */
			return 0;
		if (field == 22)
			start = v;
		p = end;
	}
	return start;
}

bool sim_proc_slot_alive(const struct sim_shared *sh, const struct sim_proc_slot *slot)
{
	int32_t pid = atomic_load(&slot->pid);
	uint32_t k = atomic_load(&slot->lock_k);
	int held;

	if (pid <= 0)
		return pid == SIM_PID_CLAIMING;
	held = k == SIM_LOCK_NONE ? -1 : sim_lock_held(sh, (unsigned)(slot - sh->procs), k);
	/* Its descriptors closed: its threads are all gone, or it exec'd (sim-proc-lock.h). */
	if (held == 0)
		return false;
	/*
	 * Still held: the process holds the device, exiting or not (or a
	 * descendant that inherited its descriptor does, as it would hold a
	 * real driver's). No /proc read: this runs on every NVML query.
	 */
	if (held == 1)
		return true;
	return sim_proc_start_time(pid) == atomic_load(&slot->start_time);
}

/* Subtracts bytes from *v, stopping at 0: a device counter never wraps. */
static void sub_sat(_Atomic uint64_t *v, uint64_t bytes)
{
	uint64_t cur = atomic_load_explicit(v, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(v, &cur, cur > bytes ? cur - bytes : 0,
						      memory_order_acq_rel, memory_order_relaxed))
		;
}

/*
 * Takes device dev's accounting lock. An owner that died holding it (kill -9,
 * or exit_group cutting a thread short) may have updated one counter and not
 * the other: the slots are the truth, `used` is recomputed from them.
 */
void sim_acct_lock(struct sim_shared *sh, unsigned dev)
{
	struct sim_device_state *ds = &sh->dev[dev];
	uint64_t sum = 0, um = 0;

	if (pthread_mutex_lock(&ds->acct) != EOWNERDEAD)
		return;
	for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
		sum += atomic_load_explicit(&sh->procs[i].used[dev], memory_order_relaxed);
		um += atomic_load_explicit(&sh->procs[i].um_resident[dev], memory_order_relaxed);
	}
	atomic_store(&ds->used, sum);
	atomic_store(&ds->um_resident, um);
	pthread_mutex_consistent(&ds->acct);
}

void sim_acct_unlock(struct sim_shared *sh, unsigned dev)
{
	pthread_mutex_unlock(&sh->dev[dev].acct);
}

static void slot_drain(struct sim_shared *sh, struct sim_proc_slot *slot)
{
	/* Its resident chunks first: their bytes leave the device with them. */
	sim_um_drain_slot(sh, slot);
	for (unsigned d = 0; d < sh->ndevices && d < SIM_MAX_DEVICES; d++) {
		if (!atomic_load_explicit(&slot->used[d], memory_order_relaxed))
			continue;
		sim_acct_lock(sh, d);
		sub_sat(&sh->dev[d].used, atomic_exchange(&slot->used[d], 0));
		sim_acct_unlock(sh, d);
	}
	atomic_store(&slot->ctx_devices, 0);
	atomic_store(&slot->um_evicted, 0);
	for (unsigned d = 0; d < SIM_MAX_DEVICES; d++) {
		atomic_store(&slot->managed[d], 0);
		atomic_store(&slot->um_faults[d], 0);
		atomic_store(&slot->um_batches[d], 0);
		atomic_store(&slot->um_in[d], 0);
		atomic_store(&slot->um_out[d], 0);
		atomic_store(&slot->um_remote[d], 0);
	}
}

int sim_proc_reclaim_dead(struct sim_shared *sh)
{
	int n = 0;

	for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
		struct sim_proc_slot *slot = &sh->procs[i];
		int32_t pid = atomic_load(&slot->pid);

		if (pid <= 0 || sim_proc_slot_alive(sh, slot))
			continue;
		/* Whoever moves the pid first does the reclaiming, exactly once. */
		if (!atomic_compare_exchange_strong(&slot->pid, &pid, SIM_PID_RECLAIMING))
			continue;
		slot_drain(sh, slot);
		atomic_store(&slot->pid, SIM_PID_FREE);
		n++;
	}
	return n;
}

/* This process's pid in the namespace of /proc (the one slots record), 0 unknown. */
static pid_t proc_self(void)
{
	char buf[32];
	ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return (pid_t)strtol(buf, NULL, 10);
}

struct sim_proc_slot *sim_proc_register(struct sim_shared *sh, pid_t pid, int vram_fd)
{
	uint64_t start = sim_proc_start_time(pid);
	bool self = pid == proc_self();

	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
			struct sim_proc_slot *slot = &sh->procs[i];
			int32_t expect = SIM_PID_FREE;

			if (!atomic_compare_exchange_strong(&slot->pid, &expect, SIM_PID_CLAIMING))
				continue;
			slot_drain(sh, slot);
			/* A new process must not inherit the busy history of the slot. */
			atomic_store(&slot->registered_ns, sim_now_ns());
			slot->vram_fd = vram_fd;
			atomic_store(&slot->start_time, start);
			/* Held by the process itself only: its descriptors close when it goes. */
			atomic_store(&slot->lock_k, self ? sim_lock_take(sh, i) : SIM_LOCK_NONE);
			atomic_store(&slot->pid, (int32_t)pid);
			return slot;
		}
		sim_proc_reclaim_dead(sh);
	}
	return NULL;
}

void sim_proc_release(struct sim_shared *sh, struct sim_proc_slot *slot)
{
	int32_t pid = atomic_load(&slot->pid);

	if (pid <= 0 || !atomic_compare_exchange_strong(&slot->pid, &pid, SIM_PID_RECLAIMING))
		return;
	slot_drain(sh, slot);
	sim_lock_drop(sh, (unsigned)(slot - sh->procs), atomic_load(&slot->lock_k));
	atomic_store(&slot->pid, SIM_PID_FREE);
}

struct sim_proc_slot *sim_proc_find(struct sim_shared *sh, pid_t pid)
{
	for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
		if (atomic_load(&sh->procs[i].pid) == pid && sim_proc_slot_alive(sh, &sh->procs[i]))
			return &sh->procs[i];
	}
	return NULL;
}

int sim_dev_charge(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev,
		   uint64_t bytes)
{
	struct sim_device_state *ds = &sh->dev[dev];
	uint64_t total = sh->desc[dev].total_mem, used;
	int r = 0;

	sim_acct_lock(sh, dev);
	used = atomic_load_explicit(&ds->used, memory_order_relaxed) +
	       atomic_load_explicit(&ds->um_resident, memory_order_relaxed);
	/* A slot already given back (its process is exiting) takes nothing more. */
	if (atomic_load_explicit(&slot->pid, memory_order_relaxed) <= 0 || bytes > total ||
	    used > total - bytes) {
		r = -ENOMEM;
	} else {
		atomic_fetch_add_explicit(&ds->used, bytes, memory_order_release);
		atomic_fetch_add_explicit(&slot->used[dev], bytes, memory_order_relaxed);
	}
	sim_acct_unlock(sh, dev);
	return r;
}

void sim_dev_uncharge(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev,
		      uint64_t bytes)
{
	uint64_t take;

	sim_acct_lock(sh, dev);
	/*
	 * Only what the slot still holds leaves the device: exit() (or a
	 * reclaim) may have drained the slot while this thread was freeing,
	 * and the device's counter lost those bytes then already.
	 */
	take = atomic_load_explicit(&slot->used[dev], memory_order_relaxed);
	take = take < bytes ? take : bytes;
	atomic_fetch_sub_explicit(&slot->used[dev], take, memory_order_relaxed);
	sub_sat(&sh->dev[dev].used, take);
	sim_acct_unlock(sh, dev);
}

uint64_t sim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define BUCKET_MASK ((1ull << SIM_BUCKET_BITS) - 1)

static void bucket_add(_Atomic uint64_t *ring, unsigned n, uint64_t seq, uint64_t ns)
{
	_Atomic uint64_t *b = &ring[seq % n];
	uint64_t v = atomic_load_explicit(b, memory_order_relaxed), nv;

	do {
		if ((v >> SIM_BUCKET_BITS) == seq)
			nv = v + ns;
		else if ((v >> SIM_BUCKET_BITS) < seq)
			nv = (seq << SIM_BUCKET_BITS) | ns;
		else
			return; /* the bucket already holds a later period: too old to record */
		if ((nv & BUCKET_MASK) > SIM_BUCKET_NS)
			nv = (nv & ~BUCKET_MASK) | SIM_BUCKET_NS;
	} while (!atomic_compare_exchange_weak_explicit(b, &v, nv, memory_order_relaxed,
							memory_order_relaxed));
}

void sim_busy_add(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev, uint64_t start,
		  uint64_t end)
{
	long si = slot ? slot - sh->procs : -1;

	/* Work reserved further ahead than the history is long is recorded from its start. */
	if (end - start > (uint64_t)SIM_DEV_BUCKETS * SIM_BUCKET_NS)
		end = start + (uint64_t)SIM_DEV_BUCKETS * SIM_BUCKET_NS;
	for (uint64_t t = start; t < end;) {
		uint64_t seq = t / SIM_BUCKET_NS;
		uint64_t bend = (seq + 1) * SIM_BUCKET_NS;
		uint64_t ns = (end < bend ? end : bend) - t;

		bucket_add(sh->dev_busy[dev], SIM_DEV_BUCKETS, seq, ns);
		if (si >= 0)
			bucket_add(sh->proc_busy[si][dev], SIM_PROC_BUCKETS, seq, ns);
		t += ns;
	}
}

uint64_t sim_busy_sum(const struct sim_shared *sh, const struct sim_proc_slot *slot, unsigned dev,
		      uint64_t from, uint64_t to)
{
	const _Atomic uint64_t *ring = slot ? sh->proc_busy[slot - sh->procs][dev] : sh->dev_busy[dev];
	unsigned n = slot ? SIM_PROC_BUCKETS : SIM_DEV_BUCKETS;
	uint64_t sum = 0;

	if (slot && from < atomic_load_explicit(&slot->registered_ns, memory_order_relaxed))
		from = atomic_load_explicit(&slot->registered_ns, memory_order_relaxed);
	if (to <= from)
		return 0;
	if (to - from > (uint64_t)n * SIM_BUCKET_NS)
		from = to - (uint64_t)n * SIM_BUCKET_NS;
	for (uint64_t seq = from / SIM_BUCKET_NS; seq * SIM_BUCKET_NS < to; seq++) {
		uint64_t v = atomic_load_explicit(&ring[seq % n], memory_order_relaxed);
		uint64_t b0 = seq * SIM_BUCKET_NS, b1 = b0 + SIM_BUCKET_NS;
		uint64_t lo = from > b0 ? from : b0, hi = to < b1 ? to : b1;

		if ((v >> SIM_BUCKET_BITS) != seq)
			continue;
		/* Busy time is spread evenly over its bucket: count the overlapping share. */
		sum += (v & BUCKET_MASK) * (hi - lo) / SIM_BUCKET_NS;
	}
	return sum;
}
