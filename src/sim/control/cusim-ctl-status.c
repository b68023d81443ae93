/*
 * cusim-ctl: the commands that print an instance (status, fault list), as a
 * table for people or as JSON for scripts and tests.
 *
 * The instance is read without any lock while processes use it, so the
 * figures are a snapshot of independent counters, not one consistent cut.
 */
#include "cusim-ctl.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cs-size.h"
#include "sim-config.h"
#include "sim-fault.h"
#include "sim-um-lru.h"

/* A bytes count as JSON: a double holds integers exactly up to 2^53, past any device. */
static cJSON *json_bytes(uint64_t v)
{
	return cJSON_CreateNumber((double)v);
}

static const char *instance_name(void)
{
	const char *inst = "default";
	char err[256];

	if (sim_config_instance(&inst, err, sizeof(err)) < 0)
		inst = "?"; /* main() validated it already */
	return inst;
}

/* Device memory in use: ordinary allocations and resident managed chunks. */
static uint64_t dev_used(const struct sim_shared *sh, unsigned d)
{
	return sim_dev_in_use(sh, d);
}

static const char *lru_name(uint32_t lru)
{
	return lru == SIM_UM_LRU_ACCESS ? "access" : "migration";
}

static void pci_bus_id(const struct sim_device_desc *d, char *buf, size_t len)
{
	/* As nvmlPciInfo_t.busId spells it. */
	snprintf(buf, len, "%08X:%02X:%02X.0", d->pci_domain, d->pci_bus, d->pci_device);
}

void sim_ctl_print_devices(const struct sim_shared *sh)
{
	char used[32], total[32];

	printf("%-4s %-26s %-41s %12s %12s %5s  %s\n", "DEV", "NAME", "UUID", "USED", "TOTAL",
	       "SMS", "STATE");
	for (unsigned d = 0; d < sh->ndevices; d++) {
		const struct sim_device_desc *desc = &sh->desc[d];

		cs_size_format(dev_used(sh, d), used, sizeof(used));
		cs_size_format(desc->total_mem, total, sizeof(total));
		printf("%-4u %-26.*s %-41.*s %12s %12s %5u  %s\n", d, (int)sizeof(desc->name),
		       desc->name, (int)sizeof(desc->uuid), desc->uuid, used, total, desc->sm_count,
		       atomic_load(&sh->dev[d].lost) ? "lost" : "ok");
	}
}

/* Parses `[--json]` after a command name; returns -1 to go on, else the exit code. */
static int json_flag(int argc, char **argv, const char *cmd, bool *json)
{
	*json = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			*json = true;
		else
			return sim_ctl_usage_error("%s: unexpected argument \"%s\"; expected `%s "
						   "[--json]`",
						   cmd, argv[i], cmd);
	}
	return -1;
}

static cJSON *fault_json(const struct sim_fault *f, unsigned slot)
{
	enum sim_fault_domain dom = f->domain == SIM_FAULT_NVML ? SIM_FAULT_NVML : SIM_FAULT_CUDA;
	const char *ename = sim_fault_error_name(dom, f->error);
	char name[SIM_FAULT_NAME_LEN + 1], spec[160];
	cJSON *o = cJSON_CreateObject();

	snprintf(name, sizeof(name), "%.*s", (int)sizeof(f->name), f->name);
	sim_ctl_format_fault(f, spec, sizeof(spec));
	cJSON_AddNumberToObject(o, "slot", slot);
	cJSON_AddStringToObject(o, "spec", spec);
	cJSON_AddStringToObject(o, "name", name);
	cJSON_AddStringToObject(o, "domain", dom == SIM_FAULT_NVML ? "nvml" : "cuda");
	if (ename)
		cJSON_AddStringToObject(o, "error", ename);
	else
		cJSON_AddNullToObject(o, "error");
	cJSON_AddNumberToObject(o, "error_value", f->error);
	cJSON_AddNumberToObject(o, "pid", f->pid);
	cJSON_AddNumberToObject(o, "nth", f->nth);
	cJSON_AddNumberToObject(o, "count", f->count);
	cJSON_AddBoolToObject(o, "forever", f->count == 0);
	cJSON_AddNumberToObject(o, "calls", atomic_load(&f->calls));
	cJSON_AddNumberToObject(o, "fired", atomic_load(&f->fired));
	return o;
}

static cJSON *faults_json(const struct sim_shared *sh)
{
	cJSON *a = cJSON_CreateArray();

	for (unsigned i = 0; i < SIM_MAX_FAULTS; i++)
		if (atomic_load(&sh->faults[i].active) == 2)
			cJSON_AddItemToArray(a, fault_json(&sh->faults[i], i));
	return a;
}

