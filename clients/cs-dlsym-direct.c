/*
 * cs-dlsym-direct: reach the driver the way cuBLASLt does next to the
 * runtime: dlopen("libcuda.so.1") and dlsym() of exported, versioned names
 * (cuMemAlloc_v2, cuMemcpyHtoD_v2, ...) with no cuGetProcAddress at all.
 * An interposer that only answers cuGetProcAddress, or that wraps the
 * unversioned names only, misses every call made here.
 *
 * Runs: cuInit, devices, primary context, an allocation, a verified
 * HtoD/DtoD/DtoH round trip, cuMemGetInfo accounting, frees.
 *
 * Exit status: 0 success; 1 a symbol is missing or a call failed (named);
 * 2 usage.
 */
#include <cudaTypedefs.h>

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-size.h"

#define PROG "cs-dlsym-direct"
#define USAGE "usage: " PROG " [--device N] [--bytes SIZE] [--lib PATH]\n"

/* Every symbol this program uses, by its exported (versioned) name. */
struct api {
	PFN_cuGetErrorName_v6000 cuGetErrorName;
	PFN_cuInit_v2000 cuInit;
	PFN_cuDriverGetVersion_v2020 cuDriverGetVersion;
	PFN_cuDeviceGetCount_v2000 cuDeviceGetCount;
	PFN_cuDeviceGet_v2000 cuDeviceGet;
	PFN_cuDeviceGetName_v2000 cuDeviceGetName;
	PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute;
	PFN_cuDeviceTotalMem_v3020 cuDeviceTotalMem_v2;
	PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
	PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease_v2;
	PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
	PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent;
	PFN_cuMemAlloc_v3020 cuMemAlloc_v2;
	PFN_cuMemFree_v3020 cuMemFree_v2;
	PFN_cuMemGetInfo_v3020 cuMemGetInfo_v2;
	PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD_v2;
	PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH_v2;
	PFN_cuMemcpyDtoD_v3020 cuMemcpyDtoD_v2;
	PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange_v2;
};

struct opts {
	const char *lib;
	int device;
	uint64_t bytes;
};

static void *handle;
static struct api api;

/* dlsym of one name; clears *ok with a message naming it when it is missing. */
static void *sym(const char *name, bool *ok)
{
	void *p = dlsym(handle, name);

	if (!p) {
		fprintf(stderr, PROG ": dlsym(\"%s\") failed: %s\n", name, dlerror());
		*ok = false;
	}
	return p;
}

