/*
 * The frame of the compat clients (tests/compat/clients): programs that use
 * the driver API the way a given third-party program or SDK sample does.
 *
 * A client is a list of named tests. Run without arguments it runs each one
 * in a process of its own (itself, re-executed with the test's name: a
 * driver is initialized once per process, and a crash ends one test only)
 * and prints one line per test for tests/compat/run-compat.py:
 *
 *     RESULT <client>.<test> ok|fail|skip|crash
 *
 * with the reason of a failure on stderr. Run with a test name it runs that
 * test only. A test returns NULL when it passed, compat_skip(...) to skip,
 * or a message saying what failed (compat_fail, compat_cu).
 *
 * CUSIM_TEST_KERNELS names the directory of the test kernels
 * (tests/kernels) where a test needs a module.
 */
#ifndef COMPAT_H
#define COMPAT_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>

struct compat_test {
	const char *name;
	const char *(*fn)(void);
};

/* A failure message (printf-style), in a static buffer. */
const char *compat_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "what failed: CUDA_ERROR_..." for a call that returned r. */
const char *compat_cu(const char *what, CUresult r);

/* The name of r ("CUDA_ERROR_OUT_OF_MEMORY"): static storage, never the message buffer. */
const char *compat_name(CUresult r);

/* A skip with its reason. */
const char *compat_skip(const char *reason);

/*
 * Reads $CUSIM_TEST_KERNELS/name into a malloc'd, NUL-terminated buffer
 * (*len: its size without the NUL; may be NULL); NULL when it cannot.
 */
unsigned char *compat_kernel_file(const char *name, size_t *len);

/* cuInit, device `ordinal`, its primary context retained and current. */
CUresult compat_init(int ordinal, CUcontext *ctx);

/* The whole client: see above. Returns main's exit status. */
int compat_main(const char *client, const struct compat_test *tests, size_t n, int argc,
		char **argv);

#endif
