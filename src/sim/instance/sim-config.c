/*
 * The simulated GPU models (their published figures), CUSIM_GPUS parsing
 * into device descriptions (memory, SMs, PCI location, UUIDs derived from
 * the instance name), the unified-memory model's parameters (CUSIM_UM_*),
 * and the CUSIM_INSTANCE name.
 */
#include "sim-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cs-size.h"
#include "sim-um-lru.h"

/* Figures follow NVIDIA's published specifications for each part. */
const struct sim_model sim_models[] = {
	{"H100", "NVIDIA H100 ", "GB HBM3", 9, 0, 132, 80ull << 30, 1980000, 2619000, 5120,
	 50 << 20, 232448, 233472, 2048, 32, 65536, 700},
	{"H200", "NVIDIA H200", NULL, 9, 0, 132, 141ull << 30, 1980000, 3201000, 6144, 60 << 20, 232448,
	 233472, 2048, 32, 65536, 700},
	{"A100", "NVIDIA A100-SXM4-", "GB", 8, 0, 108, 40ull << 30, 1410000, 1215000, 5120, 40 << 20,
	 166912, 167936, 2048, 32, 65536, 400},
	{"A10", "NVIDIA A10", NULL, 8, 6, 72, 24ull << 30, 1695000, 6251000, 384, 6 << 20, 101376, 102400,
	 1536, 16, 65536, 150},
	{"L4", "NVIDIA L4", NULL, 8, 9, 58, 24ull << 30, 2040000, 6251000, 192, 48 << 20, 101376, 102400,
	 1536, 24, 65536, 72},
	{"L40S", "NVIDIA L40S", NULL, 8, 9, 142, 48ull << 30, 2520000, 9001000, 384, 96 << 20, 101376,
	 102400, 1536, 24, 65536, 350},
	{"T4", "Tesla T4", NULL, 7, 5, 40, 16ull << 30, 1590000, 5001000, 256, 4 << 20, 65536, 65536, 1024,
	 16, 65536, 70},
	{"V100", "Tesla V100-SXM2-", "GB", 7, 0, 80, 32ull << 30, 1530000, 877000, 4096, 6 << 20, 98304,
	 98304, 2048, 32, 65536, 300},
	{"B200", "NVIDIA B200", NULL, 10, 0, 148, 180ull << 30, 1965000, 3996000, 8192, 126 << 20, 232448,
	 233472, 2048, 32, 65536, 1000},
};
const size_t sim_nmodels = sizeof(sim_models) / sizeof(sim_models[0]);

/* PCI buses of an 8-GPU HGX board, reused modulo 8 with a second domain. */
static const uint8_t pci_buses[8] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};

const struct sim_model *sim_config_model(const struct sim_device_desc *desc)
{
	return &sim_models[desc->model < sim_nmodels ? desc->model : 0];
}

int sim_config_instance(const char **ret, char *err, size_t errlen)
{
	const char *name = getenv("CUSIM_INSTANCE");
	size_t n;

	if (!name || !*name) {
		*ret = "default";
		return 0;
	}
	n = strlen(name);
	if (n > 64 || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				   "0123456789._-") != n || name[0] == '.') {
		snprintf(err, errlen,
			 "CUSIM_INSTANCE=\"%s\" is invalid: expected 1 to 64 characters from "
			 "[A-Za-z0-9._-], not starting with '.'",
			 name);
		return -EINVAL;
	}
	*ret = name;
	return 0;
}

/* FNV-1a, 64 bits: stable across runs and machines, which is all a UUID needs here. */
static uint64_t fnv1a(const char *s, uint64_t h)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

static void make_uuid(const char *instance, unsigned index, const char *model,
		      struct sim_device_desc *d)
{
	char seed[160];
	uint64_t a, b;