static bool load(const char *lib)
{
	bool ok = true;

	handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!handle) {
		fprintf(stderr, PROG ": dlopen(\"%s\") failed: %s\n", lib, dlerror());
		return false;
	}
	api.cuGetErrorName = (PFN_cuGetErrorName_v6000)sym("cuGetErrorName", &ok);
	api.cuInit = (PFN_cuInit_v2000)sym("cuInit", &ok);
	api.cuDriverGetVersion = (PFN_cuDriverGetVersion_v2020)sym("cuDriverGetVersion", &ok);
	api.cuDeviceGetCount = (PFN_cuDeviceGetCount_v2000)sym("cuDeviceGetCount", &ok);
	api.cuDeviceGet = (PFN_cuDeviceGet_v2000)sym("cuDeviceGet", &ok);
	api.cuDeviceGetName = (PFN_cuDeviceGetName_v2000)sym("cuDeviceGetName", &ok);
	api.cuDeviceGetAttribute =
		(PFN_cuDeviceGetAttribute_v2000)sym("cuDeviceGetAttribute", &ok);
	api.cuDeviceTotalMem_v2 = (PFN_cuDeviceTotalMem_v3020)sym("cuDeviceTotalMem_v2", &ok);
	api.cuDevicePrimaryCtxRetain =
		(PFN_cuDevicePrimaryCtxRetain_v7000)sym("cuDevicePrimaryCtxRetain", &ok);
	api.cuDevicePrimaryCtxRelease_v2 =
		(PFN_cuDevicePrimaryCtxRelease_v11000)sym("cuDevicePrimaryCtxRelease_v2", &ok);
	api.cuCtxSetCurrent = (PFN_cuCtxSetCurrent_v4000)sym("cuCtxSetCurrent", &ok);
	api.cuCtxGetCurrent = (PFN_cuCtxGetCurrent_v4000)sym("cuCtxGetCurrent", &ok);
	api.cuMemAlloc_v2 = (PFN_cuMemAlloc_v3020)sym("cuMemAlloc_v2", &ok);
	api.cuMemFree_v2 = (PFN_cuMemFree_v3020)sym("cuMemFree_v2", &ok);
	api.cuMemGetInfo_v2 = (PFN_cuMemGetInfo_v3020)sym("cuMemGetInfo_v2", &ok);
	api.cuMemcpyHtoD_v2 = (PFN_cuMemcpyHtoD_v3020)sym("cuMemcpyHtoD_v2", &ok);
	api.cuMemcpyDtoH_v2 = (PFN_cuMemcpyDtoH_v3020)sym("cuMemcpyDtoH_v2", &ok);
	api.cuMemcpyDtoD_v2 = (PFN_cuMemcpyDtoD_v3020)sym("cuMemcpyDtoD_v2", &ok);
	api.cuMemGetAddressRange_v2 =
		(PFN_cuMemGetAddressRange_v3020)sym("cuMemGetAddressRange_v2", &ok);
	return ok;
}