static void print_faults(const struct sim_shared *sh)
{
	char spec[160], pid[16];
	unsigned n = 0;

	for (unsigned i = 0; i < SIM_MAX_FAULTS; i++) {
		const struct sim_fault *f = &sh->faults[i];

		if (atomic_load(&f->active) != 2)
			continue;
		if (n++ == 0)
			printf("%-5s %-56s %-8s %10s %10s\n", "SLOT", "FAULT", "PID", "CALLS",
			       "FIRED");
		sim_ctl_format_fault(f, spec, sizeof(spec));
		if (f->pid)
			snprintf(pid, sizeof(pid), "%d", f->pid);
		else
			snprintf(pid, sizeof(pid), "any");
		printf("%-5u %-56s %-8s %10u %10u\n", i, spec, pid, atomic_load(&f->calls),
		       atomic_load(&f->fired));
	}
	if (n == 0)
		printf("no fault armed\n");
}

static int print_json(cJSON *root)
{
	char *text = cJSON_Print(root);

	cJSON_Delete(root);
	if (!text)
		return sim_ctl_error("out of memory formatting JSON");
	puts(text);
	cJSON_free(text);
	return SIM_CTL_OK;
}

int sim_ctl_cmd_fault_list(int argc, char **argv)
{
	struct sim_shared *sh;
	bool json;
	int r;

	r = json_flag(argc, argv, "fault list", &json);
	if (r >= 0)
		return r;
	r = sim_ctl_open(&sh);
	if (r)
		return r;
	if (json) {
		cJSON *root = faults_json(sh);

		sim_ctl_close(sh);
		return print_json(root);
	}
	print_faults(sh);
	sim_ctl_close(sh);
	return SIM_CTL_OK;
}

/* The live-looking slots: a registered pid (alive or not yet reclaimed). */
static bool slot_in_use(const struct sim_proc_slot *slot)
{
	return atomic_load(&slot->pid) > 0;
}

static void um_params_json(cJSON *o, const struct sim_um_params *p)
{
	cJSON_AddItemToObject(o, "chunk", json_bytes(SIM_UM_CHUNK));
	cJSON_AddItemToObject(o, "bandwidth", json_bytes(p->bandwidth));
	cJSON_AddNumberToObject(o, "fault_ns", (double)p->fault_ns);
	cJSON_AddNumberToObject(o, "batch_ns", (double)p->batch_ns);
	cJSON_AddNumberToObject(o, "batch_faults", p->batch_faults);
	cJSON_AddStringToObject(o, "lru", lru_name(p->lru));
}

/* A device's unified memory: what is resident and what moved, every process together. */
static void um_device_json(cJSON *o, const struct sim_shared *sh, unsigned d)
{
	const struct sim_um_dev *u = &sh->um[d];

	cJSON_AddItemToObject(o, "resident", json_bytes(atomic_load(&sh->dev[d].um_resident)));
	cJSON_AddNumberToObject(o, "capacity_chunks", u->nchunks);
	cJSON_AddNumberToObject(o, "faults", (double)atomic_load(&u->faults));
	cJSON_AddNumberToObject(o, "fault_batches", (double)atomic_load(&u->batches));
	cJSON_AddItemToObject(o, "migrated_in", json_bytes(atomic_load(&u->in)));
	cJSON_AddItemToObject(o, "migrated_out", json_bytes(atomic_load(&u->out)));
	cJSON_AddItemToObject(o, "remote", json_bytes(atomic_load(&u->remote)));
	cJSON_AddNumberToObject(o, "evictions", (double)atomic_load(&u->evictions));
}

/*
 * A process's unified memory: host memory its evicted chunks use, and per
 * device what it allocated there, what is resident, its faults and moves.
 */
static void um_process_json(cJSON *o, const struct sim_shared *sh,
			    const struct sim_proc_slot *slot)
{
	cJSON *devs;

	cJSON_AddItemToObject(o, "evicted", json_bytes(atomic_load(&slot->um_evicted)));
	devs = cJSON_AddArrayToObject(o, "devices");
	for (unsigned d = 0; d < sh->ndevices; d++) {
		cJSON *e = cJSON_CreateObject();

		cJSON_AddNumberToObject(e, "device", d);
		cJSON_AddItemToObject(e, "managed", json_bytes(atomic_load(&slot->managed[d])));
		cJSON_AddItemToObject(e, "resident", json_bytes(atomic_load(&slot->um_resident[d])));
		cJSON_AddNumberToObject(e, "faults", (double)atomic_load(&slot->um_faults[d]));
		cJSON_AddNumberToObject(e, "fault_batches", (double)atomic_load(&slot->um_batches[d]));
		cJSON_AddItemToObject(e, "migrated_in", json_bytes(atomic_load(&slot->um_in[d])));
		cJSON_AddItemToObject(e, "migrated_out", json_bytes(atomic_load(&slot->um_out[d])));
		cJSON_AddItemToObject(e, "remote", json_bytes(atomic_load(&slot->um_remote[d])));
		cJSON_AddItemToArray(devs, e);
	}
}

