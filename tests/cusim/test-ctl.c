/*
 * Tests of cusim-ctl run as a real process (path in $CUSIM_CTL): exit codes,
 * messages, human and JSON output, and the effect on the instance, which the
 * test maps itself (sim-instance) to check and to play the part of CUDA processes.
 */
#include <cjson/cJSON.h>
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

static const char *ctl_path;
static char tmpdir[64];
static char instance[32];
static int instance_seq;

/* What the last cusim-ctl run printed. */
static char out[1 << 16], err[1 << 14];

static void read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
	unlink(path);
}

/*
 * Runs cusim-ctl with the NULL-terminated argument list; returns its exit
 * code (128 + signal if it died) with stdout in `out` and stderr in `err`.
 */
static int ctl_argv(const char *const *args)
{
	char opath[128], epath[128];
	const char *argv[32];
	int status, n = 0;
	pid_t pid;

	argv[n++] = ctl_path;
	for (; *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	snprintf(opath, sizeof(opath), "%s/stdout", tmpdir);
	snprintf(epath, sizeof(epath), "%s/stderr", tmpdir);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int o = open(opath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		execv(ctl_path, (char *const *)argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	read_file(opath, out, sizeof(out));
	read_file(epath, err, sizeof(err));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define ctl(...) ctl_argv((const char *const[]){__VA_ARGS__, NULL})

/* Runs cusim-ctl and asserts its exit code, showing its output on mismatch. */
#define expect_ctl(code, ...) expect_code_((code), ctl(__VA_ARGS__), __LINE__)

static void expect_code_(int want, int got, int line)
{
	if (want != got)
		print_error("line %d: cusim-ctl exited %d, expected %d\nstdout: %s\nstderr: %s\n",
			    line, got, want, out, err);
	assert_int_equal(got, want);
}

static void expect_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		print_error("\"%s\" not found in:\n%s\n", needle, haystack);
	assert_non_null(strstr(haystack, needle));
}

static void instance_path(char *buf, size_t len)
{
	snprintf(buf, len, "%s/cusim-%s", tmpdir, instance);
}

static struct sim_shared *map_instance(void)
{
	struct sim_shared *sh;
	char e[512];

	if (sim_shared_open_existing(&sh, e, sizeof(e)) < 0)
		fail_msg("cannot open the instance: %s", e);
	return sh;
}

static cJSON *parse_json(void)
{
	cJSON *j = cJSON_Parse(out);

	if (!j)
		fail_msg("cusim-ctl printed invalid JSON:\n%s", out);
	return j;
}

static cJSON *field(const cJSON *o, const char *name)
{
	cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!f)
		fail_msg("JSON field \"%s\" missing", name);
	return f;
}

static uint64_t num(const cJSON *o, const char *name)
{
	cJSON *f = field(o, name);

	assert_true(cJSON_IsNumber(f));
	return (uint64_t)f->valuedouble;
}

static const char *str(const cJSON *o, const char *name)
{
	cJSON *f = field(o, name);

	assert_true(cJSON_IsString(f));
	return f->valuestring;
}

static bool boolean(const cJSON *o, const char *name)
{
	cJSON *f = field(o, name);

	assert_true(cJSON_IsBool(f));
	return cJSON_IsTrue(f);
}

static int group_setup(void **state)
{
	(void)state;
	ctl_path = getenv("CUSIM_CTL");
	if (!ctl_path || access(ctl_path, X_OK) != 0) {
		print_error("CUSIM_CTL must name the cusim-ctl binary\n");
		return -1;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cusim-test-ctl-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	setenv("CUSIM_SHM_DIR", tmpdir, 1);
	unsetenv("CUSIM_FAULTS");
	unsetenv("CUSIM_CTX_MEM");
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	rmdir(tmpdir);
	return 0;
}

static int test_setup(void **state)
{
	(void)state;
	snprintf(instance, sizeof(instance), "ctl-%d", ++instance_seq);
	setenv("CUSIM_INSTANCE", instance, 1);
	setenv("CUSIM_GPUS", "H100:80GiB:132,A100:40GiB:108", 1);
	return 0;
}

static int test_teardown(void **state)
{
	(void)state;
	setenv("CUSIM_INSTANCE", instance, 1);
	sim_shared_unlink();
	return 0;
}

static void test_ctl_help(void **state)
{
	static const char *const words[] = {
		"status",	 "--json",	   "create",	   "reset",
		"fault add",	 "--pid",	   "fault list",   "fault clear",
		"device lost",	 "device healthy", "reclaim",	   "--instance",
		"CUSIM_INSTANCE", "CUSIM_SHM_DIR", "NAME[@N][xK]=ERROR", "Exit status",
	};

	(void)state;
	expect_ctl(0, "--help");
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		expect_contains(out, words[i]);
	assert_string_equal(err, "");
	expect_ctl(0, "-h");
	expect_contains(out, "Usage: cusim-ctl");
	expect_ctl(0, "help");
	expect_contains(out, "Usage: cusim-ctl");
	/* --help wins wherever it is, even after a bad argument. */
	expect_ctl(0, "fault", "add", "--help");
	expect_contains(out, "Usage: cusim-ctl");
}

static void test_ctl_missing_instance(void **state)
{
	static const char *const cmds[][4] = {
		{"status"},
		{"status", "--json"},
		{"fault", "list"},
		{"fault", "clear"},
		{"fault", "add", "cuInit=1"},
		{"device", "lost", "0"},
		{"reclaim"},
	};
	char path[256];

	(void)state;
	instance_path(path, sizeof(path));
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		expect_code_(1, ctl_argv(cmds[i]), __LINE__);
		expect_contains(err, path);
		expect_contains(err, "no cusim instance");
		assert_string_equal(out, "");
	}
	/* Inspection never creates the instance. */
	assert_int_equal(access(path, F_OK), -1);
}

static void test_ctl_create(void **state)
{
	struct sim_shared *sh;
	char path[256];

	(void)state;
	instance_path(path, sizeof(path));
	expect_ctl(0, "create");
	expect_contains(out, "created instance at ");
	expect_contains(out, path);
	expect_contains(out, "NVIDIA H100 80GB HBM3");
	expect_contains(out, "NVIDIA A100-SXM4-40GB");
	expect_contains(out, "80.00 GiB");
	expect_contains(out, "40.00 GiB");
	sh = map_instance();
	assert_int_equal(sh->ndevices, 2);
	expect_contains(out, sh->desc[0].uuid);
	expect_contains(out, sh->desc[1].uuid);
	sim_shared_close(sh);
	/* Again: the existing instance is kept, whatever the environment says now. */
	setenv("CUSIM_GPUS", "T4", 1);
	expect_ctl(0, "create");
	expect_contains(out, "existing instance at ");
	expect_contains(out, "NVIDIA A100-SXM4-40GB");
}

static void test_ctl_create_bad_env(void **state)
{
	char path[256];

	(void)state;
	instance_path(path, sizeof(path));
	setenv("CUSIM_GPUS", "H100,Z9", 1);
	expect_ctl(2, "create");
	expect_contains(err, "CUSIM_GPUS");
	expect_contains(err, "\"Z9\"");
	assert_int_equal(access(path, F_OK), -1);
	setenv("CUSIM_GPUS", "T4", 1);
	setenv("CUSIM_CTX_MEM", "lots", 1);
	expect_ctl(2, "create");
	unsetenv("CUSIM_CTX_MEM");
	expect_contains(err, "CUSIM_CTX_MEM=\"lots\"");
	assert_int_equal(access(path, F_OK), -1);
	/* An invalid CUSIM_INSTANCE is bad input too. */
	setenv("CUSIM_INSTANCE", "bad/name", 1);
	expect_ctl(2, "status");
	expect_contains(err, "CUSIM_INSTANCE");
	expect_contains(err, "bad/name");
}

static void test_ctl_status_json(void **state)
{
	struct sim_shared *sh;
	struct sim_proc_slot *slot;
	cJSON *j, *devs, *d, *mem;
	char path[256];

	(void)state;
	instance_path(path, sizeof(path));
	expect_ctl(0, "create");
	sh = map_instance();
	expect_ctl(0, "status", "--json");
	j = parse_json();
	assert_string_equal(str(j, "instance"), instance);
	assert_string_equal(str(j, "path"), path);
	assert_string_equal(str(j, "gpus"), "H100:80GiB:132,A100:40GiB:108");
	assert_int_equal(num(j, "ctx_mem"), 256ull << 20);
	assert_int_equal(num(j, "created_unix"), sh->created_ns / 1000000000ull);
	devs = field(j, "devices");
	assert_int_equal(cJSON_GetArraySize(devs), 2);
	d = cJSON_GetArrayItem(devs, 0);
	assert_int_equal(num(d, "index"), 0);
	assert_string_equal(str(d, "name"), "NVIDIA H100 80GB HBM3");
	assert_string_equal(str(d, "uuid"), sh->desc[0].uuid);
	assert_string_equal(str(d, "model"), "H100");
	assert_int_equal(num(d, "sm_count"), 132);
	assert_string_equal(str(d, "pci_bus_id"), "00000000:18:00.0");
	assert_false(boolean(d, "lost"));
	mem = field(d, "memory");
	assert_int_equal(num(mem, "total"), 80ull << 30);
	assert_int_equal(num(mem, "used"), 0);
	assert_int_equal(num(mem, "free"), 80ull << 30);
	d = cJSON_GetArrayItem(devs, 1);
	assert_string_equal(str(d, "name"), "NVIDIA A100-SXM4-40GB");
	assert_string_equal(str(d, "uuid"), sh->desc[1].uuid);
	assert_string_equal(str(d, "pci_bus_id"), "00000000:2A:00.0");
	assert_int_equal(num(d, "sm_count"), 108);
	assert_int_equal(num(field(d, "memory"), "total"), 40ull << 30);
	assert_int_equal(cJSON_GetArraySize(field(j, "processes")), 0);
	assert_int_equal(cJSON_GetArraySize(field(j, "faults")), 0);
	cJSON_Delete(j);

	/* This test process plays a CUDA process with 3 MiB and a context on device 1. */
	slot = sim_proc_register(sh, getpid(), -1);
	assert_non_null(slot);
	assert_int_equal(sim_dev_charge(sh, slot, 1, 3u << 20), 0);
	atomic_store(&slot->ctx_devices, 1u << 1);
	expect_ctl(0, "status", "--json");
	j = parse_json();
	d = cJSON_GetArrayItem(field(j, "devices"), 1);
	assert_int_equal(num(field(d, "memory"), "used"), 3u << 20);
	assert_int_equal(num(field(d, "memory"), "free"), (40ull << 30) - (3u << 20));
	assert_int_equal(cJSON_GetArraySize(field(j, "processes")), 1);
	cJSON *p = cJSON_GetArrayItem(field(j, "processes"), 0);
	assert_int_equal(num(p, "pid"), getpid());
	assert_true(boolean(p, "alive"));
	assert_int_equal(cJSON_GetArraySize(field(p, "used")), 2);
	assert_int_equal(cJSON_GetArrayItem(field(p, "used"), 0)->valuedouble, 0);
	assert_int_equal(cJSON_GetArrayItem(field(p, "used"), 1)->valuedouble, 3u << 20);
	assert_int_equal(cJSON_GetArraySize(field(p, "ctx_devices")), 1);
	assert_int_equal(cJSON_GetArrayItem(field(p, "ctx_devices"), 0)->valuedouble, 1);
	cJSON_Delete(j);
	sim_proc_release(sh, slot);
	sim_shared_close(sh);
}

static void test_ctl_status_human(void **state)
{
	struct sim_shared *sh;
	struct sim_proc_slot *slot;
	char pid[32], path[256];

	(void)state;
	instance_path(path, sizeof(path));
	expect_ctl(0, "create");
	expect_ctl(0, "status");
	expect_contains(out, path);
	expect_contains(out, "H100:80GiB:132,A100:40GiB:108");
	expect_contains(out, "256.00 MiB");
	expect_contains(out, "NVIDIA H100 80GB HBM3");
	expect_contains(out, "no process");
	expect_contains(out, "no fault armed");
	sh = map_instance();
	slot = sim_proc_register(sh, getpid(), -1);
	assert_int_equal(sim_dev_charge(sh, slot, 0, 3u << 20), 0);
	atomic_store(&slot->ctx_devices, 1);
	expect_ctl(0, "status");
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	expect_contains(out, pid);
	expect_contains(out, "alive");
	expect_contains(out, "0: 3.00 MiB");
	sim_proc_release(sh, slot);
	sim_shared_close(sh);
}

/* A process that dies holding memory shows as dead until `reclaim`. */
static void test_ctl_reclaim(void **state)
{
	struct sim_shared *sh;
	cJSON *j, *p;
	int status;
	pid_t child;

	(void)state;
	expect_ctl(0, "create");
	sh = map_instance();
	expect_ctl(0, "reclaim");
	expect_contains(out, "reclaimed 0 dead processes");
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		struct sim_proc_slot *slot = sim_proc_register(sh, getpid(), -1);
		_exit(slot && sim_dev_charge(sh, slot, 0, 1ull << 30) == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	expect_ctl(0, "status", "--json");
	j = parse_json();
	assert_int_equal(cJSON_GetArraySize(field(j, "processes")), 1);
	p = cJSON_GetArrayItem(field(j, "processes"), 0);
	assert_int_equal(num(p, "pid"), child);
	assert_false(boolean(p, "alive"));
	assert_int_equal(cJSON_GetArrayItem(field(p, "used"), 0)->valuedouble, 1ull << 30);
	assert_int_equal(num(field(cJSON_GetArrayItem(field(j, "devices"), 0), "memory"), "used"),
			 1ull << 30);
	cJSON_Delete(j);
	expect_ctl(0, "status");
	expect_contains(out, "dead");

	expect_ctl(0, "reclaim");
	expect_contains(out, "reclaimed 1 dead process\n");
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
	expect_ctl(0, "status", "--json");
	j = parse_json();
	assert_int_equal(cJSON_GetArraySize(field(j, "processes")), 0);
	assert_int_equal(num(field(cJSON_GetArrayItem(field(j, "devices"), 0), "memory"), "used"),
			 0);
	cJSON_Delete(j);
	sim_shared_close(sh);
}

static void test_ctl_fault_add_list_clear(void **state)
{
	struct sim_shared *sh;
	cJSON *j, *f;

	(void)state;
	expect_ctl(0, "create");
	expect_ctl(0, "fault", "list");
	expect_contains(out, "no fault armed");
	expect_ctl(0, "fault", "add",
		   "cuMemAlloc_v2@3x2=OUT_OF_MEMORY; nvmlInit_v2x*=NVML_ERROR_DRIVER_NOT_LOADED");
	assert_string_equal(out,
			    "armed cuMemAlloc_v2@3x2=CUDA_ERROR_OUT_OF_MEMORY for every process\n"
			    "armed nvmlInit_v2@1x*=NVML_ERROR_DRIVER_NOT_LOADED for every "
			    "process\n");
	expect_ctl(0, "fault", "add", "*=UNKNOWN", "--pid", "4242");
	assert_string_equal(out, "armed *@1x1=CUDA_ERROR_UNKNOWN for pid 4242\n");
	expect_ctl(0, "fault", "add", "--pid=4243", "cuInit=12345");
	expect_contains(out, "for pid 4243");

	/* The table the libraries read holds exactly that. */
	sh = map_instance();
	assert_int_equal(atomic_load(&sh->nfaults_armed), 4);
	assert_string_equal(sh->faults[0].name, "cuMemAlloc_v2");
	assert_int_equal(sh->faults[0].error, 2);
	assert_int_equal(sh->faults[0].nth, 3);
	assert_int_equal(sh->faults[0].count, 2);
	assert_int_equal(sh->faults[0].pid, 0);
	assert_int_equal(sh->faults[1].domain, SIM_FAULT_NVML);
	assert_int_equal(sh->faults[1].count, 0);
	assert_int_equal(sh->faults[2].pid, 4242);
	assert_int_equal(sh->faults[3].pid, 4243);
	assert_int_equal(sh->faults[3].error, 12345);
	/* Make three calls as a process of the instance would. */
	sim_fault_bind(sh);
	assert_int_equal(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA), 0);
	assert_int_equal(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA), 0);
	assert_int_equal(sim_fault("cuMemAlloc_v2", SIM_FAULT_CUDA), 2);
	sim_fault_bind(NULL);

	expect_ctl(0, "fault", "list", "--json");
	j = parse_json();
	assert_true(cJSON_IsArray(j));
	assert_int_equal(cJSON_GetArraySize(j), 4);
	f = cJSON_GetArrayItem(j, 0);
	assert_int_equal(num(f, "slot"), 0);
	assert_string_equal(str(f, "spec"), "cuMemAlloc_v2@3x2=CUDA_ERROR_OUT_OF_MEMORY");
	assert_string_equal(str(f, "name"), "cuMemAlloc_v2");
	assert_string_equal(str(f, "domain"), "cuda");
	assert_string_equal(str(f, "error"), "CUDA_ERROR_OUT_OF_MEMORY");
	assert_int_equal(num(f, "error_value"), 2);
	assert_int_equal(num(f, "pid"), 0);
	assert_int_equal(num(f, "nth"), 3);
	assert_int_equal(num(f, "count"), 2);
	assert_false(boolean(f, "forever"));
	assert_int_equal(num(f, "calls"), 3);
	assert_int_equal(num(f, "fired"), 1);
	f = cJSON_GetArrayItem(j, 1);
	assert_string_equal(str(f, "domain"), "nvml");
	assert_string_equal(str(f, "error"), "NVML_ERROR_DRIVER_NOT_LOADED");
	assert_true(boolean(f, "forever"));
	assert_int_equal(num(f, "calls"), 0);
	f = cJSON_GetArrayItem(j, 2);
	assert_string_equal(str(f, "name"), "*");
	assert_int_equal(num(f, "pid"), 4242);
	/* An error number without a name is shown as the number. */
	f = cJSON_GetArrayItem(j, 3);
	assert_true(cJSON_IsNull(field(f, "error")));
	assert_int_equal(num(f, "error_value"), 12345);
	assert_string_equal(str(f, "spec"), "cuInit@1x1=12345");
	cJSON_Delete(j);

	expect_ctl(0, "fault", "list");
	expect_contains(out, "cuMemAlloc_v2@3x2=CUDA_ERROR_OUT_OF_MEMORY");
	expect_contains(out, "nvmlInit_v2@1x*=NVML_ERROR_DRIVER_NOT_LOADED");
	expect_contains(out, "4242");
	expect_contains(out, "any");
	expect_ctl(0, "status", "--json");
	j = parse_json();
	assert_int_equal(cJSON_GetArraySize(field(j, "faults")), 4);
	cJSON_Delete(j);

	expect_ctl(0, "fault", "clear");
	assert_string_equal(out, "cleared 4 faults\n");
	assert_int_equal(atomic_load(&sh->nfaults_armed), 0);
	expect_ctl(0, "fault", "list", "--json");
	j = parse_json();
	assert_int_equal(cJSON_GetArraySize(j), 0);
	cJSON_Delete(j);
	expect_ctl(0, "fault", "clear");
	assert_string_equal(out, "cleared 0 faults\n");
	sim_shared_close(sh);
}

/* What `fault list` prints can be given back to `fault add`. */
static void test_ctl_fault_spec_round_trip(void **state)
{
	struct sim_shared *sh;
	struct sim_fault first;
	cJSON *j;
	char spec[256];

	(void)state;
	expect_ctl(0, "create");
	expect_ctl(0, "fault", "add", "nvmlDeviceGetMemoryInfo@5x*=GPU_IS_LOST");
	expect_ctl(0, "fault", "list", "--json");
	j = parse_json();
	snprintf(spec, sizeof(spec), "%s", str(cJSON_GetArrayItem(j, 0), "spec"));
	cJSON_Delete(j);
	assert_string_equal(spec, "nvmlDeviceGetMemoryInfo@5x*=NVML_ERROR_GPU_IS_LOST");
	expect_ctl(0, "fault", "add", spec);
	sh = map_instance();
	first = sh->faults[0];
	assert_string_equal(sh->faults[1].name, first.name);
	assert_int_equal(sh->faults[1].error, first.error);
	assert_int_equal(sh->faults[1].domain, first.domain);
	assert_int_equal(sh->faults[1].nth, first.nth);
	assert_int_equal(sh->faults[1].count, first.count);
	sim_shared_close(sh);
}

static void test_ctl_fault_table_full(void **state)
{
	char spec[2048] = "";
	struct sim_shared *sh;

	(void)state;
	expect_ctl(0, "create");
	for (int i = 0; i < SIM_MAX_FAULTS; i++) {
		char item[32];
		snprintf(item, sizeof(item), "cuF%d=1;", i);
		strcat(spec, item);
	}
	expect_ctl(0, "fault", "add", spec);
	expect_ctl(1, "fault", "add", "cuInit=1;cuInit@2=1");
	expect_contains(err, "full");
	expect_contains(err, "fault clear");
	expect_ctl(0, "fault", "clear");
	/* More items than the table holds: refused as a whole, nothing armed. */
	strcat(spec, "cuF32=1");
	expect_ctl(2, "fault", "add", spec);
	expect_contains(err, "more than 32");
	sh = map_instance();
	assert_int_equal(atomic_load(&sh->nfaults_armed), 0);
	sim_shared_close(sh);
}

static void test_ctl_bad_arguments(void **state)
{
	static const struct {
		const char *args[6];
		const char *needle;
	} cases[] = {
		{{NULL}, "missing command"},
		{{"frobnicate"}, "unknown command \"frobnicate\""},
		{{"status", "--bogus"}, "\"--bogus\""},
		{{"status", "extra"}, "\"extra\""},
		{{"fault"}, "missing action"},
		{{"fault", "zap"}, "\"zap\""},
		{{"fault", "add"}, "missing SPEC"},
		{{"fault", "add", "cuInit@0=1"}, "\"cuInit@0=1\""},
		{{"fault", "add", "cuInit@0=1"}, "NAME[@N][xK]=ERROR"},
		{{"fault", "add", "cuInit=NOPE"}, "\"cuInit=NOPE\""},
		{{"fault", "add", "cuInit=1;bad"}, "\"bad\""},
		{{"fault", "add", ";;"}, "no item"},
		{{"fault", "add", "cuInit=1", "--pid"}, "--pid needs a value"},
		{{"fault", "add", "cuInit=1", "--pid", "abc"}, "--pid \"abc\""},
		{{"fault", "add", "cuInit=1", "--pid", "0"}, "--pid \"0\""},
		{{"fault", "add", "cuInit=1", "--pid", "-5"}, "--pid \"-5\""},
		{{"fault", "add", "cuInit=1", "--pid=99999999999"}, "--pid \"99999999999\""},
		{{"fault", "add", "a=1", "b=2"}, "unexpected argument \"b=2\""},
		{{"fault", "add", "cuInit=1", "--frob"}, "\"--frob\""},
		{{"fault", "list", "now"}, "\"now\""},
		{{"fault", "clear", "now"}, "\"now\""},
		{{"device"}, "missing action"},
		{{"device", "broken", "0"}, "\"broken\""},
		{{"device", "lost"}, "missing IDX"},
		{{"device", "lost", "x"}, "IDX \"x\""},
		{{"device", "lost", "-1"}, "IDX \"-1\""},
		{{"device", "healthy", "1x"}, "IDX \"1x\""},
		{{"device", "lost", "0", "1"}, "unexpected argument \"1\""},
		{{"device", "lost", "5"}, "IDX 5 is out of range"},
		{{"device", "lost", "2"}, "2 devices (0 to 1)"},
		{{"--instance"}, "--instance needs a value"},
		{{"--instance", "a/b", "status"}, "--instance \"a/b\""},
		{{"--instance=", "status"}, "--instance \"\""},
		{{"status", "--instance", ".x"}, "--instance \".x\""},
		{{"reset", "now"}, "\"now\""},
		{{"create", "x"}, "\"x\""},
		{{"reclaim", "x"}, "\"x\""},
	};
	struct sim_shared *sh;

	(void)state;
	expect_ctl(0, "create");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = ctl_argv(cases[i].args);

		if (r != 2 || !strstr(err, cases[i].needle))
			print_error("case %zu (%s %s ...): exit %d, stderr: %s\n", i,
				    cases[i].args[0] ? cases[i].args[0] : "",
				    cases[i].args[0] && cases[i].args[1] ? cases[i].args[1] : "", r,
				    err);
		assert_int_equal(r, 2);
		expect_contains(err, cases[i].needle);
		expect_contains(err, "cusim-ctl --help");
		assert_string_equal(out, "");
	}
	/* None of it changed the instance. */
	sh = map_instance();
	assert_int_equal(atomic_load(&sh->nfaults_armed), 0);
	assert_int_equal(atomic_load(&sh->dev[0].lost), 0);
	sim_shared_close(sh);
	expect_ctl(0, "reset");
}