	snprintf(seed, sizeof(seed), "cusim/%s/%u/%s", instance, index, model);
	a = fnv1a(seed, 0xcbf29ce484222325ull);
	b = fnv1a(seed, a ^ 0x9e3779b97f4a7c15ull);
	for (int i = 0; i < 8; i++) {
		d->uuid_bytes[i] = (uint8_t)(a >> (8 * i));
		d->uuid_bytes[8 + i] = (uint8_t)(b >> (8 * i));
	}
	/* RFC 4122 version 4 / variant bits, as real GPU UUIDs look. */
	d->uuid_bytes[6] = (uint8_t)((d->uuid_bytes[6] & 0x0f) | 0x40);
	d->uuid_bytes[8] = (uint8_t)((d->uuid_bytes[8] & 0x3f) | 0x80);
	const uint8_t *u = d->uuid_bytes;
	snprintf(d->uuid, sizeof(d->uuid),
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
}

static int parse_one(char *item, unsigned index, const char *instance, struct sim_device_desc *d,
		     char *err, size_t errlen)
{
	char *model_s = item, *mem_s = NULL, *sms_s = NULL, *extra = NULL;
	const struct sim_model *m = NULL;
	uint64_t mem;
	unsigned long sms;

	mem_s = strchr(model_s, ':');
	if (mem_s) {
		*mem_s++ = '\0';
		sms_s = strchr(mem_s, ':');
		if (sms_s) {
			*sms_s++ = '\0';
			extra = strchr(sms_s, ':');
		}
	}
	if (extra) {
		snprintf(err, errlen, "CUSIM_GPUS: device %u has too many ':' fields; expected %s",
			 index, SIM_GPUS_FORMS);
		return -EINVAL;
	}
	for (size_t i = 0; i < sim_nmodels; i++) {
		if (strcasecmp(model_s, sim_models[i].key) == 0) {
			m = &sim_models[i];
			d->model = (uint32_t)i;
		}
	}
	if (!m) {
		snprintf(err, errlen, "CUSIM_GPUS: unknown model \"%s\" for device %u; expected %s",
			 model_s, index, SIM_GPUS_FORMS);
		return -EINVAL;
	}
	mem = m->default_mem;
	if (mem_s && *mem_s) {
		int r = cs_size_parse(mem_s, &mem);
		if (r < 0 || mem < (64ull << 20) || mem > (1ull << 44)) {
			snprintf(err, errlen,
				 "CUSIM_GPUS: memory \"%s\" of device %u is invalid: expected %s, "
				 "between 64MiB and 16TiB",
				 mem_s, index, CS_SIZE_FORMS);
			return -EINVAL;
		}
	}
	/* Device memory is handed out in 2 MiB pages, as the real driver does. */
	mem &= ~((2ull << 20) - 1);
	sms = m->default_sms;
	if (sms_s && *sms_s) {
		char *end;
		errno = 0;
		sms = strtoul(sms_s, &end, 10);
		if (errno || *end || sms < 1 || sms > 1024 || sms_s[0] == '-') {
			snprintf(err, errlen,
				 "CUSIM_GPUS: SM count \"%s\" of device %u is invalid: expected a "
				 "number from 1 to 1024",
				 sms_s, index);
			return -EINVAL;
		}
	}
	d->total_mem = mem;
	d->sm_count = (uint32_t)sms;
	if (m->mem_suffix)
		snprintf(d->name, sizeof(d->name), "%s%u%s", m->name,
			 (unsigned)((mem + (1ull << 29)) >> 30), m->mem_suffix);
	else
		snprintf(d->name, sizeof(d->name), "%s", m->name);
	d->pci_domain = index / 8;
	d->pci_bus = pci_buses[index % 8];
	d->pci_device = 0;
	d->minor = index;
	make_uuid(instance, index, m->key, d);
	return 0;
}

int sim_config_parse_gpus(const char *spec, const char *instance, struct sim_device_desc *desc,
			  size_t max, char *err, size_t errlen)
{
	char buf[256];
	char *save = NULL, *item;
	unsigned n = 0;

	if (!spec || !*spec)
		spec = SIM_DEFAULT_GPUS;
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "CUSIM_GPUS is longer than %zu characters", sizeof(buf) - 1);
		return -EINVAL;
	}
	strcpy(buf, spec);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (n >= max) {
			snprintf(err, errlen, "CUSIM_GPUS names more than %zu devices", max);
			return -EINVAL;
		}
		memset(&desc[n], 0, sizeof(desc[n]));
		int r = parse_one(item, n, instance, &desc[n], err, errlen);
		if (r < 0)
			return r;
		n++;
	}
	if (n == 0) {
		snprintf(err, errlen, "CUSIM_GPUS=\"%s\" names no device; expected %s", spec,
			 SIM_GPUS_FORMS);
		return -EINVAL;
	}
	return (int)n;
}