static bool check(CUresult r, const char *call)
{
	const char *name = NULL;

	if (r == CUDA_SUCCESS)
		return true;
	if (api.cuGetErrorName)
		api.cuGetErrorName(r, &name);
	fprintf(stderr, PROG ": %s failed: %s (%d)\n", call, name ? name : "unknown error",
		(int)r);
	return false;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{"device", required_argument, NULL, 'd'},
		{"bytes", required_argument, NULL, 'b'},
		{"lib", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char *end;
	int c;

	*o = (struct opts){.lib = "libcuda.so.1", .bytes = 4u << 20};
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o->device = (int)strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end || o->device < 0) {
				fprintf(stderr, PROG ": --device: not an ordinal: %s\n", optarg);
				return -EINVAL;
			}
			break;
		case 'b':
			if (cs_size_parse(optarg, &o->bytes) < 0 || o->bytes == 0 ||
			    o->bytes > (1ull << 32)) {
				fprintf(stderr, PROG ": --bytes: expected 1 byte to 4GiB (%s)\n",
					CS_SIZE_FORMS);
				return -EINVAL;
			}
			break;
		case 'l':
			o->lib = optarg;
			break;
		case 'h':
			fputs(USAGE, stdout);
			exit(0);
		default:
			fputs(USAGE, stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument: %s\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/*
 * Two device buffers: a <- host, b <- a (DtoD), host <- b, compared; the
 * allocation must show in cuMemGetInfo and in cuMemGetAddressRange.
 */
static bool round_trip(const struct opts *o)
{
	CUdevice dev;
	CUcontext ctx = NULL, cur = NULL;
	CUdeviceptr a = 0, b = 0, base = 0;
	size_t n = (size_t)o->bytes, free0, free1, free2, total, tmem, range = 0;
	unsigned char *src = malloc(n), *dst = malloc(n);
	int version = 0, count = 0, sms = 0;
	char name[128];
	bool ok;

	if (!src || !dst) {
		fprintf(stderr, PROG ": out of host memory\n");
		free(src);
		free(dst);
		return false;
	}
	ok = check(api.cuInit(0), "cuInit") &&
	     check(api.cuDriverGetVersion(&version), "cuDriverGetVersion") &&
	     check(api.cuDeviceGetCount(&count), "cuDeviceGetCount") &&
	     check(api.cuDeviceGet(&dev, o->device), "cuDeviceGet") &&
	     check(api.cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName") &&
	     check(api.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
		   "cuDeviceGetAttribute") &&
	     check(api.cuDeviceTotalMem_v2(&tmem, dev), "cuDeviceTotalMem_v2") &&
	     check(api.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") &&
	     check(api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent") &&
	     check(api.cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
	if (!ok)
		goto out;
	printf("driver %d, %d device(s); device %d: %s, %d SMs, %zu bytes\n", version, count,
	       o->device, name, sms, tmem);
	if (cur != ctx) {
		fprintf(stderr, PROG ": cuCtxGetCurrent returned %p after cuCtxSetCurrent(%p)\n",
			(void *)cur, (void *)ctx);
		ok = false;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		src[i] = (unsigned char)(i * 13 + (i >> 9));
	memset(dst, 0, n);
	ok = check(api.cuMemGetInfo_v2(&free0, &total), "cuMemGetInfo_v2") &&
	     check(api.cuMemAlloc_v2(&a, n), "cuMemAlloc_v2") &&
	     check(api.cuMemAlloc_v2(&b, n), "cuMemAlloc_v2") &&
	     check(api.cuMemGetInfo_v2(&free1, &total), "cuMemGetInfo_v2") &&
	     check(api.cuMemGetAddressRange_v2(&base, &range, b + n / 2),
		   "cuMemGetAddressRange_v2") &&
	     check(api.cuMemcpyHtoD_v2(a, src, n), "cuMemcpyHtoD_v2") &&
	     check(api.cuMemcpyDtoD_v2(b, a, n), "cuMemcpyDtoD_v2") &&
	     check(api.cuMemcpyDtoH_v2(dst, b, n), "cuMemcpyDtoH_v2");
	if (!ok)
		goto out;
	if (memcmp(src, dst, n) != 0) {
		fprintf(stderr, PROG ": HtoD/DtoD/DtoH round trip of %zu bytes differs\n", n);
		ok = false;
	}
	if (base != b || range != n) {
		fprintf(stderr,
			PROG ": cuMemGetAddressRange_v2(b + %zu) = 0x%llx + %zu, expected 0x%llx + "
			     "%zu\n",
			n / 2, (unsigned long long)base, range, (unsigned long long)b, n);
		ok = false;
	}
	if (free1 + 2 * n > free0) {
		fprintf(stderr, PROG ": cuMemGetInfo free went %zu -> %zu for 2 x %zu bytes\n",
			free0, free1, n);
		ok = false;
	}
out:
	if (a)
		ok = check(api.cuMemFree_v2(a), "cuMemFree_v2") && ok;
	if (b)
		ok = check(api.cuMemFree_v2(b), "cuMemFree_v2") && ok;
	if (a && b && check(api.cuMemGetInfo_v2(&free2, &total), "cuMemGetInfo_v2")) {
		if (free2 != free0) {
			fprintf(stderr, PROG ": cuMemGetInfo free %zu after freeing, %zu before\n",
				free2, free0);
			ok = false;
		}
		if (ok)
			printf("round trip: 2 x %zu bytes HtoD -> DtoD -> DtoH verified; "
			       "free %zu -> %zu -> %zu of %zu\n",
			       n, free0, free1, free2, total);
	}
	if (ctx)
		ok = check(api.cuDevicePrimaryCtxRelease_v2(dev), "cuDevicePrimaryCtxRelease_v2") &&
		     ok;
	free(src);
	free(dst);
	return ok;
}

int main(int argc, char **argv)
{
	struct opts o;
	bool ok;

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	if (!load(o.lib))
		return 1;
	printf(PROG ": %s loaded, %zu versioned symbols resolved with dlsym\n", o.lib,
	       sizeof(api) / sizeof(void (*)(void)));
	ok = round_trip(&o);
	printf("%s\n", ok ? "OK" : "FAILED");
	return ok ? 0 : 1;
}
