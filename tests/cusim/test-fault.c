/*
 * Unit tests of src/sim/control/sim-fault.c: spec parsing, the instance fault table
 * (nth/count semantics, pid filter, domains, capacity, clearing) and the
 * per-process CUSIM_FAULTS list (in forked children, since it loads once).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "sim-fault.h"
#include "sim-shared.h"

#define FORM "NAME[@N][xK]=ERROR"

static char tmpdir[64];
static struct sim_shared *sh;

/* ---- parsing ---- */

static struct sim_fault parse_ok(const char *item, enum sim_fault_domain dom)
{
	struct sim_fault f;
	char err[1024] = "";
	int r = sim_fault_parse_one(item, dom, &f, err, sizeof(err));

	if (r != 0)
		print_error("parse \"%s\": %d %s\n", item, r, err);
	assert_int_equal(r, 0);
	return f;
}

static void expect_parse(const char *item, enum sim_fault_domain dom, const char *name, int error,
			 enum sim_fault_domain edom, uint32_t nth, uint32_t count)
{
	struct sim_fault f = parse_ok(item, dom);

	assert_string_equal(f.name, name);
	assert_int_equal(f.error, error);
	assert_int_equal(f.domain, edom);
	assert_int_equal(f.nth, nth);
	assert_int_equal(f.count, count);
	assert_int_equal(f.pid, 0);
	assert_int_equal(f.calls, 0);
	assert_int_equal(f.fired, 0);
	assert_int_equal(f.active, 0);
}

/* The message names the item (trimmed), the problem and the accepted form. */
static void expect_bad(const char *item, enum sim_fault_domain dom, const char *shown,
		       const char *why)
{
	struct sim_fault f;
	char err[1024] = "";
	int r = sim_fault_parse_one(item, dom, &f, err, sizeof(err));

	if (r != -EINVAL || !strstr(err, shown) || !strstr(err, why) || !strstr(err, FORM))
		print_error("parse \"%s\": r=%d err=\"%s\"; expected -EINVAL naming \"%s\" and "
			    "\"%s\"\n",
			    item, r, err, shown, why);
	assert_int_equal(r, -EINVAL);
	assert_non_null(strstr(err, shown));
	assert_non_null(strstr(err, why));
	assert_non_null(strstr(err, FORM));
}

static void test_fault_parse_forms(void **state)
{
	const enum sim_fault_domain C = SIM_FAULT_CUDA, N = SIM_FAULT_NVML;

	(void)state;
	expect_parse("cuMemAlloc_v2=OUT_OF_MEMORY", C, "cuMemAlloc_v2", 2, C, 1, 1);
	expect_parse("cuMemAlloc_v2=CUDA_ERROR_OUT_OF_MEMORY", C, "cuMemAlloc_v2", 2, C, 1, 1);
	expect_parse("cuMemAlloc_v2@3=OUT_OF_MEMORY", C, "cuMemAlloc_v2", 2, C, 3, 1);
	expect_parse("cuMemAlloc_v2@3x2=INVALID_VALUE", C, "cuMemAlloc_v2", 1, C, 3, 2);
	expect_parse("cuMemAlloc_v2x4=INVALID_VALUE", C, "cuMemAlloc_v2", 1, C, 1, 4);
	expect_parse("cuInit@2x*=NO_DEVICE", C, "cuInit", 100, C, 2, 0);
	expect_parse("cuInitx*=NO_DEVICE", C, "cuInit", 100, C, 1, 0);
	expect_parse("nvmlInit_v2x*=NVML_ERROR_DRIVER_NOT_LOADED", C, "nvmlInit_v2", 9, N, 1, 0);
	expect_parse("cuInit@4294967295=1", C, "cuInit", 1, C, 4294967295u, 1);
	expect_parse("cuInitx4294967295=1", C, "cuInit", 1, C, 1, 4294967295u);
	/* Blanks around the item and around '=' are ignored; names are case-insensitive. */
	expect_parse("  cuInit = out_of_memory \t", C, "cuInit", 2, C, 1, 1);
	expect_parse("cuInit=cuda_error_not_found", C, "cuInit", 500, C, 1, 1);
	/* A name ending in 'x' is not a count unless digits or '*' follow. */
	expect_parse("cuStreamGetCtx=INVALID_CONTEXT", C, "cuStreamGetCtx", 201, C, 1, 1);
	expect_parse("cuStreamGetCtxx3=INVALID_CONTEXT", C, "cuStreamGetCtx", 201, C, 1, 3);
	expect_parse("cuLaunchKernelEx@2=LAUNCH_FAILED", C, "cuLaunchKernelEx", 719, C, 2, 1);
	/* With @N the name is everything before '@'. */
	expect_parse("cuFoox2@4=1", C, "cuFoox2", 1, C, 4, 1);
	expect_parse("*=OUT_OF_MEMORY", C, "*", 2, C, 1, 1);
	expect_parse("*x3=UNKNOWN", C, "*", 999, C, 1, 3);
	expect_parse("*@2x*=UNKNOWN", N, "*", 999, N, 2, 0);
}

