/*
 * Helpers for cusim's tests (also used by tests/quota and tests/interpose):
 * each test runs on its own simulator instance and may fork/exec children
 * that share it. The instance and the children come from the shared harness
 * (tests/common: cusim-instance.h, proc.h).
 */
#ifndef CST_H
#define CST_H

#include <cuda.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/*
 * Gives this process (and its children) a fresh, private simulator instance
 * "cst-<tag>-<pid>" with the given CUSIM_GPUS (NULL: default) and context
 * footprint (NULL: default), removed again at exit. Call before cuInit.
 */
void cst_fresh_instance(const char *tag, const char *gpus, const char *ctx_mem);

/* Asserts a CUresult, printing both names on mismatch. */
#define cst_assert_cu(expected, call) cst_assert_cu_((expected), (call), #call, __FILE__, __LINE__)
void cst_assert_cu_(CUresult expected, CUresult got, const char *what, const char *file, int line);

/* cuInit(0), device 0, primary context retained and made current. */
CUcontext cst_init_primary(int ordinal);

/*
 * Runs argv as a child process with the current environment plus `env`
 * ("NAME=value" strings, NULL-terminated, may be NULL); returns its exit
 * status (exit code, or 128+signal).
 */
int cst_run(char *const argv[], char *const env[]);

/* Path of a built helper program next to the test binary (argv[0]'s directory). */
const char *cst_exe(const char *name);

/* Records argv[0] so cst_exe can find sibling programs. Call first in main. */
void cst_set_argv0(const char *argv0);

#endif
