/*
 * The ways programs reach the driver: linked with -lcuda (cs-alloc),
 * dlopen + dlsym of versioned names (cs-dlsym-direct, as cuBLASLt does), and
 * dlopen of the same library from a program that is already linked with it.
 * (The runtime's cuGetProcAddress path is test-procaddr; the exported symbol
 * set is checked by scripts/check-exports.sh.)
 */
#include "cst.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char clients_dir[1024];

static const char *client(const char *name)
{
	static __thread char path[1280];

	snprintf(path, sizeof(path), "%s/%s", clients_dir, name);
	return path;
}

/*
 * Runs argv with stdout captured into out (NUL-terminated, truncated to
 * len - 1); returns the exit status as cst_run does.
 */
static int run_capture(char *const argv[], char *out, size_t len)
{
	char path[] = "/tmp/cs-loading-XXXXXX";
	int fd = mkstemp(path), status;
	ssize_t n;
	pid_t pid;

	assert_true(fd >= 0);
	unlink(path);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fd, STDOUT_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	n = pread(fd, out, len - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

static void test_loading_dlsym_direct(void **state)
{
	char *argv[] = {(char *)client("cs-dlsym-direct"), NULL};
	char *argv2[] = {(char *)client("cs-dlsym-direct"), "--device", "1", "--bytes", "3MiB",
			 NULL};
	static char out[8192];

	(void)state;
	assert_int_equal(run_capture(argv, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "HtoD -> DtoD -> DtoH verified"));
	assert_int_equal(run_capture(argv2, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "device 1: NVIDIA A100"));
	/* A device that does not exist is a failed call, named. */
	argv2[2] = "7";
	assert_int_equal(cst_run(argv2, NULL), 1);
}

static void test_loading_linked_alloc(void **state)
{
	static const char *const kinds[] = {"device", "pitch", "managed", "host"};
	char *argv[] = {(char *)client("cs-alloc"), "--bytes", "5MiB", "--count", "3", "--kind",
			NULL, NULL, NULL};
	static char out[8192];

	(void)state;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		argv[6] = (char *)kinds[i];
		assert_int_equal(run_capture(argv, out, sizeof(out)), 0);
		assert_non_null(strstr(out, "\nready\n"));
		assert_non_null(strstr(out, "3 buffer(s) written with cuMemcpyHtoD and read back"));
		assert_non_null(strstr(out, "freed 3 buffer(s)"));
	}
	/* Sampled and no pattern checks (for holds larger than the host's memory). */
	argv[6] = "device";
	argv[2] = "300MiB";
	argv[7] = "--verify=sample";
	assert_int_equal(run_capture(argv, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "verify (sample): 3 buffer(s)"));
	argv[7] = "--verify=none";
	assert_int_equal(run_capture(argv, out, sizeof(out)), 0);
	assert_null(strstr(out, "verify ("));
	assert_non_null(strstr(out, "\nready\n"));
}

static void test_loading_alloc_exit_codes(void **state)
{
	char *oom[] = {(char *)client("cs-alloc"), "--bytes", "3GiB", "--expect-oom", NULL};
	char *oom_err[] = {(char *)client("cs-alloc"), "--bytes", "3GiB", NULL};
	char *no_oom[] = {(char *)client("cs-alloc"), "--bytes", "1MiB", "--expect-oom", NULL};
	char *usage[] = {(char *)client("cs-alloc"), "--bytes", "lots", NULL};
	char *usage2[] = {(char *)client("cs-alloc"), "--kind", "texture", NULL};
	char *usage3[] = {(char *)client("cs-alloc"), "--verify", "some", NULL};
	char *hold[] = {(char *)client("cs-alloc"), "--hold", "0.05", NULL};

	(void)state;
	/* Device 0 has 2 GiB. */
	assert_int_equal(cst_run(oom, NULL), 0);
	assert_int_equal(cst_run(oom_err, NULL), 1);
	assert_int_equal(cst_run(no_oom, NULL), 1);
	assert_int_equal(cst_run(usage, NULL), 2);
	assert_int_equal(cst_run(usage2, NULL), 2);
	assert_int_equal(cst_run(usage3, NULL), 2);
	assert_int_equal(cst_run(hold, NULL), 0);
}

/*
 * A program linked with libcuda that also dlopen()s "libcuda.so.1" (as the
 * runtime inside it would) gets the same library, not a second copy with a
 * second state.
 */
static void test_loading_dlopen_same_library(void **state)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CUresult (*count)(int *);
	int n = 0;

	(void)state;
	assert_non_null(h);
	assert_ptr_equal(dlsym(h, "cuInit"), (void *)cuInit);
	assert_ptr_equal(dlsym(h, "cuMemAlloc_v2"), (void *)cuMemAlloc);
	count = (CUresult(*)(int *))dlsym(h, "cuDeviceGetCount");
	assert_non_null(count);
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, count(&n));
	assert_int_equal(n, 2);
	/* Internal helpers are not exported. */
	assert_null(dlsym(h, "sim_enter"));
	assert_null(dlsym(h, "sim"));
	assert_null(dlsym(h, "sim_shared_open"));
	assert_null(dlsym(h, "cs_size_parse"));
	dlclose(h);
}