static void test_fault_parse_domains(void **state)
{
	const enum sim_fault_domain C = SIM_FAULT_CUDA, N = SIM_FAULT_NVML;

	(void)state;
	/* Short names resolve in the name's API: nvml* NVML, cu* CUDA, whatever the default. */
	expect_parse("nvmlDeviceGetCount_v2=UNINITIALIZED", C, "nvmlDeviceGetCount_v2", 1, N, 1, 1);
	expect_parse("nvmlDeviceGetCount_v2=UNINITIALIZED", N, "nvmlDeviceGetCount_v2", 1, N, 1, 1);
	expect_parse("cuInit=NOT_INITIALIZED", N, "cuInit", 3, C, 1, 1);
	expect_parse("nvmlShutdown=MEMORY", C, "nvmlShutdown", 20, N, 1, 1);
	expect_parse("nvmlShutdown=NVML_ERROR_GPU_IS_LOST", C, "nvmlShutdown", 15, N, 1, 1);
	/* "*" takes the caller's domain for short names and numbers... */
	expect_parse("*=MEMORY", N, "*", 20, N, 1, 1);
	expect_parse("*=7", N, "*", 7, N, 1, 1);
	expect_parse("*=7", C, "*", 7, C, 1, 1);
	/* ...and an explicit prefix wins over it. */
	expect_parse("*=NVML_ERROR_TIMEOUT", C, "*", 10, N, 1, 1);
	expect_parse("*=CUDA_ERROR_ILLEGAL_ADDRESS", N, "*", 700, C, 1, 1);
	/* Numbers follow the name's API; any positive value is accepted. */
	expect_parse("nvmlInit_v2=999", C, "nvmlInit_v2", 999, N, 1, 1);
	expect_parse("cuInit=12345", N, "cuInit", 12345, C, 1, 1);
	expect_parse("cuInit=2147483647", C, "cuInit", 2147483647, C, 1, 1);
}

