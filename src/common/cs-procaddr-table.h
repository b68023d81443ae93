/*
 * The (name, CUDA version, flavour) -> symbol tables behind cuGetProcAddress,
 * shared by cusim (which implements the functions) and libcuslice (which
 * wraps some of them). scripts/gen-cuda-api.py generates the rows from the
 * toolkit's cudaTypedefs.h and the real driver's export list.
 */
#ifndef CS_PROCADDR_TABLE_H
#define CS_PROCADDR_TABLE_H

#include <stdbool.h>
#include <stddef.h>

/* Any function pointer; cast to the variant's real type by the caller. */
typedef void (*cs_procaddr_fn)(void);

enum cs_procaddr_flavour {
	CS_PROCADDR_LEGACY = 0, /* legacy default stream */
	CS_PROCADDR_PTDS = 1,	/* per-thread default stream, synchronous call */
	CS_PROCADDR_PTSZ = 2,	/* per-thread default stream, stream argument */
};

/* One (base name, first CUDA version, flavour) -> exported symbol. */
struct cs_procaddr_row {
	const char *name;
	int version;
	unsigned char flavour;
	const char *symbol;
	cs_procaddr_fn fn; /* NULL: a real driver symbol this library does not provide */
};

/* A provided symbol by exact name. */
struct cs_sym {
	const char *name;
	cs_procaddr_fn fn;
};

enum cs_procaddr_result {
	CS_PROCADDR_FOUND,
	CS_PROCADDR_NOT_FOUND,		    /* no such driver function */
	CS_PROCADDR_VERSION_NOT_SUFFICIENT, /* it exists, but not at that version */
};

/*
 * The variant cuGetProcAddress hands out for `name` at CUDA `version`: the
 * newest legacy variant introduced at or before `version`, or, when
 * `per_thread`, the per-thread (_ptds/_ptsz) form of that same variant when
 * one exists. rows are sorted by (name, version, flavour). Returns the row
 * (whose fn may be NULL) with CS_PROCADDR_FOUND, or NULL with the reason.
 */
const struct cs_procaddr_row *cs_procaddr_lookup(const struct cs_procaddr_row *rows, size_t nrows,
						 const char *name, int version, bool per_thread,
						 enum cs_procaddr_result *result);

#endif
