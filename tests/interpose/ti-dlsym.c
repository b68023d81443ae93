/*
 * dlsym answers in a program that is not linked with libcuda, for
 * test-dlsym. Run with and without LD_PRELOAD=libcuslice.so; the test
 * compares what it prints.
 *
 *   ti-dlsym probe
 *       One line "<where> <name> -> <answer>" per lookup: RTLD_DEFAULT and
 *       the program's handle (dlopen(NULL)) before and after libcuda is
 *       loaded (RTLD_LOCAL, then promoted to RTLD_GLOBAL), on the handles
 *       of libcuda, libnvidia-ml and (when CS_PRELOAD names a loaded
 *       library) libcuslice, and through the old dlsym@GLIBC_2.2.5 ABI that
 *       binaries built before glibc 2.34 use.
 *   ti-dlsym stress THREADS LOOKUPS
 *       Resolves a table of mixed lookups (RTLD_DEFAULT libc names,
 *       RTLD_NEXT, the libcuda and libnvidia-ml handles) single-threaded,
 *       prints "answer <where> <name> -> <answer>" for each, then THREADS
 *       threads make LOOKUPS lookups each over the table and compare every
 *       pointer with the single-threaded one. Prints
 *       "threads: T x N lookups, M mismatch(es)"; exit 1 when M > 0.
 *
 * Exit status 2: bad usage or a library could not be loaded.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ti-describe.h"

/*
 * The dlsym that binaries linked before glibc 2.34 reference (it lived in
 * libdl then). libcuslice's one unversioned definition must answer it too.
 */
#if defined(__x86_64__)
__asm__(".symver ti_dlsym_old, dlsym@GLIBC_2.2.5");
#define TI_HAVE_OLD_DLSYM 1
#elif defined(__aarch64__)
__asm__(".symver ti_dlsym_old, dlsym@GLIBC_2.17");
#define TI_HAVE_OLD_DLSYM 1
#endif
#ifdef TI_HAVE_OLD_DLSYM
void *ti_dlsym_old(void *handle, const char *name);
#endif

static void show(const char *where, const char *name, const void *p)
{
	char buf[256];

	printf("%s %s -> %s\n", where, name, ti_describe(p, buf, sizeof(buf)));
}

static void *load(const char *soname, int flags)
{
	void *h = dlopen(soname, flags);

	if (!h) {
		fprintf(stderr, "ti-dlsym: dlopen(%s): %s\n", soname, dlerror());
		exit(2);
	}
	return h;
}