static void test_fault_parse_errors(void **state)
{
	const enum sim_fault_domain C = SIM_FAULT_CUDA, N = SIM_FAULT_NVML;
	char longname[100], longitem[400];

	(void)state;
	expect_bad("cuInit", C, "\"cuInit\"", "=ERROR");
	expect_bad("", C, "\"\"", "=ERROR");
	expect_bad("=OUT_OF_MEMORY", C, "\"=OUT_OF_MEMORY\"", "NAME is empty");
	expect_bad("@2=1", C, "\"@2=1\"", "NAME is empty");
	expect_bad("cuInit=", C, "\"cuInit=\"", "ERROR is empty");
	expect_bad("cuInit=NOPE", C, "\"cuInit=NOPE\"", "not a CUDA driver error name");
	expect_bad("cuInit=MEMORY", C, "cuInit=MEMORY", "not a CUDA driver error name");
	expect_bad("nvmlInit_v2=OUT_OF_MEMORY", C, "nvmlInit_v2=OUT_OF_MEMORY",
		   "not an NVML error name");
	expect_bad("*=OUT_OF_MEMORY", N, "*=OUT_OF_MEMORY", "not an NVML error name");
	expect_bad("cuInit=CUDA_SUCCESS", C, "cuInit=CUDA_SUCCESS", "success");
	expect_bad("nvmlInit=NVML_SUCCESS", C, "nvmlInit=NVML_SUCCESS", "success");
	expect_bad("cuInit=0", C, "cuInit=0", "success");
	expect_bad("cuInit=-1", C, "cuInit=-1", "ERROR \"-1\"");
	expect_bad("cuInit=2147483648", C, "cuInit=2147483648", "not a valid number");
	expect_bad("cuInit=12abc", C, "cuInit=12abc", "not a valid number");
	expect_bad("cuInit@0=1", C, "cuInit@0=1", "@N");
	expect_bad("cuInit@=1", C, "cuInit@=1", "@N");
	expect_bad("cuInit@-1=1", C, "cuInit@-1=1", "@N");
	expect_bad("cuInit@4294967296=1", C, "cuInit@4294967296=1", "@N");
	expect_bad("cuInit@2y=1", C, "cuInit@2y=1", "not a count");
	expect_bad("cuInit@2x0=1", C, "cuInit@2x0=1", "not a count");
	expect_bad("cuInit@2x=1", C, "cuInit@2x=1", "not a count");
	expect_bad("cuInit@2x4294967296=1", C, "cuInit@2x4294967296=1", "not a count");
	expect_bad("cuInitx0=1", C, "cuInitx0=1", "not a count");
	expect_bad("cuInitx4294967296=1", C, "cuInitx4294967296=1", "not a count");
	expect_bad("cu-Init=1", C, "cu-Init=1", "NAME \"cu-Init\"");
	expect_bad("cu Init=1", C, "cu Init=1", "NAME \"cu Init\"");
	expect_bad("**=1", C, "**=1", "NAME");
	expect_bad("9cuInit=1", C, "9cuInit=1", "NAME");
	/* A call of one API never fails with the other's error. */
	expect_bad("cuInit=NVML_ERROR_MEMORY", C, "cuInit=NVML_ERROR_MEMORY",
		   "cuInit is a CUDA driver call but NVML_ERROR_MEMORY is an NVML error");
	expect_bad("nvmlInit_v2=CUDA_ERROR_UNKNOWN", N, "nvmlInit_v2=CUDA_ERROR_UNKNOWN",
		   "is an NVML call");

	memset(longname, 'a', sizeof(longname));
	memcpy(longname + SIM_FAULT_NAME_LEN, "=1", 3);
	expect_bad(longname, C, longname, "longer than 63");
	longname[SIM_FAULT_NAME_LEN - 1] = '=';
	longname[SIM_FAULT_NAME_LEN] = '1';
	longname[SIM_FAULT_NAME_LEN + 1] = '\0';
	expect_parse(longname, C, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		     1, C, 1, 1);
	memset(longitem, 'b', sizeof(longitem) - 1);
	longitem[sizeof(longitem) - 1] = '\0';
	expect_bad(longitem, C, "...", "longer than 255");
}

