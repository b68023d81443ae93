/*
 * cs-alloc: allocate device memory through the public driver API, prove the
 * bytes are real (pattern written with cuMemcpyHtoD, read back with
 * cuMemcpyDtoH), hold it, free it.
 *
 * Linked with -lcuda like any driver-API program, so it runs unchanged on
 * cusim, on a real GPU, and under the cuslice interposer. Multi-process tests
 * use it as the "other process" that holds capacity: it prints `ready` on
 * stdout (flushed) once everything is allocated and verified, then holds.
 *
 * Exit status: 0 on success (with --expect-oom: an allocation failed with
 * CUDA_ERROR_OUT_OF_MEMORY); 1 when a call failed (the message names it);
 * 2 for a usage error.
 */
#include <cuda.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cs-size.h"

#define PROG "cs-alloc"

/* Copies are done through a bounded staging buffer so that GiB-sized holds work. */
#define CHUNK (8u << 20)
/* --verify sample: this many pieces of this size, first and last byte included. */
#define SAMPLES 16
#define SAMPLE_LEN (64u << 10)

enum alloc_kind {
	KIND_DEVICE,
	KIND_PITCH,
	KIND_MANAGED,
	KIND_HOST,
};

static const char *const kind_names[] = {"device", "pitch", "managed", "host"};

/*
 * How much of each buffer the pattern check covers. Device memory is real
 * host memory in cusim: `sample` lets a demo hold 60 GiB on a small machine.
 */
enum verify_mode {
	VERIFY_FULL,
	VERIFY_SAMPLE,
	VERIFY_NONE,
};

static const char *const verify_names[] = {"full", "sample", "none"};

struct opts {
	int device;
	uint64_t bytes;
	unsigned count;
	double hold_s;		/* < 0: no hold */
	bool hold_signal;
	enum alloc_kind kind;
	enum verify_mode verify;
	bool expect_oom;
};

/* One allocation: `dptr` is what copies address, `host` the cuMemAllocHost pointer. */
struct buf {
	CUdeviceptr dptr;
	void *host;
	size_t size;		/* bytes the pattern covers */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options]\n"
		"  --device N            CUDA ordinal (default 0)\n"
		"  --bytes SIZE          bytes per allocation (default 64MiB; e.g. 4096, 1.5GiB)\n"
		"  --count K             number of allocations (default 1)\n"
		"  --kind KIND           device (cuMemAlloc), pitch (cuMemAllocPitch),\n"
		"                        managed (cuMemAllocManaged), host (cuMemAllocHost)\n"
		"  --hold SECONDS        keep the memory this long after `ready`\n"
		"  --hold-until-signal   keep it until SIGTERM, SIGINT, SIGHUP or SIGUSR1\n"
		"  --verify MODE         pattern check of each buffer: full (default), sample\n"
		"                        (16 x 64 KiB spread over it) or none\n"
		"  --expect-oom          succeed only if an allocation fails with\n"
		"                        CUDA_ERROR_OUT_OF_MEMORY (the others are kept)\n");
}