/* The number at key of object o (a JSON number), failing the test when absent. */
static double json_number(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v))
		print_error("JSON: no number \"%s\"\n", key);
	assert_true(cJSON_IsNumber(v));
	return v->valuedouble;
}

/*
 * The monitoring view (NVML through cs-nvml-query) agrees with the driver
 * view of this process: device memory, and this process listed with its
 * context and allocation.
 */
static void test_loading_nvml_query(void **state)
{
	char *argv[] = {(char *)client("cs-nvml-query"), "--json", NULL};
	char *table[] = {(char *)client("cs-nvml-query"), NULL};
	static char out[65536];
	const cJSON *devs, *d0, *mem, *procs, *p;
	cJSON *root;
	CUdeviceptr d;
	size_t f, t;
	bool found = false;

	(void)state;
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 100u << 20));
	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&f, &t));
	assert_int_equal(run_capture(argv, out, sizeof(out)), 0);
	root = cJSON_Parse(out);
	assert_non_null(root);
	devs = cJSON_GetObjectItemCaseSensitive(root, "devices");
	assert_int_equal(cJSON_GetArraySize(devs), 2);
	d0 = cJSON_GetArrayItem(devs, 0);
	mem = cJSON_GetObjectItemCaseSensitive(d0, "memory");
	assert_true(json_number(mem, "total") == (double)t);
	assert_true(json_number(mem, "free") == (double)f);
	assert_true(json_number(mem, "used") == (double)(t - f));
	assert_true(json_number(root, "cuda_driver_version") == 13000);
	procs = cJSON_GetObjectItemCaseSensitive(d0, "processes");
	cJSON_ArrayForEach(p, procs) {
		if (json_number(p, "pid") != (double)getpid())
			continue;
		found = true;
		/* Its context (64 MiB here) and its allocation. */
		assert_true(json_number(p, "used_memory") == (double)((64u << 20) + (100u << 20)));
	}
	assert_true(found);
	cJSON_Delete(root);

	assert_int_equal(run_capture(table, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "NVIDIA H100"));
	assert_non_null(strstr(out, "NVIDIA A100"));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(d));
}

static int group_setup(void **state)
{
	const char *dir = getenv("CS_CLIENTS_DIR");

	(void)state;
	if (!dir) {
		fprintf(stderr, "CS_CLIENTS_DIR is not set (run through meson test)\n");
		return -1;
	}
	snprintf(clients_dir, sizeof(clients_dir), "%s", dir);
	cst_fresh_instance("loading", "H100:2GiB,A100:1GiB", "64MiB");
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loading_dlsym_direct),
		cmocka_unit_test(test_loading_linked_alloc),
		cmocka_unit_test(test_loading_alloc_exit_codes),
		cmocka_unit_test(test_loading_dlopen_same_library),
		cmocka_unit_test(test_loading_nvml_query),
	};

	(void)argc;
	cst_set_argv0(argv[0]);
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