static void test_fault_error_names(void **state)
{
	(void)state;
	assert_string_equal(sim_fault_error_name(SIM_FAULT_CUDA, 2), "CUDA_ERROR_OUT_OF_MEMORY");
	assert_string_equal(sim_fault_error_name(SIM_FAULT_CUDA, 0), "CUDA_SUCCESS");
	assert_string_equal(sim_fault_error_name(SIM_FAULT_CUDA, 999), "CUDA_ERROR_UNKNOWN");
	assert_string_equal(sim_fault_error_name(SIM_FAULT_CUDA, 101), "CUDA_ERROR_INVALID_DEVICE");
	assert_null(sim_fault_error_name(SIM_FAULT_CUDA, 123456));
	assert_null(sim_fault_error_name(SIM_FAULT_CUDA, -1));
	assert_string_equal(sim_fault_error_name(SIM_FAULT_NVML, 0), "NVML_SUCCESS");
	assert_string_equal(sim_fault_error_name(SIM_FAULT_NVML, 9),
			    "NVML_ERROR_DRIVER_NOT_LOADED");
	assert_string_equal(sim_fault_error_name(SIM_FAULT_NVML, 20), "NVML_ERROR_MEMORY");
	assert_string_equal(sim_fault_error_name(SIM_FAULT_NVML, 29), "NVML_ERROR_INVALID_STATE");
	assert_string_equal(sim_fault_error_name(SIM_FAULT_NVML, 999), "NVML_ERROR_UNKNOWN");
	assert_null(sim_fault_error_name(SIM_FAULT_NVML, 30));
	assert_null(sim_fault_error_name(SIM_FAULT_NVML, 2 + 1000));
	/* Every NVML value 1..29 has a name, and it parses back to that value. */
	for (int v = 1; v <= 29; v++) {
		const char *name = sim_fault_error_name(SIM_FAULT_NVML, v);
		char item[128];

		assert_non_null(name);
		snprintf(item, sizeof(item), "nvmlInit_v2=%s", name);
		assert_int_equal(parse_ok(item, SIM_FAULT_NVML).error, v);
		snprintf(item, sizeof(item), "nvmlInit_v2=%s", name + strlen("NVML_ERROR_"));
		assert_int_equal(parse_ok(item, SIM_FAULT_CUDA).error, v);
	}
}

/* ---- the instance table ---- */

static int group_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cusim-test-fault-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	setenv("CUSIM_SHM_DIR", tmpdir, 1);
	setenv("CUSIM_INSTANCE", "fault", 1);
	setenv("CUSIM_GPUS", "T4", 1);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	sim_shared_unlink();
	rmdir(tmpdir);
	return 0;
}

static int table_setup(void **state)
{
	char err[512];

	(void)state;
	if (sim_shared_open(&sh, err, sizeof(err)) < 0) {
		print_error("sim_shared_open: %s\n", err);
		return -1;
	}
	sim_fault_bind(sh);
	return 0;
}

static int table_teardown(void **state)
{
	(void)state;
	sim_fault_clear(sh);
	sim_fault_bind(NULL);
	sim_shared_close(sh);
	sh = NULL;
	return 0;
}

/* Arms one spec item in the instance table and returns its entry. */
static struct sim_fault *arm(const char *item, int32_t pid)
{
	struct sim_fault f = parse_ok(item, SIM_FAULT_CUDA);

	f.pid = pid;
	assert_int_equal(sim_fault_arm(sh, &f), 0);
	for (int i = SIM_MAX_FAULTS - 1; i >= 0; i--)
		if (atomic_load(&sh->faults[i].active) == 2 &&
		    strcmp(sh->faults[i].name, f.name) == 0)
			return &sh->faults[i];
	fail_msg("armed fault %s not found", item);
	return NULL;
}

static void test_fault_nth_count(void **state)
{
	static const int want[] = {0, 0, 2, 2, 0, 0, 0};
	struct sim_fault *f;

	(void)state;
	f = arm("cuMemAlloc_v2@3x2=OUT_OF_MEMORY", 0);
	assert_int_equal(atomic_load(&sh->nfaults_armed), 1);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_int_equal(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA), want[i]);
		assert_int_equal(atomic_load(&f->calls), i + 1);
	}
	assert_int_equal(atomic_load(&f->fired), 2);
	/* Other entry points neither count nor fail. */
	assert_int_equal(sim_fault("cuMemFree_v2", SIM_FAULT_CUDA), 0);
	assert_int_equal(sim_fault("cuMemAlloc", SIM_FAULT_CUDA), 0);
	assert_int_equal(sim_fault("cuMemAlloc_v2_", SIM_FAULT_CUDA), 0);
	assert_int_equal(atomic_load(&f->calls), 7);
}

static void test_fault_default_first_call_once(void **state)
{
	struct sim_fault *f;

	(void)state;
	f = arm("cuCtxCreate_v4=INVALID_DEVICE", 0);
	assert_int_equal(f->nth, 1);
	assert_int_equal(f->count, 1);
	assert_int_equal(sim_fault("cuCtxCreate_v4", SIM_FAULT_CUDA), 101);
	assert_int_equal(sim_fault("cuCtxCreate_v4", SIM_FAULT_CUDA), 0);
	assert_int_equal(sim_fault("cuCtxCreate_v4", SIM_FAULT_CUDA), 0);
	assert_int_equal(atomic_load(&f->fired), 1);
}

