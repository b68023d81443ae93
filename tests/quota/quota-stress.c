/*
 * quota-client stress THREADS SECONDS MAXBYTES SEED [KINDS]
 *
 * THREADS threads allocate and free memory of random sizes (1..MAXBYTES)
 * and kinds for SECONDS seconds against the group's limit, then free
 * everything and release the primary context. KINDS is a comma list of
 * device, managed, pitch, vmm, array, async, pool, ctx (default:
 * device,managed,pitch,vmm; async allocates from the device's current pool,
 * pool from a pool of the thread's own (created at its first use, trimmed
 * now and then, destroyed at the end), so that several pools grow at once;
 * ctx creates a context, which costs its footprint, and destroys it when
 * freed).
 * Sizes are whole multiples of what cusim charges (512 bytes; 2 MiB for
 * vmm) so that the group's charge equals the simulated device's.
 *
 * Prints `ready pid=P outer=O` once CUDA is initialised (its primary context
 * charged), then waits for a line (or end of input) on stdin before it
 * starts, so that a test can start several before any allocates; at the end
 * `stress allocs=A frees=F ooms=O errors=E`. CUDA_ERROR_OUT_OF_MEMORY is an
 * expected answer (counted); any other failure is an error (named on
 * stderr). Exit 0 when there was no error.
 */
#include "quota-client.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define MAX_HELD 64
#define VMM_GRAIN (2ull << 20)
#define SIM_ALIGN 512ull

enum skind {
	SK_DEVICE,
	SK_MANAGED,
	SK_PITCH,
	SK_VMM,
	SK_ARRAY,
	SK_ASYNC,
	SK_POOL,
	SK_CTX,
	SK_COUNT
};

static const char *const skind_names[SK_COUNT] = {"device", "managed", "pitch", "vmm",
						  "array",  "async",   "pool",  "ctx"};

struct held {
	enum skind kind;
	CUdeviceptr ptr;		/* device pointer or VMM address */
	CUmemGenericAllocationHandle handle;	/* vmm: 0 once released */
	CUarray array;
	CUcontext ctx;
	uint64_t size;
};

struct worker {
	pthread_t thread;
	unsigned seed;
	unsigned long allocs, frees, ooms, errors;
	unsigned nheld;
	struct held held[MAX_HELD];
	CUmemoryPool pool;	/* SK_POOL: the thread's own, NULL until first used */
};

static struct {
	unsigned nkinds;
	enum skind kinds[SK_COUNT];
	uint64_t maxbytes;
	struct timespec deadline;
} cfg;

static bool past_deadline(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > cfg.deadline.tv_sec ||
	       (now.tv_sec == cfg.deadline.tv_sec && now.tv_nsec >= cfg.deadline.tv_nsec);
}

/* Counts r: success true; OOM counted and false; anything else an error named on stderr. */
static bool outcome(struct worker *w, CUresult r, const char *call)
{
	const char *name = "?";

	if (r == CUDA_SUCCESS)
		return true;
	if (r == CUDA_ERROR_OUT_OF_MEMORY) {
		w->ooms++;
		return false;
	}
	cuGetErrorName(r, &name);
	fprintf(stderr, QC_PROG " stress: %s: %s (%d)\n", call, name, (int)r);
	w->errors++;
	return false;
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

static bool alloc_vmm(struct worker *w, struct held *h, uint64_t size)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = qc_dev},
	};
	CUmemAccessDesc access = {
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = qc_dev},
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};

	size = round_up(size, VMM_GRAIN);
	if (!outcome(w, cuMemCreate(&h->handle, size, &prop, 0), "cuMemCreate"))
		return false;
	if (!outcome(w, cuMemAddressReserve(&h->ptr, size, 0, 0, 0), "cuMemAddressReserve")) {
		outcome(w, cuMemRelease(h->handle), "cuMemRelease");
		return false;
	}
	if (!outcome(w, cuMemMap(h->ptr, size, 0, h->handle, 0), "cuMemMap")) {
		outcome(w, cuMemRelease(h->handle), "cuMemRelease");
		outcome(w, cuMemAddressFree(h->ptr, size), "cuMemAddressFree");
		return false;
	}
	outcome(w, cuMemSetAccess(h->ptr, size, &access, 1), "cuMemSetAccess");
	/* Half of the handles are released at once: the mapping keeps the memory. */
	if (rand_r(&w->seed) % 2) {
		outcome(w, cuMemRelease(h->handle), "cuMemRelease");
		h->handle = 0;
	}
	h->size = size;
	return true;
}