static cJSON *status_json(const struct sim_shared *sh, const char *path)
{
	cJSON *root = cJSON_CreateObject(), *devs, *procs;
	char gpus[sizeof(sh->gpus_spec) + 1];

	snprintf(gpus, sizeof(gpus), "%.*s", (int)sizeof(sh->gpus_spec), sh->gpus_spec);
	cJSON_AddStringToObject(root, "instance", instance_name());
	cJSON_AddStringToObject(root, "path", path);
	cJSON_AddStringToObject(root, "gpus", gpus);
	cJSON_AddItemToObject(root, "ctx_mem", json_bytes(sh->ctx_mem));
	cJSON_AddItemToObject(root, "created_unix", json_bytes(sh->created_ns / 1000000000ull));
	cJSON_AddNumberToObject(root, "util_sample_ms",
				sh->util_sample_ms ? sh->util_sample_ms : SIM_BUCKET_NS / 1000000);
	um_params_json(cJSON_AddObjectToObject(root, "unified_memory"), &sh->um_params);

	devs = cJSON_AddArrayToObject(root, "devices");
	for (unsigned d = 0; d < sh->ndevices; d++) {
		const struct sim_device_desc *desc = &sh->desc[d];
		cJSON *o = cJSON_CreateObject(), *mem;
		char s[SIM_UUID_LEN + SIM_NAME_LEN];
		uint64_t used = dev_used(sh, d);

		cJSON_AddNumberToObject(o, "index", d);
		snprintf(s, sizeof(s), "%.*s", (int)sizeof(desc->name), desc->name);
		cJSON_AddStringToObject(o, "name", s);
		snprintf(s, sizeof(s), "%.*s", (int)sizeof(desc->uuid), desc->uuid);
		cJSON_AddStringToObject(o, "uuid", s);
		cJSON_AddStringToObject(o, "model", sim_config_model(desc)->key);
		cJSON_AddNumberToObject(o, "sm_count", desc->sm_count);
		pci_bus_id(desc, s, sizeof(s));
		cJSON_AddStringToObject(o, "pci_bus_id", s);
		mem = cJSON_AddObjectToObject(o, "memory");
		cJSON_AddItemToObject(mem, "total", json_bytes(desc->total_mem));
		cJSON_AddItemToObject(mem, "used", json_bytes(used));
		cJSON_AddItemToObject(
		    mem, "free", json_bytes(used < desc->total_mem ? desc->total_mem - used : 0));
		cJSON_AddItemToObject(mem, "managed_resident",
				      json_bytes(atomic_load(&sh->dev[d].um_resident)));
		um_device_json(cJSON_AddObjectToObject(o, "unified_memory"), sh, d);
		cJSON_AddBoolToObject(o, "lost", atomic_load(&sh->dev[d].lost) != 0);
		cJSON_AddItemToArray(devs, o);
	}

	procs = cJSON_AddArrayToObject(root, "processes");
	for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
		const struct sim_proc_slot *slot = &sh->procs[i];
		uint32_t ctx = atomic_load(&slot->ctx_devices);
		cJSON *o, *used, *ctxs;

		if (!slot_in_use(slot))
			continue;
		o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "pid", atomic_load(&slot->pid));
		cJSON_AddBoolToObject(o, "alive", sim_proc_slot_alive(sh, slot));
		used = cJSON_AddArrayToObject(o, "used");
		for (unsigned d = 0; d < sh->ndevices; d++)
			cJSON_AddItemToArray(used, json_bytes(sim_slot_in_use(slot, d)));
		ctxs = cJSON_AddArrayToObject(o, "ctx_devices");
		for (unsigned d = 0; d < sh->ndevices; d++)
			if (ctx & (1u << d))
				cJSON_AddItemToArray(ctxs, cJSON_CreateNumber(d));
		um_process_json(cJSON_AddObjectToObject(o, "unified_memory"), sh, slot);
		cJSON_AddItemToArray(procs, o);
	}

	cJSON_AddItemToObject(root, "faults", faults_json(sh));
	return root;
}