static void test_fault_forever(void **state)
{
	struct sim_fault *f;

	(void)state;
	f = arm("cuStreamSynchronize@2x*=LAUNCH_FAILED", 0);
	assert_int_equal(f->count, 0);
	assert_int_equal(sim_fault("cuStreamSynchronize", SIM_FAULT_CUDA), 0);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(sim_fault("cuStreamSynchronize", SIM_FAULT_CUDA), 719);
	assert_int_equal(atomic_load(&f->calls), 1001);
	assert_int_equal(atomic_load(&f->fired), 1000);
	/* The call counter saturates instead of wrapping back below @N. */
	atomic_store(&f->calls, UINT32_MAX - 1);
	assert_int_equal(sim_fault("cuStreamSynchronize", SIM_FAULT_CUDA), 719);
	assert_int_equal(atomic_load(&f->calls), UINT32_MAX);
	assert_int_equal(sim_fault("cuStreamSynchronize", SIM_FAULT_CUDA), 719);
	assert_int_equal(atomic_load(&f->calls), UINT32_MAX);
}

static void test_fault_nth_zero_means_first(void **state)
{
	struct sim_fault f = parse_ok("cuInit=1", SIM_FAULT_CUDA);

	(void)state;
	f.nth = 0;
	assert_int_equal(sim_fault_arm(sh, &f), 0);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 1);
}

static void test_fault_wildcard_and_domains(void **state)
{
	struct sim_fault *fc, *fn;

	(void)state;
	fc = arm("*@2x2=UNKNOWN", 0);
	fn = arm("nvmlDeviceGetCount_v2=NVML_ERROR_GPU_IS_LOST", 0);
	/* NVML calls never count for the CUDA "*" ... */
	assert_int_equal(sim_fault("nvmlInit_v2", SIM_FAULT_NVML), 0);
	assert_int_equal(atomic_load(&fc->calls), 0);
	/* ... CUDA calls of any name do. */
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 0);
	assert_int_equal(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA), 999);
	assert_int_equal(sim_fault("cuCtxSynchronize", SIM_FAULT_CUDA), 999);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 0);
	assert_int_equal(atomic_load(&fc->calls), 4);
	assert_int_equal(atomic_load(&fn->calls), 0);
	/*
	 * The NVML entry fires for its NVML call, and only for that domain: the
	 * same name called as a driver call is the CUDA "*"'s 5th call instead.
	 */
	assert_int_equal(sim_fault("nvmlDeviceGetCount_v2", SIM_FAULT_CUDA), 0);
	assert_int_equal(atomic_load(&fn->calls), 0);
	assert_int_equal(atomic_load(&fc->calls), 5);
	assert_int_equal(sim_fault("nvmlDeviceGetCount_v2", SIM_FAULT_NVML), 15);
	assert_int_equal(atomic_load(&fn->calls), 1);
	assert_int_equal(atomic_load(&fc->calls), 5);
}

static void test_fault_nvml_wildcard(void **state)
{
	struct sim_fault f = parse_ok("*x*=NVML_ERROR_UNINITIALIZED", SIM_FAULT_CUDA);

	(void)state;
	assert_int_equal(f.domain, SIM_FAULT_NVML);
	assert_int_equal(sim_fault_arm(sh, &f), 0);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 0);
	assert_int_equal(sim_fault("nvmlInit_v2", SIM_FAULT_NVML), 1);
	assert_int_equal(sim_fault("nvmlShutdown", SIM_FAULT_NVML), 1);
}

static void test_fault_every_match_counts(void **state)
{
	struct sim_fault *a, *b;

	(void)state;
	a = arm("cuInit@2=NO_DEVICE", 0);
	b = arm("*@1x3=UNKNOWN", 0);
	/* Both count every cuInit; the first armed that fires decides the result. */
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 999);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 100);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 999);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 0);
	assert_int_equal(atomic_load(&a->calls), 4);
	assert_int_equal(atomic_load(&b->calls), 4);
	assert_int_equal(atomic_load(&a->fired), 1);
	/* b fired on call 2 as well, even though a's error was returned. */
	assert_int_equal(atomic_load(&b->fired), 3);
}