/* Prints "PROG: CALL failed: NAME (text)" on stderr; returns false unless r is success. */
static bool check(CUresult r, const char *call)
{
	const char *name = NULL, *text = NULL;

	if (r == CUDA_SUCCESS)
		return true;
	cuGetErrorName(r, &name);
	cuGetErrorString(r, &text);
	fprintf(stderr, PROG ": %s failed: %s (%d): %s\n", call, name ? name : "unknown error",
		(int)r, text ? text : "no description");
	return false;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{"device", required_argument, NULL, 'd'},
		{"bytes", required_argument, NULL, 'b'},
		{"count", required_argument, NULL, 'c'},
		{"hold", required_argument, NULL, 'H'},
		{"hold-until-signal", no_argument, NULL, 'S'},
		{"kind", required_argument, NULL, 'k'},
		{"verify", required_argument, NULL, 'v'},
		{"expect-oom", no_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char *end;
	int c;

	*o = (struct opts){.bytes = 64ull << 20, .count = 1, .hold_s = -1};
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd': {
			long v = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end || v < 0 || v > 1024) {
				fprintf(stderr, PROG ": --device: not an ordinal: %s\n", optarg);
				return -EINVAL;
			}
			o->device = (int)v;
			break;
		}
		case 'b':
			if (cs_size_parse(optarg, &o->bytes) < 0 || o->bytes == 0) {
				fprintf(stderr, PROG ": --bytes: expected %s, got \"%s\"\n",
					CS_SIZE_FORMS, optarg);
				return -EINVAL;
			}
			break;
		case 'c': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*optarg == '\0' || *end || v == 0 || v > 1000000) {
				fprintf(stderr, PROG ": --count: expected 1..1000000, got %s\n",
					optarg);
				return -EINVAL;
			}
			o->count = (unsigned)v;
			break;
		}
		case 'H':
			o->hold_s = strtod(optarg, &end);
			if (*optarg == '\0' || *end || o->hold_s < 0 || o->hold_s > 1e7) {
				fprintf(stderr, PROG ": --hold: expected seconds, got %s\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'S':
			o->hold_signal = true;
			break;
		case 'k': {
			size_t i;
			for (i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
				if (strcmp(optarg, kind_names[i]) == 0)
					break;
			if (i == sizeof(kind_names) / sizeof(kind_names[0])) {
				fprintf(stderr,
					PROG ": --kind: expected device, pitch, managed or host, "
					     "got %s\n",
					optarg);
				return -EINVAL;
			}
			o->kind = (enum alloc_kind)i;
			break;
		}
		case 'v': {
			size_t i;
			for (i = 0; i < sizeof(verify_names) / sizeof(verify_names[0]); i++)
				if (strcmp(optarg, verify_names[i]) == 0)
					break;
			if (i == sizeof(verify_names) / sizeof(verify_names[0])) {
				fprintf(stderr,
					PROG ": --verify: expected full, sample or none, got %s\n",
					optarg);
				return -EINVAL;
			}
			o->verify = (enum verify_mode)i;
			break;
		}
		case 'o':
			o->expect_oom = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument: %s\n", argv[optind]);
		return -EINVAL;
	}
	if (o->hold_signal && o->hold_s >= 0) {
		fprintf(stderr, PROG ": --hold and --hold-until-signal exclude each other\n");
		return -EINVAL;
	}
	if ((uint64_t)(size_t)o->bytes != o->bytes) {
		fprintf(stderr, PROG ": --bytes: too large for this host\n");
		return -EINVAL;
	}
	return 0;
}

static bool print_meminfo(const char *when)
{
	size_t free_b, total_b;
	char f[32], t[32];

	if (!check(cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo_v2"))
		return false;
	printf("meminfo %s: free=%zu total=%zu (%s free of %s)\n", when, free_b, total_b,
	       cs_size_format(free_b, f, sizeof(f)), cs_size_format(total_b, t, sizeof(t)));
	return true;
}

/* The pattern word at byte offset `off` (a multiple of 8) of buffer `idx`. */
static uint64_t pattern(unsigned idx, size_t off)
{
	uint64_t x = ((uint64_t)off >> 3) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)idx + 1) << 40;

	return x ^ (x >> 29);
}

static void fill(unsigned char *stage, unsigned idx, size_t off, size_t len)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = pattern(idx, off + i);
		memcpy(stage + i, &w, len - i < 8 ? len - i : 8);
	}
}

/*
 * The region [off, off + len) of the k-th of `n` pieces the check covers:
 * all of the buffer in CHUNK pieces (full), or SAMPLES pieces of at most
 * SAMPLE_LEN spread from its first to its last byte (sample). Offsets are
 * multiples of 8 so that overlapping pieces carry the same pattern bytes.
 */
static void region(const struct buf *b, enum verify_mode mode, size_t k, size_t *off, size_t *len)
{
	size_t piece = mode == VERIFY_FULL ? CHUNK : SAMPLE_LEN;

	if (piece > b->size)
		piece = b->size;
	if (mode == VERIFY_FULL) {
		*off = k * piece;
		*len = b->size - *off < piece ? b->size - *off : piece;
		return;
	}
	*off = (b->size - piece) / (SAMPLES - 1) * k & ~(size_t)7;
	*len = b->size - *off < piece ? b->size - *off : piece;
}