static bool alloc_one(struct worker *w, struct held *h)
{
	uint64_t size = round_up(1 + (uint64_t)rand_r(&w->seed) % cfg.maxbytes, SIM_ALIGN);
	CUDA_ARRAY_DESCRIPTOR ad;
	size_t pitch = 0, width, height;

	memset(h, 0, sizeof(*h));
	h->kind = cfg.kinds[(unsigned)rand_r(&w->seed) % cfg.nkinds];
	switch (h->kind) {
	case SK_DEVICE:
		h->size = size;
		return outcome(w, cuMemAlloc_v2(&h->ptr, size), "cuMemAlloc_v2");
	case SK_MANAGED:
		h->size = size;
		return outcome(w, cuMemAllocManaged(&h->ptr, size, CU_MEM_ATTACH_GLOBAL),
			       "cuMemAllocManaged");
	case SK_PITCH:
		width = 1 + (size_t)rand_r(&w->seed) % 8192;
		height = size / round_up(width, SIM_ALIGN);
		height = height ? height : 1;
		return outcome(w, cuMemAllocPitch_v2(&h->ptr, &pitch, width, height, 4),
			       "cuMemAllocPitch_v2");
	case SK_VMM:
		return alloc_vmm(w, h, size);
	case SK_ARRAY:
		ad = (CUDA_ARRAY_DESCRIPTOR){.Width = 1024,
					     .Height = size / 4096 ? size / 4096 : 1,
					     .Format = CU_AD_FORMAT_FLOAT,
					     .NumChannels = 1};
		return outcome(w, cuArrayCreate_v2(&h->array, &ad), "cuArrayCreate_v2");
	case SK_ASYNC:
		h->size = size;
		return outcome(w, cuMemAllocAsync(&h->ptr, size, NULL), "cuMemAllocAsync");
	case SK_POOL:
		h->size = size;
		if (!w->pool) {
			CUmemPoolProps props = {
				.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = qc_dev},
			};

			if (!outcome(w, cuMemPoolCreate(&w->pool, &props), "cuMemPoolCreate")) {
				w->pool = NULL;
				return false;
			}
		}
		/* Now and then the pool gives back what it does not use. */
		if (rand_r(&w->seed) % 8 == 0)
			outcome(w, cuMemPoolTrimTo(w->pool, 0), "cuMemPoolTrimTo");
		return outcome(w, cuMemAllocFromPoolAsync(&h->ptr, size, w->pool, NULL),
			       "cuMemAllocFromPoolAsync");
	case SK_CTX:
		/* cuCtxCreate makes the new context current: pop it, the primary stays ours. */
		if (!outcome(w, cuCtxCreate(&h->ctx, NULL, 0, qc_dev), "cuCtxCreate"))
			return false;
		return outcome(w, cuCtxPopCurrent(NULL), "cuCtxPopCurrent");
	default:
		return false;
	}
}

static void free_one(struct worker *w, struct held *h)
{
	bool release_first = rand_r(&w->seed) % 2;

	switch (h->kind) {
	case SK_DEVICE:
	case SK_MANAGED:
	case SK_PITCH:
		outcome(w, cuMemFree_v2(h->ptr), "cuMemFree_v2");
		break;
	case SK_VMM:
		/* Either order gives the memory back exactly once. */
		if (release_first && h->handle)
			outcome(w, cuMemRelease(h->handle), "cuMemRelease");
		outcome(w, cuMemUnmap(h->ptr, h->size), "cuMemUnmap");
		if (!release_first && h->handle)
			outcome(w, cuMemRelease(h->handle), "cuMemRelease");
		outcome(w, cuMemAddressFree(h->ptr, h->size), "cuMemAddressFree");
		break;
	case SK_ARRAY:
		outcome(w, cuArrayDestroy(h->array), "cuArrayDestroy");
		break;
	case SK_ASYNC:
	case SK_POOL:
		outcome(w, cuMemFreeAsync(h->ptr, NULL), "cuMemFreeAsync");
		break;
	case SK_CTX:
		outcome(w, cuCtxDestroy(h->ctx), "cuCtxDestroy");
		break;
	default:
		break;
	}
	w->frees++;
}