static void test_fault_pid_filter(void **state)
{
	struct sim_fault *other, *self;

	(void)state;
	/* pid 1 is alive but is not us: its fault neither counts nor fires here. */
	other = arm("cuMemcpy=INVALID_VALUE", 1);
	assert_int_equal(sim_fault("cuMemcpy", SIM_FAULT_CUDA), 0);
	assert_int_equal(atomic_load(&other->calls), 0);
	self = arm("cuMemcpyHtoD_v2=INVALID_VALUE", (int32_t)getpid());
	assert_int_equal(sim_fault("cuMemcpyHtoD_v2", SIM_FAULT_CUDA), 1);
	assert_int_equal(atomic_load(&self->calls), 1);
}

/* The table is shared: calls of every process count, in one sequence. */
static void test_fault_counted_across_processes(void **state)
{
	struct sim_fault *f;
	int status;
	pid_t child;

	(void)state;
	f = arm("cuMemAlloc_v2@2=OUT_OF_MEMORY", 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA) == 0 ? 0 : 1);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(atomic_load(&f->calls), 1);
	/* Our first call is the instance's second. */
	assert_int_equal(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA), 2);
	/* A fault armed for the child's pid stays unmatched by us. */
	f = arm("cuMemFree_v2=INVALID_VALUE", (int32_t)child);
	assert_int_equal(sim_fault("cuMemFree_v2", SIM_FAULT_CUDA), 0);
	assert_int_equal(atomic_load(&f->calls), 0);
}

static void test_fault_table_full(void **state)
{
	struct sim_fault f = parse_ok("cuInit@5=1", SIM_FAULT_CUDA);

	(void)state;
	for (int i = 0; i < SIM_MAX_FAULTS; i++) {
		snprintf(f.name, sizeof(f.name), "cuFake%d", i);
		assert_int_equal(sim_fault_arm(sh, &f), 0);
	}
	assert_int_equal(atomic_load(&sh->nfaults_armed), SIM_MAX_FAULTS);
	assert_int_equal(sim_fault_arm(sh, &f), -ENOSPC);
	assert_int_equal(atomic_load(&sh->nfaults_armed), SIM_MAX_FAULTS);
	/* Clearing frees every entry. */
	sim_fault_clear(sh);
	assert_int_equal(atomic_load(&sh->nfaults_armed), 0);
	for (int i = 0; i < SIM_MAX_FAULTS; i++)
		assert_int_equal(atomic_load(&sh->faults[i].active), 0);
	assert_int_equal(sim_fault_arm(sh, &f), 0);
	assert_int_equal(atomic_load(&sh->nfaults_armed), 1);
}

static void test_fault_clear(void **state)
{
	struct sim_fault *f;

	(void)state;
	f = arm("cuInitx*=NOT_PERMITTED", 0);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 800);
	sim_fault_clear(sh);
	assert_int_equal(atomic_load(&sh->nfaults_armed), 0);
	assert_int_equal(atomic_load(&f->active), 0);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 0);
	/* A cleared entry is not counted any more (the fast path skips it). */
	assert_int_equal(atomic_load(&f->calls), 1);
	assert_int_equal(sim_fault_hit("cuInit", SIM_FAULT_CUDA), 0);
	assert_int_equal(atomic_load(&f->calls), 1);
	/* Clearing an empty table is harmless. */
	sim_fault_clear(sh);
	assert_int_equal(atomic_load(&sh->nfaults_armed), 0);
	/* A newly armed fault starts counting from zero. */
	f = arm("cuInit@2=NOT_PERMITTED", 0);
	assert_int_equal(atomic_load(&f->calls), 0);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 0);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 800);
}