static size_t nregions(const struct buf *b, enum verify_mode mode)
{
	if (mode == VERIFY_NONE)
		return 0;
	if (mode == VERIFY_SAMPLE)
		return SAMPLES;
	return (b->size + CHUNK - 1) / CHUNK;
}

/*
 * Writes the pattern of buffer idx with cuMemcpyHtoD, then reads it back with
 * cuMemcpyDtoH into a scrubbed staging buffer and compares. Returns false
 * (after a message) on a failed call or a mismatch.
 */
static bool write_and_verify(const struct buf *b, unsigned idx, enum verify_mode mode)
{
	size_t n = nregions(b, mode), off, len;
	unsigned char *stage = malloc(CHUNK), *want = malloc(CHUNK);
	bool ok = stage && want;

	if (!ok)
		fprintf(stderr, PROG ": out of host memory for a staging buffer\n");
	for (size_t k = 0; ok && k < n; k++) {
		region(b, mode, k, &off, &len);
		fill(stage, idx, off, len);
		ok = check(cuMemcpyHtoD(b->dptr + off, stage, len), "cuMemcpyHtoD_v2");
	}
	for (size_t k = 0; ok && k < n; k++) {
		region(b, mode, k, &off, &len);
		memset(stage, 0xa5, len);
		ok = check(cuMemcpyDtoH(stage, b->dptr + off, len), "cuMemcpyDtoH_v2");
		if (!ok)
			break;
		fill(want, idx, off, len);
		if (memcmp(stage, want, len) != 0) {
			size_t i = 0;
			while (stage[i] == want[i])
				i++;
			fprintf(stderr,
				PROG ": verify failed: buffer %u byte %zu reads 0x%02x, "
				     "wrote 0x%02x\n",
				idx, off + i, stage[i], want[i]);
			ok = false;
		}
	}
	free(stage);
	free(want);
	return ok;
}