static void *work(void *arg)
{
	struct worker *w = arg;

	if (!outcome(w, cuCtxSetCurrent(qc_primary), "cuCtxSetCurrent"))
		return NULL;
	while (!past_deadline()) {
		bool grow = w->nheld == 0 || (w->nheld < MAX_HELD && rand_r(&w->seed) % 100 < 55);

		if (grow) {
			if (alloc_one(w, &w->held[w->nheld])) {
				w->nheld++;
				w->allocs++;
			}
		} else {
			unsigned i = (unsigned)rand_r(&w->seed) % w->nheld;

			free_one(w, &w->held[i]);
			w->held[i] = w->held[--w->nheld];
		}
	}
	while (w->nheld)
		free_one(w, &w->held[--w->nheld]);
	if (w->pool && outcome(w, cuStreamSynchronize(NULL), "cuStreamSynchronize"))
		outcome(w, cuMemPoolDestroy(w->pool), "cuMemPoolDestroy");
	return NULL;
}

static bool parse_kinds(const char *list)
{
	char buf[128], *save = NULL;

	if (strlen(list) >= sizeof(buf))
		return false;
	strcpy(buf, list);
	cfg.nkinds = 0;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned k;

		for (k = 0; k < SK_COUNT && strcmp(tok, skind_names[k]) != 0; k++)
			;
		if (k == SK_COUNT || cfg.nkinds == SK_COUNT)
			return false;
		cfg.kinds[cfg.nkinds++] = (enum skind)k;
	}
	return cfg.nkinds > 0;
}

int qc_stress_main(int argc, char **argv)
{
	static struct worker workers[MAX_THREADS];
	unsigned long allocs = 0, frees = 0, ooms = 0, errors = 0;
	uint64_t threads, seconds, seed;
	int started = 0;
	char go[64];

	if (argc < 4 || argc > 5 || !qc_parse_size("THREADS", argv[0], &threads) ||
	    !qc_parse_size("SECONDS", argv[1], &seconds) ||
	    !qc_parse_size("MAXBYTES", argv[2], &cfg.maxbytes) ||
	    !qc_parse_size("SEED", argv[3], &seed) ||
	    !parse_kinds(argc == 5 ? argv[4] : "device,managed,pitch,vmm") || threads == 0 ||
	    threads > MAX_THREADS || cfg.maxbytes == 0) {
		fprintf(stderr, "usage: " QC_PROG " stress THREADS(1..%d) SECONDS MAXBYTES SEED "
				"[KINDS: comma list of device,managed,pitch,vmm,array,async,pool,ctx]\n",
			MAX_THREADS);
		return QC_EXIT_USAGE;
	}
	if (qc_init() != CUDA_SUCCESS) {
		printf("init-failed\n");
		return QC_EXIT_FAIL;
	}
	printf("ready pid=%d outer=%d\n", (int)getpid(), qc_outer_pid());
	fflush(stdout);
	if (!fgets(go, sizeof(go), stdin) && ferror(stdin))
		fprintf(stderr, QC_PROG " stress: reading stdin failed; starting anyway\n");
	clock_gettime(CLOCK_MONOTONIC, &cfg.deadline);
	cfg.deadline.tv_sec += (time_t)seconds;
	for (unsigned i = 0; i < threads; i++) {
		workers[i].seed = (unsigned)(seed * 1000003u + i);
		if (pthread_create(&workers[i].thread, NULL, work, &workers[i]) != 0) {
			fprintf(stderr, QC_PROG " stress: pthread_create failed\n");
			errors++;
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(workers[i].thread, NULL);
		allocs += workers[i].allocs;
		frees += workers[i].frees;
		ooms += workers[i].ooms;
		errors += workers[i].errors;
	}
	if (qc_release_primary() != CUDA_SUCCESS)
		errors++;
	printf("stress allocs=%lu frees=%lu ooms=%lu errors=%lu\n", allocs, frees, ooms, errors);
	fflush(stdout);
	return errors ? QC_EXIT_FAIL : QC_EXIT_OK;
}