/* Parses CUSIM_* decimal `name` into *v when set: [min, max], else -EINVAL naming it. */
static int env_u64(const char *name, uint64_t min, uint64_t max, const char *unit, uint64_t *v,
		   char *err, size_t errlen)
{
	const char *e = getenv(name);
	char *end;
	unsigned long long x;

	if (!e || !*e)
		return 0;
	errno = 0;
	x = strtoull(e, &end, 10);
	if (errno || *end || e[0] < '0' || e[0] > '9' || x < min || x > max) {
		snprintf(err, errlen, "%s=\"%s\" is invalid: expected %s from %llu to %llu", name, e,
			 unit, (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	*v = x;
	return 0;
}

int sim_config_um(struct sim_um_params *ret, char *err, size_t errlen)
{
	struct sim_um_params p = {
		.bandwidth = SIM_UM_DEFAULT_BANDWIDTH,
		.fault_ns = SIM_UM_DEFAULT_FAULT_NS,
		.batch_ns = SIM_UM_DEFAULT_BATCH_NS,
		.batch_faults = SIM_UM_DEFAULT_BATCH_FAULTS,
		.lru = SIM_UM_LRU_MIGRATION,
	};
	const char *bw = getenv("CUSIM_UM_BANDWIDTH"), *lru = getenv("CUSIM_UM_LRU");
	uint64_t batch = p.batch_faults;

	if (bw && *bw &&
	    (cs_size_parse(bw, &p.bandwidth) < 0 || p.bandwidth < (1ull << 20) ||
	     p.bandwidth > (1ull << 50))) {
		snprintf(err, errlen,
			 "CUSIM_UM_BANDWIDTH=\"%s\" is invalid: expected bytes per second as %s, "
			 "from 1MiB to 1PiB",
			 bw, CS_SIZE_FORMS);
		return -EINVAL;
	}
	if (env_u64("CUSIM_UM_FAULT_NS", 0, 1000000000ull, "nanoseconds", &p.fault_ns, err,
		    errlen) < 0 ||
	    env_u64("CUSIM_UM_BATCH_NS", 0, 1000000000ull, "nanoseconds", &p.batch_ns, err,
		    errlen) < 0 ||
	    env_u64("CUSIM_UM_BATCH_FAULTS", 1, 65536, "a number of faults", &batch, err, errlen) <
		0)
		return -EINVAL;
	p.batch_faults = (uint32_t)batch;
	if (lru && *lru) {
		if (strcmp(lru, "migration") == 0) {
			p.lru = SIM_UM_LRU_MIGRATION;
		} else if (strcmp(lru, "access") == 0) {
			p.lru = SIM_UM_LRU_ACCESS;
		} else {
			snprintf(err, errlen,
				 "CUSIM_UM_LRU=\"%s\" is invalid: expected migration (a chunk is "
				 "recent when it was last made resident, as the driver orders its "
				 "list) or access (also when a kernel used it)",
				 lru);
			return -EINVAL;
		}
	}
	*ret = p;
	return 0;
}
