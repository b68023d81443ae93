/*
 * cusim-ctl: inspects and steers a cusim instance (the simulated machine that
 * libcuda.so.1 and libnvidia-ml.so.1 of cusim share): status, creation and
 * removal, fault injection, device loss, reclaiming dead processes.
 *
 * This file holds argument handling and the commands that change the
 * instance; cusim-ctl-status.c the ones that print it.
 */
#include "cusim-ctl.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim-config.h"
#include "sim-fault.h"

#define INSTANCE_FORM "1 to 64 characters from [A-Za-z0-9._-], not starting with '.'"
#define FAULT_FORMS                                                                                \
	"one or more ';'-separated NAME[@N][xK]=ERROR items, e.g. "                                \
	"\"cuMemAlloc_v2@3=OUT_OF_MEMORY;nvmlInit_v2x*=NVML_ERROR_DRIVER_NOT_LOADED\""

static const char usage_text[] =
	"Usage: cusim-ctl [--instance NAME] COMMAND [ARGS]\n"
	"\n"
	"Inspects and controls a cusim instance: the simulated machine shared by every\n"
	"process that uses cusim's libcuda.so.1 / libnvidia-ml.so.1 with the same\n"
	"CUSIM_INSTANCE and CUSIM_SHM_DIR.\n"
	"\n"
	"Commands:\n"
	"  status [--json]          devices (memory total/used, lost), processes (pid,\n"
	"                           alive, device memory, contexts), unified memory\n"
	"                           (per process and device: managed, resident and\n"
	"                           evicted bytes, faults, batches, migrations) and\n"
	"                           armed faults\n"
	"  create                   create the instance from CUSIM_GPUS / CUSIM_CTX_MEM\n"
	"                           (no-op when it exists) and print its devices\n"
	"  reset                    remove the instance; the next user creates a fresh one\n"
	"  fault add SPEC [--pid PID]\n"
	"                           arm faults in the instance table, for every process\n"
	"                           or only PID; SPEC is " FAULT_FORMS "\n"
	"  fault list [--json]      armed faults with their matched calls and failures\n"
	"  fault clear              disarm every fault of the instance table\n"
	"  device lost IDX          mark device IDX as fallen off the bus\n"
	"  device healthy IDX       undo `device lost`\n"
	"  reclaim                  free the slots and memory of dead processes\n"
	"  help                     this text\n"
	"\n"
	"Options:\n"
	"  --instance NAME          the instance to act on (default: $CUSIM_INSTANCE,\n"
	"                           else \"default\"); NAME is " INSTANCE_FORM "\n"
	"  -h, --help               this text\n"
	"\n"
	"Fault items, NAME[@N][xK]=ERROR:\n"
	"  NAME    a driver or NVML entry point (cuMemAlloc_v2, nvmlDeviceGetCount_v2),\n"
	"          or * for every call of the ERROR's API\n"
	"  @N      the first failing call, counting from 1 (default 1)\n"
	"  xK      how many calls fail (default 1); x* fails every call from N on\n"
	"  ERROR   CUDA_ERROR_*, NVML_ERROR_*, the same without the prefix (resolved in\n"
	"          NAME's API: cu* CUDA, nvml* NVML, * CUDA), or a number\n"
	"\n"
	"Environment:\n"
	"  CUSIM_INSTANCE, CUSIM_SHM_DIR   select the instance file\n"
	"                                  (<CUSIM_SHM_DIR or /dev/shm>/cusim-<instance>)\n"
	"  CUSIM_GPUS, CUSIM_CTX_MEM, CUSIM_UTIL_SAMPLE_MS, CUSIM_UM_*\n"
	"                                  what `create` builds\n"
	"\n"
	"Exit status: 0 success, 1 the operation failed (e.g. no instance), 2 bad arguments.\n";

int sim_ctl_usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("cusim-ctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'cusim-ctl --help'.\n", stderr);
	return SIM_CTL_USAGE;
}