static void test_fault_unbound(void **state)
{
	(void)state;
	arm("cuInit=1", 0);
	/* Not bound: the process does not see the instance table. */
	sim_fault_bind(NULL);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 0);
	sim_fault_bind(sh);
	assert_int_equal(sim_fault("cuInit", SIM_FAULT_CUDA), 1);
}

/* ---- CUSIM_FAULTS (in children: the list is read once per process) ---- */

/* In a child: exits with the line number of the first failed check. */
static void child_check(bool ok, int line)
{
	if (!ok)
		_exit(line % 250 + 1);
}

/*
 * Runs fn in a child whose CUSIM_FAULTS is spec, with stderr captured into
 * errbuf; asserts the child exited 0.
 */
static void run_child(const char *spec, void (*fn)(void), char *errbuf, size_t errlen)
{
	char path[128];
	int status, fd;
	pid_t child;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stderr.%d", tmpdir, (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		dup2(fd, 2);
		setenv("CUSIM_FAULTS", spec, 1);
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	n = pread(fd, errbuf, errlen - 1, 0);
	close(fd);
	unlink(path);
	errbuf[n > 0 ? n : 0] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		print_error("child for \"%s\" failed near line %d; stderr: %s\n", spec,
			    WIFEXITED(status) ? WEXITSTATUS(status) - 1 : -1, errbuf);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void env_semantics(void)
{
	child_check(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA) == 0, __LINE__);
	/* Nothing is read before sim_fault_load_env. */
	sim_fault_load_env(SIM_FAULT_CUDA);
	child_check(atomic_load(&sim_fault_local_armed) == 1, __LINE__);
	child_check(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA) == 0, __LINE__);
	child_check(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA) == 2, __LINE__);
	child_check(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA) == 2, __LINE__);
	child_check(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA) == 0, __LINE__);
	for (int i = 0; i < 10; i++)
		child_check(sim_fault("nvmlInit_v2", SIM_FAULT_NVML) == 9, __LINE__);
	/* Not an NVML domain call: never fires, whatever the name. */
	child_check(sim_fault("nvmlInit_v2", SIM_FAULT_CUDA) == 0, __LINE__);
	child_check(sim_fault("cuInit", SIM_FAULT_CUDA) == 0, __LINE__);
	/* Loading again (the other library, or a second cuInit) changes nothing. */
	sim_fault_load_env(SIM_FAULT_NVML);
	child_check(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA) == 0, __LINE__);

	/* A forked child is a new process: it counts from 1. */
	pid_t gc = fork();
	if (gc == 0) {
		child_check(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA) == 0, __LINE__);
		child_check(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA) == 2, __LINE__);
		_exit(0);
	}
	int status;
	child_check(waitpid(gc, &status, 0) == gc && WIFEXITED(status), __LINE__);
	if (WEXITSTATUS(status))
		_exit(WEXITSTATUS(status));
}

static void test_fault_env_semantics(void **state)
{
	char errbuf[4096];

	(void)state;
	run_child("cuMemAlloc_v2@2x2=OUT_OF_MEMORY;nvmlInit_v2x*=NVML_ERROR_DRIVER_NOT_LOADED; ;",
		  env_semantics, errbuf, sizeof(errbuf));
	/* A good spec is loaded silently. */
	assert_string_equal(errbuf, "");
}

static void env_bad_item(void)
{
	sim_fault_load_env(SIM_FAULT_CUDA);
	/* The good items around the bad one are armed. */
	child_check(sim_fault("cuInit", SIM_FAULT_CUDA) == 100, __LINE__);
	child_check(sim_fault("cuCtxCreate_v4", SIM_FAULT_CUDA) == 0, __LINE__);
	child_check(sim_fault("cuMemFree_v2", SIM_FAULT_CUDA) == 1, __LINE__);
}

static void test_fault_env_bad_item(void **state)
{
	char errbuf[4096];
	char *nl;

	(void)state;
	run_child("cuInit=NO_DEVICE;cuCtxCreate_v4@0=OUT_OF_MEMORY;cuMemFree_v2=1", env_bad_item,
		  errbuf, sizeof(errbuf));
	/* One line: the variable, the item, the accepted form, and that it is ignored. */
	nl = strchr(errbuf, '\n');
	assert_non_null(nl);
	assert_string_equal(nl + 1, "");
	assert_non_null(strstr(errbuf, "CUSIM_FAULTS"));
	assert_non_null(strstr(errbuf, "\"cuCtxCreate_v4@0=OUT_OF_MEMORY\""));
	assert_non_null(strstr(errbuf, FORM));
	assert_non_null(strstr(errbuf, "ignored"));
}