static int probe(void)
{
	static const char *const cuda_names[] = {
		"cuInit", "cuMemAlloc_v2", "cuGetProcAddress_v2",
		"cuStreamDestroy_v2", "cuNoSuchFunction", "sim_enter",
	};
	const char *preload = getenv("CS_PRELOAD");
	void *self, *cuda, *nvml, *program = dlopen(NULL, RTLD_NOW);

	show("default", "cuInit", dlsym(RTLD_DEFAULT, "cuInit"));
	show("default", "cuMemAlloc_v2", dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
	show("default", "nvmlDeviceGetMemoryInfo", dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo"));
	show("default", "malloc", dlsym(RTLD_DEFAULT, "malloc"));
	show("default", "strlen", dlsym(RTLD_DEFAULT, "strlen"));
	/* The program's handle searches the global scope too. */
	show("program-handle", "cuInit", dlsym(program, "cuInit"));
	show("program-handle", "malloc", dlsym(program, "malloc"));

	/* libcuslice's own handle: a lookup there finds its definitions, as on any library. */
	self = preload ? dlopen(preload, RTLD_NOW | RTLD_NOLOAD) : NULL;
	if (self) {
		show("cuslice-handle", "cuMemAlloc_v2", dlsym(self, "cuMemAlloc_v2"));
		show("cuslice-handle", "nvmlDeviceGetMemoryInfo",
		     dlsym(self, "nvmlDeviceGetMemoryInfo"));
		show("cuslice-handle", "dlsym", dlsym(self, "dlsym"));
		show("cuslice-handle", "cuStreamDestroy_v2", dlsym(self, "cuStreamDestroy_v2"));
	} else {
		printf("cuslice-handle: not loaded\n");
	}

	cuda = load("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	show("local-default", "cuInit", dlsym(RTLD_DEFAULT, "cuInit"));
	show("local-default", "cuMemAlloc_v2", dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
	for (size_t i = 0; i < sizeof(cuda_names) / sizeof(cuda_names[0]); i++)
		show("cuda-handle", cuda_names[i], dlsym(cuda, cuda_names[i]));
#ifdef TI_HAVE_OLD_DLSYM
	for (size_t i = 0; i < sizeof(cuda_names) / sizeof(cuda_names[0]); i++)
		show("old-abi cuda-handle", cuda_names[i], ti_dlsym_old(cuda, cuda_names[i]));
	show("old-abi default", "malloc", ti_dlsym_old(RTLD_DEFAULT, "malloc"));
	show("old-abi default", "cuInit", ti_dlsym_old(RTLD_DEFAULT, "cuInit"));
#else
	printf("old-abi: not on this architecture\n");
#endif
	nvml = load("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	show("nvml-handle", "nvmlDeviceGetMemoryInfo", dlsym(nvml, "nvmlDeviceGetMemoryInfo"));
	show("nvml-handle", "nvmlInit_v2", dlsym(nvml, "nvmlInit_v2"));

	/* Promoted to the global scope: now RTLD_DEFAULT finds the driver. */
	load("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
	show("global-default", "cuInit", dlsym(RTLD_DEFAULT, "cuInit"));
	show("global-default", "cuDeviceGet", dlsym(RTLD_DEFAULT, "cuDeviceGet"));
	return 0;
}

enum where { W_DEFAULT, W_NEXT, W_CUDA, W_NVML };

static const char *const where_names[] = {"default", "next", "cuda-handle", "nvml-handle"};

struct lookup {
	enum where where;
	const char *name;
	void *answer;		/* single-threaded */
};

static struct lookup table[] = {
	{W_DEFAULT, "malloc", NULL},
	{W_DEFAULT, "free", NULL},
	{W_DEFAULT, "strlen", NULL},
	{W_DEFAULT, "pthread_create", NULL},
	{W_DEFAULT, "dlopen", NULL},
	{W_DEFAULT, "cuInit", NULL},
	{W_DEFAULT, "cuMemAlloc_v2", NULL},
	{W_DEFAULT, "nvmlInit_v2", NULL},
	{W_DEFAULT, "ti_no_such_symbol", NULL},
	{W_NEXT, "malloc", NULL},
	{W_NEXT, "strlen", NULL},
	{W_NEXT, "pthread_mutex_lock", NULL},
	{W_NEXT, "ti_no_such_symbol", NULL},
	{W_CUDA, "cuInit", NULL},
	{W_CUDA, "cuMemAlloc_v2", NULL},
	{W_CUDA, "cuMemFree_v2", NULL},
	{W_CUDA, "cuMemGetInfo_v2", NULL},
	{W_CUDA, "cuLaunchKernel", NULL},
	{W_CUDA, "cuGetProcAddress_v2", NULL},
	{W_CUDA, "cuStreamDestroy_v2", NULL},
	{W_CUDA, "cuCtxGetDevice", NULL},
	{W_CUDA, "cuDeviceGet", NULL},
	{W_CUDA, "cuStreamCreate", NULL},
	{W_CUDA, "cuNoSuchFunction", NULL},
	{W_CUDA, "malloc", NULL},
	{W_NVML, "nvmlDeviceGetMemoryInfo", NULL},
	{W_NVML, "nvmlDeviceGetComputeRunningProcesses_v3", NULL},
	{W_NVML, "nvmlInit_v2", NULL},
	{W_NVML, "nvmlDeviceGetCount_v2", NULL},
	{W_NVML, "nvmlNoSuchFunction", NULL},
};

#define NTABLE (sizeof(table) / sizeof(table[0]))

static void *cuda_h, *nvml_h;
static unsigned long per_thread;
static atomic_ulong mismatches;

/* RTLD_NEXT is resolved relative to this function's object: the program. */
static void *resolve(const struct lookup *l)
{
	switch (l->where) {
	case W_DEFAULT:
		return dlsym(RTLD_DEFAULT, l->name);
	case W_NEXT:
		return dlsym(RTLD_NEXT, l->name);
	case W_CUDA:
		return dlsym(cuda_h, l->name);
	case W_NVML:
		return dlsym(nvml_h, l->name);
	}
	return NULL;
}

static void *worker(void *arg)
{
	unsigned long t = (unsigned long)(uintptr_t)arg, bad = 0;

	for (unsigned long i = 0; i < per_thread; i++) {
		/* Each thread walks the table from its own start, so all kinds overlap in time. */
		const struct lookup *l = &table[(i * 7 + t * 3) % NTABLE];

		if (resolve(l) != l->answer)
			bad++;
	}
	atomic_fetch_add(&mismatches, bad);
	return NULL;
}

static int stress(unsigned threads, unsigned long lookups)
{
	pthread_t tid[64];

	cuda_h = load("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	nvml_h = load("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	for (size_t i = 0; i < NTABLE; i++) {
		char where[64];

		table[i].answer = resolve(&table[i]);
		snprintf(where, sizeof(where), "answer %s", where_names[table[i].where]);
		show(where, table[i].name, table[i].answer);
	}
	per_thread = lookups;
	for (unsigned t = 0; t < threads; t++) {
		if (pthread_create(&tid[t], NULL, worker, (void *)(uintptr_t)t) != 0) {
			fprintf(stderr, "ti-dlsym: pthread_create failed\n");
			return 2;
		}
	}
	for (unsigned t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);
	printf("threads: %u x %lu lookups, %lu mismatch(es)\n", threads, lookups,
	       (unsigned long)atomic_load(&mismatches));
	return atomic_load(&mismatches) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "probe") == 0)
		return probe();
	if (argc == 4 && strcmp(argv[1], "stress") == 0) {
		unsigned threads = (unsigned)strtoul(argv[2], NULL, 10);
		unsigned long lookups = strtoul(argv[3], NULL, 10);

		if (threads >= 1 && threads <= 64 && lookups >= 1)
			return stress(threads, lookups);
	}
	fprintf(stderr, "usage: ti-dlsym probe | stress THREADS(1..64) LOOKUPS\n");
	return 2;
}