static void test_ctl_device_lost(void **state)
{
	struct sim_shared *sh;
	cJSON *j;

	(void)state;
	expect_ctl(0, "create");
	sh = map_instance();
	expect_ctl(0, "device", "lost", "1");
	expect_contains(out, "device 1");
	expect_contains(out, "NVIDIA A100-SXM4-40GB");
	expect_contains(out, "lost");
	assert_int_equal(atomic_load(&sh->dev[1].lost), 1);
	assert_int_equal(atomic_load(&sh->dev[0].lost), 0);
	expect_ctl(0, "status", "--json");
	j = parse_json();
	assert_false(boolean(cJSON_GetArrayItem(field(j, "devices"), 0), "lost"));
	assert_true(boolean(cJSON_GetArrayItem(field(j, "devices"), 1), "lost"));
	cJSON_Delete(j);
	expect_ctl(0, "status");
	expect_contains(out, " lost\n");
	expect_ctl(0, "device", "healthy", "1");
	expect_contains(out, "healthy");
	assert_int_equal(atomic_load(&sh->dev[1].lost), 0);
	expect_ctl(0, "status", "--json");
	j = parse_json();
	assert_false(boolean(cJSON_GetArrayItem(field(j, "devices"), 1), "lost"));
	cJSON_Delete(j);
	sim_shared_close(sh);
}