static void env_nvml_library(void)
{
	/* As libnvidia-ml loads it: short names of nvml* entries still resolve in NVML. */
	sim_fault_load_env(SIM_FAULT_NVML);
	child_check(sim_fault("nvmlInit_v2", SIM_FAULT_NVML) == 9, __LINE__);
	child_check(sim_fault("nvmlShutdown", SIM_FAULT_NVML) == 999, __LINE__);
	child_check(sim_fault("cuInit", SIM_FAULT_CUDA) == 100, __LINE__);
	child_check(sim_fault("cuInit", SIM_FAULT_CUDA) == 0, __LINE__);
}

static void test_fault_env_both_libraries(void **state)
{
	char errbuf[4096];

	(void)state;
	/* Every item parses in either library's domain: no spurious complaints. */
	run_child("nvmlInit_v2=DRIVER_NOT_LOADED;*@2=UNKNOWN;cuInit=NO_DEVICE", env_nvml_library,
		  errbuf, sizeof(errbuf));
	assert_string_equal(errbuf, "");
}

static void env_too_many(void)
{
	sim_fault_load_env(SIM_FAULT_CUDA);
	child_check(sim_fault("cuA0", SIM_FAULT_CUDA) == 1, __LINE__);
	child_check(sim_fault("cuA31", SIM_FAULT_CUDA) == 1, __LINE__);
	child_check(sim_fault("cuA32", SIM_FAULT_CUDA) == 0, __LINE__);
}

static void test_fault_env_too_many(void **state)
{
	char spec[2048] = "", errbuf[4096];

	(void)state;
	for (int i = 0; i <= SIM_MAX_FAULTS; i++) {
		char item[32];
		snprintf(item, sizeof(item), "cuA%d=1;", i);
		strcat(spec, item);
	}
	run_child(spec, env_too_many, errbuf, sizeof(errbuf));
	assert_non_null(strstr(errbuf, "CUSIM_FAULTS"));
	assert_non_null(strstr(errbuf, "more than 32"));
	assert_non_null(strstr(errbuf, "cuA32=1"));
}

static void env_unset(void)
{
	unsetenv("CUSIM_FAULTS");
	sim_fault_load_env(SIM_FAULT_CUDA);
	child_check(atomic_load(&sim_fault_local_armed) == 0, __LINE__);
	child_check(sim_fault("cuInit", SIM_FAULT_CUDA) == 0, __LINE__);
}

static void test_fault_env_unset(void **state)
{
	char errbuf[4096];

	(void)state;
	run_child("", env_unset, errbuf, sizeof(errbuf));
	assert_string_equal(errbuf, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fault_parse_forms),
		cmocka_unit_test(test_fault_parse_domains),
		cmocka_unit_test(test_fault_parse_errors),
		cmocka_unit_test(test_fault_error_names),
		cmocka_unit_test_setup_teardown(test_fault_nth_count, table_setup, table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_default_first_call_once, table_setup,
						table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_forever, table_setup, table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_nth_zero_means_first, table_setup,
						table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_wildcard_and_domains, table_setup,
						table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_nvml_wildcard, table_setup,
						table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_every_match_counts, table_setup,
						table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_pid_filter, table_setup, table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_counted_across_processes, table_setup,
						table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_table_full, table_setup, table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_clear, table_setup, table_teardown),
		cmocka_unit_test_setup_teardown(test_fault_unbound, table_setup, table_teardown),
		cmocka_unit_test(test_fault_env_semantics),
		cmocka_unit_test(test_fault_env_bad_item),
		cmocka_unit_test(test_fault_env_both_libraries),
		cmocka_unit_test(test_fault_env_too_many),
		cmocka_unit_test(test_fault_env_unset),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