int sim_ctl_error(const char *fmt, ...)
{
	va_list ap;

	fputs("cusim-ctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return SIM_CTL_FAILED;
}

int sim_ctl_open(struct sim_shared **ret)
{
	char err[1024], path[512];
	int r;

	r = sim_shared_open_existing(ret, err, sizeof(err));
	if (r == 0)
		return SIM_CTL_OK;
	if (r == -ENOENT) {
		sim_shared_path(path, sizeof(path));
		return sim_ctl_error("no cusim instance at %s (`cusim-ctl create` or any CUDA "
				     "program on cusim creates it)",
				     path);
	}
	return sim_ctl_error("%s", err);
}

void sim_ctl_close(struct sim_shared *sh)
{
	sim_shared_close(sh);
}

void sim_ctl_format_fault(const struct sim_fault *f, char *buf, size_t len)
{
	enum sim_fault_domain dom = f->domain == SIM_FAULT_NVML ? SIM_FAULT_NVML : SIM_FAULT_CUDA;
	const char *ename = sim_fault_error_name(dom, f->error);
	char count[16], error[24];

	if (f->count)
		snprintf(count, sizeof(count), "%u", f->count);
	else
		snprintf(count, sizeof(count), "*");
	/* A bare number cannot say its API: write it in full so that it reads back the same. */
	if (!ename) {
		snprintf(error, sizeof(error), "%d", f->error);
		ename = error;
	}
	snprintf(buf, len, "%.*s@%ux%s=%s", (int)sizeof(f->name), f->name, f->nth, count, ename);
}

/*
 * Parses a decimal number in [min, max] with nothing around it. Returns false
 * for anything else (sign, blanks, junk, overflow).
 */
static bool parse_long(const char *s, long min, long max, long *ret)
{
	char *end;
	long v;

	if (!s || !*s || !(*s >= '0' && *s <= '9'))
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return false;
	*ret = v;
	return true;
}

/* ---- create, reset, reclaim ---- */

static int cmd_create(int argc, char **argv)
{
	struct sim_shared *sh;
	char err[1024], path[512];
	bool existed;
	int r;

	if (argc > 1)
		return sim_ctl_usage_error("create: unexpected argument \"%s\"; create takes none",
					   argv[1]);
	sim_shared_path(path, sizeof(path));
	r = sim_shared_open_existing(&sh, err, sizeof(err));
	existed = r == 0;
	if (r == -ENOENT)
		r = sim_shared_open(&sh, err, sizeof(err));
	if (r == -EINVAL)
		return sim_ctl_usage_error("%s", err); /* CUSIM_GPUS / CUSIM_CTX_MEM */
	if (r < 0)
		return sim_ctl_error("%s", err);
	printf("%s instance at %s\n", existed ? "existing" : "created", path);
	sim_ctl_print_devices(sh);
	sim_ctl_close(sh);
	return SIM_CTL_OK;
}

static int cmd_reset(int argc, char **argv)
{
	char path[512];
	bool existed;
	int r;

	if (argc > 1)
		return sim_ctl_usage_error("reset: unexpected argument \"%s\"; reset takes none",
					   argv[1]);
	sim_shared_path(path, sizeof(path));
	existed = access(path, F_OK) == 0;
	r = sim_shared_unlink();
	if (r < 0)
		return sim_ctl_error("cannot remove %s: %s", path, strerror(-r));
	/* Resetting nothing is success: the result (no instance) is what was asked. */
	printf("%s %s\n", existed ? "removed" : "no instance at", path);
	return SIM_CTL_OK;
}

static int cmd_reclaim(int argc, char **argv)
{
	struct sim_shared *sh;
	int r, n;

	if (argc > 1)
		return sim_ctl_usage_error(
		    "reclaim: unexpected argument \"%s\"; reclaim takes none", argv[1]);
	r = sim_ctl_open(&sh);
	if (r)
		return r;
	n = sim_proc_reclaim_dead(sh);
	printf("reclaimed %d dead process%s\n", n, n == 1 ? "" : "es");
	sim_ctl_close(sh);
	return SIM_CTL_OK;
}

/* ---- device lost / healthy ---- */

static int cmd_device(int argc, char **argv)
{
	struct sim_shared *sh;
	bool lost;
	long idx;
	int r;

	if (argc < 2)
		return sim_ctl_usage_error("device: missing action; expected `device lost IDX` or "
					   "`device healthy IDX`");
	if (strcmp(argv[1], "lost") == 0)
		lost = true;
	else if (strcmp(argv[1], "healthy") == 0)
		lost = false;
	else
		return sim_ctl_usage_error(
		    "device: unknown action \"%s\"; expected lost or healthy", argv[1]);
	if (argc < 3)
		return sim_ctl_usage_error("device %s: missing IDX; expected a device index "
					   "(0, 1, ...; see `cusim-ctl status`)",
					   argv[1]);
	if (argc > 3)
		return sim_ctl_usage_error("device %s: unexpected argument \"%s\"", argv[1],
					   argv[3]);
	if (!parse_long(argv[2], 0, SIM_MAX_DEVICES - 1, &idx))
		return sim_ctl_usage_error("device %s: IDX \"%s\" is invalid; expected a device "
					   "index from 0 to %d",
					   argv[1], argv[2], SIM_MAX_DEVICES - 1);
	r = sim_ctl_open(&sh);
	if (r)
		return r;
	if ((unsigned long)idx >= sh->ndevices) {
		unsigned n = sh->ndevices;

		sim_ctl_close(sh);
		return sim_ctl_usage_error("device %s: IDX %ld is out of range; the instance has "
					   "%u device%s (0 to %u)",
					   argv[1], idx, n, n == 1 ? "" : "s", n - 1);
	}
	atomic_store(&sh->dev[idx].lost, lost ? 1u : 0u);
	printf("device %ld (%.*s, %.*s) is now %s\n", idx, (int)sizeof(sh->desc[idx].name),
	       sh->desc[idx].name, (int)sizeof(sh->desc[idx].uuid), sh->desc[idx].uuid,
	       lost ? "lost" : "healthy");
	sim_ctl_close(sh);
	return SIM_CTL_OK;
}

/* ---- fault add / clear / list ---- */

/*
 * Splits SPEC on ';' and parses every non-empty item into faults[]; returns
 * the count, or -1 after printing the first bad item (nothing is armed then).
 */
static int parse_spec(const char *spec, int32_t pid, struct sim_fault *faults, int max)
{
	char item[512], err[1024];
	int n = 0;

	for (const char *p = spec; *p;) {
		size_t len = strcspn(p, ";");

		if (len >= sizeof(item)) {
			sim_ctl_usage_error(
			    "fault add: an item of SPEC is longer than %zu characters; "
			    "expected %s",
			    sizeof(item) - 1, FAULT_FORMS);
			return -1;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		p += len + (p[len] == ';');
		if (strspn(item, " \t\n") == len)
			continue;
		if (n == max) {
			sim_ctl_usage_error(
			    "fault add: SPEC has more than %d items, the size of the "
			    "fault table",
			    max);
			return -1;
		}
		if (sim_fault_parse_one(item, SIM_FAULT_CUDA, &faults[n], err, sizeof(err)) < 0) {
			sim_ctl_usage_error("fault add: SPEC: %s", err);
			return -1;
		}
		faults[n++].pid = pid;
	}
	if (n == 0)
		sim_ctl_usage_error("fault add: SPEC \"%s\" has no item; expected %s", spec,
				    FAULT_FORMS);
	return n ? n : -1;
}

static int fault_add(int argc, char **argv)
{
	struct sim_fault faults[SIM_MAX_FAULTS];
	const char *spec = NULL;
	struct sim_shared *sh;
	long pid = 0;
	int n, r;

	for (int i = 1; i < argc; i++) {
		const char *pid_s = NULL;

		if (strcmp(argv[i], "--pid") == 0) {
			if (i + 1 == argc)
				return sim_ctl_usage_error(
				    "fault add: --pid needs a value; expected "
				    "--pid PID with PID a process id");
			pid_s = argv[++i];
		} else if (strncmp(argv[i], "--pid=", 6) == 0) {
			pid_s = argv[i] + 6;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			return sim_ctl_usage_error("fault add: unknown option \"%s\"; expected "
						   "`fault add SPEC [--pid PID]`",
						   argv[i]);
		} else if (!spec) {
			spec = argv[i];
			continue;
		} else {
			return sim_ctl_usage_error(
			    "fault add: unexpected argument \"%s\"; SPEC is one "
			    "argument (quote it, items separated by ';')",
			    argv[i]);
		}
		if (!parse_long(pid_s, 1, INT32_MAX, &pid))
			return sim_ctl_usage_error("fault add: --pid \"%s\" is invalid; expected a "
						   "process id from 1 to %d",
						   pid_s, INT32_MAX);
	}
	if (!spec)
		return sim_ctl_usage_error("fault add: missing SPEC; expected %s", FAULT_FORMS);
	n = parse_spec(spec, (int32_t)pid, faults, SIM_MAX_FAULTS);
	if (n < 0)
		return SIM_CTL_USAGE;
	r = sim_ctl_open(&sh);
	if (r)
		return r;
	for (int i = 0; i < n; i++) {
		char text[128];

		sim_ctl_format_fault(&faults[i], text, sizeof(text));
		if (sim_fault_arm(sh, &faults[i]) < 0) {
			sim_ctl_close(sh);
			return sim_ctl_error(
			    "fault table full (%d entries): %s and the %d item%s after "
			    "it were not armed; `cusim-ctl fault clear` empties it",
			    SIM_MAX_FAULTS, text, n - i - 1, n - i - 1 == 1 ? "" : "s");
		}
		if (pid)
			printf("armed %s for pid %ld\n", text, pid);
		else
			printf("armed %s for every process\n", text);
	}
	sim_ctl_close(sh);
	return SIM_CTL_OK;
}

static int fault_clear(int argc, char **argv)
{
	struct sim_shared *sh;
	unsigned before = 0;
	int r;

	if (argc > 1)
		return sim_ctl_usage_error("fault clear: unexpected argument \"%s\"; it takes none",
					   argv[1]);
	r = sim_ctl_open(&sh);
	if (r)
		return r;
	for (unsigned i = 0; i < SIM_MAX_FAULTS; i++)
		before += atomic_load(&sh->faults[i].active) == 2;
	sim_fault_clear(sh);
	printf("cleared %u fault%s\n", before, before == 1 ? "" : "s");
	sim_ctl_close(sh);
	return SIM_CTL_OK;
}

static int cmd_fault(int argc, char **argv)
{
	if (argc < 2)
		return sim_ctl_usage_error("fault: missing action; expected add, list or clear");
	if (strcmp(argv[1], "add") == 0)
		return fault_add(argc - 1, argv + 1);
	if (strcmp(argv[1], "clear") == 0)
		return fault_clear(argc - 1, argv + 1);
	if (strcmp(argv[1], "list") == 0)
		return sim_ctl_cmd_fault_list(argc - 1, argv + 1);
	return sim_ctl_usage_error("fault: unknown action \"%s\"; expected add, list or clear",
				   argv[1]);
}

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fputs(usage_text, stdout);
	return SIM_CTL_OK;
}

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{"status", sim_ctl_cmd_status},
	{"create", cmd_create},
	{"reset", cmd_reset},
	{"fault", cmd_fault},
	{"device", cmd_device},
	{"reclaim", cmd_reclaim},
	{"help", cmd_help},
};