/* Allocates one buffer of the requested kind; returns the driver's result. */
static CUresult alloc_one(const struct opts *o, struct buf *b, const char **call)
{
	CUresult r;

	memset(b, 0, sizeof(*b));
	b->size = (size_t)o->bytes;
	switch (o->kind) {
	case KIND_DEVICE:
		*call = "cuMemAlloc_v2";
		return cuMemAlloc(&b->dptr, b->size);
	case KIND_PITCH: {
		/* Rows of up to 64 KiB; the pattern covers pitch x height. */
		size_t width = b->size < (64u << 10) ? b->size : (64u << 10);
		size_t height = (b->size + width - 1) / width, pitch = 0;
		*call = "cuMemAllocPitch_v2";
		r = cuMemAllocPitch(&b->dptr, &pitch, width, height, 4);
		if (r == CUDA_SUCCESS)
			b->size = pitch * height;
		return r;
	}
	case KIND_MANAGED:
		*call = "cuMemAllocManaged";
		return cuMemAllocManaged(&b->dptr, b->size, CU_MEM_ATTACH_GLOBAL);
	case KIND_HOST:
		*call = "cuMemAllocHost_v2";
		r = cuMemAllocHost(&b->host, b->size);
		if (r != CUDA_SUCCESS)
			return r;
		*call = "cuMemHostGetDevicePointer_v2";
		r = cuMemHostGetDevicePointer(&b->dptr, b->host, 0);
		if (r != CUDA_SUCCESS)
			cuMemFreeHost(b->host);
		return r;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

static bool free_one(const struct opts *o, const struct buf *b)
{
	if (o->kind == KIND_HOST)
		return check(cuMemFreeHost(b->host), "cuMemFreeHost");
	return check(cuMemFree(b->dptr), "cuMemFree_v2");
}

/* Waits until the hold ends (time or signal). The signals are blocked in main. */
static void hold(const struct opts *o, const sigset_t *sigs)
{
	struct timespec ts;
	int sig;

	if (o->hold_signal) {
		printf("holding until SIGTERM/SIGINT/SIGHUP/SIGUSR1 (pid %ld)\n", (long)getpid());
		fflush(stdout);
		while ((sig = sigwaitinfo(sigs, NULL)) < 0 && errno == EINTR)
			;
		printf("signal %d: releasing\n", sig);
		return;
	}
	if (o->hold_s <= 0)
		return;
	printf("holding %.3g s (pid %ld)\n", o->hold_s, (long)getpid());
	fflush(stdout);
	ts.tv_sec = (time_t)o->hold_s;
	ts.tv_nsec = (long)((o->hold_s - (double)ts.tv_sec) * 1e9);
	/* A signal ends the hold early but still frees cleanly. */
	sig = sigtimedwait(sigs, NULL, &ts);
	if (sig > 0)
		printf("signal %d: releasing early\n", sig);
}

int main(int argc, char **argv)
{
	struct opts o;
	sigset_t sigs;
	struct buf *bufs;
	unsigned got = 0;
	bool ok = true, oom = false;
	CUdevice dev;
	CUcontext ctx;
	char name[256], sz[32];

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	/* Line by line, so that a reader of a pipe sees progress (and "ready") at once. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Blocked before any thread exists, so that only sigwait sees them. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	if (o.hold_signal || o.hold_s > 0)
		sigprocmask(SIG_BLOCK, &sigs, NULL);

	bufs = calloc(o.count, sizeof(*bufs));
	if (!bufs) {
		fprintf(stderr, PROG ": out of host memory\n");
		return 1;
	}
	if (!check(cuInit(0), "cuInit") || !check(cuDeviceGet(&dev, o.device), "cuDeviceGet") ||
	    !check(cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName") ||
	    !check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain"))
		return 1;
	if (!check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
		return 1;
	printf(PROG ": pid %ld, device %d (%s), %u x %s of %s memory\n", (long)getpid(),
	       o.device, name, o.count, cs_size_format(o.bytes, sz, sizeof(sz)),
	       kind_names[o.kind]);
	ok = print_meminfo("before");

	for (unsigned i = 0; ok && i < o.count; i++) {
		const char *call = "";
		CUresult r = alloc_one(&o, &bufs[i], &call);

		if (r == CUDA_ERROR_OUT_OF_MEMORY && o.expect_oom) {
			printf("alloc %u: %s(%" PRIu64 ") -> CUDA_ERROR_OUT_OF_MEMORY, "
			       "as expected\n",
			       i, call, o.bytes);
			oom = true;
			break;
		}
		if (r != CUDA_SUCCESS) {
			char what[128];
			snprintf(what, sizeof(what), "%s(%" PRIu64 ") (allocation %u of %u)", call,
				 o.bytes, i + 1, o.count);
			ok = check(r, what);
			break;
		}
		got++;
		printf("alloc %u: 0x%llx %zu bytes\n", i, (unsigned long long)bufs[i].dptr,
		       bufs[i].size);
		ok = write_and_verify(&bufs[i], i, o.verify);
	}
	if (ok) {
		if (o.verify != VERIFY_NONE)
			printf("verify (%s): %u buffer(s) written with cuMemcpyHtoD and read back "
			       "intact\n",
			       verify_names[o.verify], got);
		ok = print_meminfo("after");
	}
	if (ok && o.expect_oom && !oom) {
		fprintf(stderr,
			PROG ": expected CUDA_ERROR_OUT_OF_MEMORY, but all %u allocation(s) "
			     "succeeded\n",
			o.count);
		ok = false;
	}
	if (ok) {
		printf("ready\n");
		fflush(stdout);
		hold(&o, &sigs);
	}
	for (unsigned i = 0; i < got; i++)
		ok = free_one(&o, &bufs[i]) && ok;
	if (got)
		printf("freed %u buffer(s)\n", got);
	ok = print_meminfo("end") && ok;
	ok = check(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease_v2") && ok;
	free(bufs);
	fflush(stdout);
	return ok ? 0 : 1;
}