static void test_ctl_instance_option(void **state)
{
	char other[256], path[256];

	(void)state;
	instance_path(path, sizeof(path));
	snprintf(other, sizeof(other), "%s/cusim-%s-other", tmpdir, instance);
	char name[64];
	snprintf(name, sizeof(name), "%s-other", instance);
	expect_ctl(0, "--instance", name, "create");
	expect_contains(out, other);
	assert_int_equal(access(other, F_OK), 0);
	/* The environment's instance was not touched. */
	assert_int_equal(access(path, F_OK), -1);
	/* The option may follow the command, and be spelt with '='. */
	expect_ctl(0, "status", "--instance", name);
	expect_contains(out, other);
	char opt[80];
	snprintf(opt, sizeof(opt), "--instance=%s", name);
	expect_ctl(0, opt, "reset");
	expect_contains(out, "removed ");
	assert_int_equal(access(other, F_OK), -1);
}

static void test_ctl_reset(void **state)
{
	char path[256];

	(void)state;
	instance_path(path, sizeof(path));
	expect_ctl(0, "create");
	assert_int_equal(access(path, F_OK), 0);
	expect_ctl(0, "reset");
	expect_contains(out, "removed ");
	expect_contains(out, path);
	assert_int_equal(access(path, F_OK), -1);
	expect_ctl(1, "status");
	expect_contains(err, path);
	/* Resetting what does not exist succeeds: there is no instance, as asked. */
	expect_ctl(0, "reset");
	expect_contains(out, "no instance at ");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
		T(test_ctl_help),
		T(test_ctl_missing_instance),
		T(test_ctl_create),
		T(test_ctl_create_bad_env),
		T(test_ctl_status_json),
		T(test_ctl_status_human),
		T(test_ctl_reclaim),
		T(test_ctl_fault_add_list_clear),
		T(test_ctl_fault_spec_round_trip),
		T(test_ctl_fault_table_full),
		T(test_ctl_bad_arguments),
		T(test_ctl_device_lost),
		T(test_ctl_instance_option),
		T(test_ctl_reset),
	};
#undef T

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
