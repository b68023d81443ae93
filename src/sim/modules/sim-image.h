/*
 * Device-code images as cusim's loader sees them (sim-image.c, sim-image-ptx.c;
 * written back as a cubin by sim-image-write.c).
 *
 * cuModuleLoadData and friends receive one of: a NUL-terminated PTX text, a
 * cubin (an ELF64 for EM_CUDA), a fatbin (a container of cubins and PTX for
 * several architectures, magic 0xBA55ED50), or a fatbin wrapped in the
 * __fatBinC_Wrapper_t struct that cudart passes (magic 0x466243b1). Nothing
 * is ever executed from an image: the loader only extracts what the driver
 * API reports about it (kernels, their parameter layout and resources, and
 * the __device__/__constant__ variables with their initial bytes).
 *
 * The caller's pointer comes without a length. The parsers never trust it:
 * they copy the bytes they need through a fault-safe read (process_vm_readv
 * on ourselves), so a truncated or lying image yields an error code, not a
 * SIGSEGV, and then work on private, bounds-checked copies.
 */
#ifndef SIM_IMAGE_H
#define SIM_IMAGE_H

#include "sim.h"

/* The argument buffer of a kernel is at most this large (CUDA 12.1+, Volta+). */
#define SIM_IMAGE_MAX_PARAM_BYTES 32764u
/* Images, sections and initialized variables larger than this are refused as corrupt. */
#define SIM_IMAGE_MAX_BYTES (1ull << 30)
/*
 * Zero-filled variables (.nv.global is NOBITS; PTX without an initializer)
 * take no room in the image and may be as large as device memory allows: up
 * to this, beyond any simulated device (the load then fails for memory).
 */
#define SIM_IMAGE_MAX_VAR_BYTES (1ull << 40)

/* PTX ISA version this driver understands (CUDA 13.0: PTX ISA 9.0), as major*10+minor. */
#define SIM_IMAGE_PTX_ISA_MAX 90

/* Registers per thread reported for kernels loaded from PTX (no ptxas here). */
#define SIM_IMAGE_PTX_DEFAULT_REGS 32

enum sim_image_kind {
	SIM_IMAGE_PTX,
	SIM_IMAGE_ELF,
	SIM_IMAGE_FATBIN,
	SIM_IMAGE_WRAPPER,	/* __fatBinC_Wrapper_t around a fatbin */
};

/* One kernel parameter in the device-side parameter layout. */
struct sim_image_param {
	uint32_t offset;
	uint32_t size;
};

/* What the image says about one kernel (an entry function). */
struct sim_image_func {
	char *name;
	uint32_t nparams;
	struct sim_image_param *params;	/* by ordinal */
	uint32_t param_bytes;		/* size of the argument buffer */
	int num_regs;			/* registers per thread */
	int static_smem;		/* bytes of statically allocated shared memory */
	int local_bytes;		/* local memory per thread */
	int const_bytes;		/* user __constant__ bytes of the module */
	int max_threads;		/* .maxntid / __launch_bounds__ product; 0: none */
	int reqntid[3];			/* .reqntid; all 0: none */
	int cluster[3];			/* compile-time cluster dimensions; all 0: none */
	bool cluster_must_be_set;	/* .explicitcluster */
	int ptx_version;		/* virtual architecture, e.g. 90 for compute_90 */
	int binary_version;		/* SASS architecture, e.g. 90 for sm_90 */
};

/* A __device__ or __constant__ variable. */
struct sim_image_global {
	char *name;
	size_t size;
	unsigned char *init;		/* size initial bytes, or NULL: zero-filled */
};

/* A module-scope texture or surface reference (PTX .texref / .surfref). */
struct sim_image_ref {
	char *name;
	bool surface;
};

/* A parsed image: owned by whoever parsed it, freed with sim_image_free(). */
struct sim_image {
	enum sim_image_kind kind;	/* what the caller passed */
	enum sim_image_kind code;	/* what was used: SIM_IMAGE_PTX or SIM_IMAGE_ELF */
	int arch;			/* architecture of the code used (e.g. 90) */
	uint32_t nfuncs;
	struct sim_image_func *funcs;
	uint32_t nglobals;
	struct sim_image_global *globals;
	uint32_t nrefs;
	struct sim_image_ref *refs;
};

/*
 * Where an image's bytes are. len is the number of bytes known to be
 * readable (a file read into memory); SIZE_MAX for a caller's pointer whose
 * extent is unknown, read only through the fault-safe path.
 */
struct sim_image_src {
	const unsigned char *base;
	size_t len;
};

/*
 * Parses the image at src for a device of compute capability cc (major*10 +
 * minor): detects its kind, picks the fatbin entry that device would run
 * (exact SASS, then SASS of the same major and a lower minor, then the newest
 * PTX not above cc), decompresses it when needed, and extracts kernels and
 * variables. On failure a one-line reason goes to err (may be NULL).
 * Returns CUDA_SUCCESS and *ret, or:
 *   CUDA_ERROR_INVALID_IMAGE	malformed, truncated or unreadable cubin/fatbin
 *   CUDA_ERROR_INVALID_PTX		malformed PTX, or PTX for a newer .target than cc
 *   CUDA_ERROR_UNSUPPORTED_PTX_VERSION	a PTX ISA newer than SIM_IMAGE_PTX_ISA_MAX
 *   CUDA_ERROR_NO_BINARY_FOR_GPU	a cubin, or a fatbin without code, for cc
 *   CUDA_ERROR_OUT_OF_MEMORY		host memory
 * Thread-safe; takes no lock.
 */
CUresult sim_image_parse(const struct sim_image_src *src, int cc, struct sim_image **ret,
			 char *err, size_t errlen);

/* Frees a parsed image (NULL is fine). */
void sim_image_free(struct sim_image *img);

/* The kernel named `name`, or NULL. */
const struct sim_image_func *sim_image_find_func(const struct sim_image *img, const char *name);

/*
 * Copies n bytes at src into dst without faulting on unmapped memory.
 * Returns false when any of them cannot be read.
 */
bool sim_image_safe_read(void *dst, const void *src, size_t n);

/*
 * PTX parser (sim-image-ptx.c): text[0..len) (parsing stops at a NUL), for
 * a device of compute capability cc; a .target above cc is INVALID_PTX, as
 * the real JIT fails on it. Fills img's functions, globals and arch. Errors
 * as sim_image_parse.
 */
CUresult sim_image_parse_ptx(const char *text, size_t len, int cc, struct sim_image *img,
			     char *err, size_t errlen);

/*
 * Writes img as a cubin for SASS architecture arch (e.g. 90) that
 * sim_image_parse reads back with the same kernels (parameters, registers,
 * shared and local memory, launch bounds, clusters), the same variables
 * (initial bytes included) and the same __constant__ size (sim-image-write.c).
 * The caller frees *ret. CUDA_ERROR_OUT_OF_MEMORY, or CUDA_ERROR_INVALID_IMAGE
 * for more kernels than an ELF section table can index.
 */
CUresult sim_image_write_cubin(const struct sim_image *img, int arch, unsigned char **ret,
			       size_t *ret_len);

/* Helpers shared by the two parsers (sim-image.c). */
void sim_image_set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
CUresult sim_image_add_func(struct sim_image *img, struct sim_image_func **ret);
CUresult sim_image_add_global(struct sim_image *img, struct sim_image_global **ret);
/* Records a texture (surface: surface) reference named name[0..len); a repeat is ignored. */
CUresult sim_image_add_ref(struct sim_image *img, const char *name, size_t len, bool surface);

#endif