/*
 * Takes the global options out of argv (they may appear anywhere, as users
 * type `cusim-ctl status --instance x`): --instance sets CUSIM_INSTANCE, so
 * the instance is chosen exactly as the libraries choose it.
 * Returns -1 to go on, else the exit code.
 */
static int global_options(int *argc, char **argv)
{
	const char *inst = NULL, *err_s;
	char err[256];
	int out = 1;

	for (int i = 1; i < *argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(usage_text, stdout);
			return SIM_CTL_OK;
		}
		if (strcmp(argv[i], "--instance") == 0) {
			if (i + 1 == *argc)
				return sim_ctl_usage_error(
				    "--instance needs a value; expected "
				    "--instance NAME with NAME " INSTANCE_FORM);
			inst = argv[++i];
			continue;
		}
		if (strncmp(argv[i], "--instance=", 11) == 0) {
			inst = argv[i] + 11;
			continue;
		}
		argv[out++] = argv[i];
	}
	*argc = out;
	argv[out] = NULL;
	if (inst) {
		if (!*inst)
			return sim_ctl_usage_error("--instance \"\" is invalid; expected NAME "
						   INSTANCE_FORM);
		setenv("CUSIM_INSTANCE", inst, 1);
	}
	if (sim_config_instance(&err_s, err, sizeof(err)) < 0) {
		if (inst)
			return sim_ctl_usage_error("--instance \"%s\" is invalid; expected NAME "
						   INSTANCE_FORM, inst);
		return sim_ctl_usage_error("%s", err);
	}
	return -1;
}

int main(int argc, char **argv)
{
	int r = global_options(&argc, argv);

	if (r >= 0)
		return r;
	if (argc < 2)
		return sim_ctl_usage_error(
		    "missing command; expected one of status, create, reset, "
		    "fault, device, reclaim, help");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	return sim_ctl_usage_error("unknown command \"%s\"; expected one of status, create, reset, "
				   "fault, device, reclaim, help",
				   argv[1]);
}