static void print_processes(const struct sim_shared *sh)
{
	unsigned n = 0;

	for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
		const struct sim_proc_slot *slot = &sh->procs[i];
		uint32_t ctx = atomic_load(&slot->ctx_devices);
		char ctxs[64] = "-", used[512] = "-";
		size_t cl = 0, ul = 0;

		if (!slot_in_use(slot))
			continue;
		if (n++ == 0)
			printf("%-9s %-6s %-10s %s\n", "PID", "STATE", "CONTEXTS", "DEVICE MEMORY");
		for (unsigned d = 0; d < sh->ndevices; d++) {
			uint64_t u = sim_slot_in_use(slot, d);
			char sz[32];

			if (ctx & (1u << d) && cl < sizeof(ctxs))
				cl += (size_t)snprintf(ctxs + cl, sizeof(ctxs) - cl, "%s%u",
						       cl ? "," : "", d);
			if (u && ul < sizeof(used))
				ul += (size_t)snprintf(used + ul, sizeof(used) - ul, "%s%u: %s",
						       ul ? ", " : "", d,
						       cs_size_format(u, sz, sizeof(sz)));
		}
		printf("%-9d %-6s %-10s %s\n", atomic_load(&slot->pid),
		       sim_proc_slot_alive(sh, slot) ? "alive" : "dead", ctxs, used);
	}
	if (n == 0)
		printf("no process\n");
}

/* True when any process has managed memory or any device has faulted: worth a table. */
static bool um_in_use(const struct sim_shared *sh)
{
	for (unsigned d = 0; d < sh->ndevices; d++)
		if (atomic_load(&sh->um[d].faults) || atomic_load(&sh->dev[d].um_resident))
			return true;
	for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
		for (unsigned d = 0; d < sh->ndevices; d++)
			if (slot_in_use(&sh->procs[i]) && atomic_load(&sh->procs[i].managed[d]))
				return true;
	return false;
}

/* One row per process and device it has managed memory on. */
static void print_unified_memory(const struct sim_shared *sh)
{
	char a[32], r[32], e[32], in[32], out[32];
	unsigned n = 0;

	printf("unified memory: %s chunks, %.2f GB/s, %llu ns a fault, batches of %u costing %llu "
	       "ns, LRU by %s\n",
	       cs_size_format(SIM_UM_CHUNK, a, sizeof(a)), (double)sh->um_params.bandwidth / 1e9,
	       (unsigned long long)sh->um_params.fault_ns, sh->um_params.batch_faults,
	       (unsigned long long)sh->um_params.batch_ns, lru_name(sh->um_params.lru));
	if (!um_in_use(sh))
		return;
	for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
		const struct sim_proc_slot *slot = &sh->procs[i];

		if (!slot_in_use(slot))
			continue;
		for (unsigned d = 0; d < sh->ndevices; d++) {
			if (!atomic_load(&slot->managed[d]) && !atomic_load(&slot->um_faults[d]) &&
			    !atomic_load(&slot->um_resident[d]))
				continue;
			if (n++ == 0)
				printf("%-9s %-4s %12s %12s %12s %10s %8s %12s %12s\n", "PID", "DEV",
				       "MANAGED", "RESIDENT", "EVICTED", "FAULTS", "BATCHES", "IN",
				       "OUT");
			printf("%-9d %-4u %12s %12s %12s %10llu %8llu %12s %12s\n",
			       atomic_load(&slot->pid), d,
			       cs_size_format(atomic_load(&slot->managed[d]), a, sizeof(a)),
			       cs_size_format(atomic_load(&slot->um_resident[d]), r, sizeof(r)),
			       cs_size_format(atomic_load(&slot->um_evicted), e, sizeof(e)),
			       (unsigned long long)atomic_load(&slot->um_faults[d]),
			       (unsigned long long)atomic_load(&slot->um_batches[d]),
			       cs_size_format(atomic_load(&slot->um_in[d]), in, sizeof(in)),
			       cs_size_format(atomic_load(&slot->um_out[d]), out, sizeof(out)));
		}
	}
}

int sim_ctl_cmd_status(int argc, char **argv)
{
	struct sim_shared *sh;
	char path[512], ctx[32], when[64];
	struct tm tm;
	time_t t;
	bool json;
	int r;

	r = json_flag(argc, argv, "status", &json);
	if (r >= 0)
		return r;
	r = sim_ctl_open(&sh);
	if (r)
		return r;
	sim_shared_path(path, sizeof(path));
	if (json) {
		cJSON *root = status_json(sh, path);

		sim_ctl_close(sh);
		return print_json(root);
	}
	t = (time_t)(sh->created_ns / 1000000000ull);
	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("instance %s at %s\n", instance_name(), path);
	printf("created %s from CUSIM_GPUS=\"%.*s\", context footprint %s,\n"
	       "per-process utilization sampled every %u ms\n\n",
	       when, (int)sizeof(sh->gpus_spec), sh->gpus_spec,
	       cs_size_format(sh->ctx_mem, ctx, sizeof(ctx)),
	       sh->util_sample_ms ? sh->util_sample_ms : (unsigned)(SIM_BUCKET_NS / 1000000));
	sim_ctl_print_devices(sh);
	printf("\n");
	print_processes(sh);
	printf("\n");
	print_unified_memory(sh);
	printf("\n");
	print_faults(sh);
	sim_ctl_close(sh);
	return SIM_CTL_OK;
}
