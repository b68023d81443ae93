/* Unit tests of src/sim/instance/sim-config.c: CUSIM_GPUS parsing, UUIDs, instance names. */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sim-config.h"
#include "sim-um-lru.h"

static struct sim_device_desc desc[SIM_MAX_DEVICES];
static char err[1024];

static int parse(const char *spec, const char *instance)
{
	memset(desc, 0xa5, sizeof(desc));
	err[0] = '\0';
	return sim_config_parse_gpus(spec, instance, desc, SIM_MAX_DEVICES, err, sizeof(err));
}

/* Asserts that `spec` is refused and that the message names `needle` and the variable. */
static void expect_error(const char *spec, const char *needle)
{
	int r = parse(spec, "default");

	if (r != -EINVAL || !strstr(err, needle) || !strstr(err, "CUSIM_GPUS"))
		print_error("spec \"%s\": r=%d, err=\"%s\"; expected -EINVAL naming \"%s\"\n", spec,
			    r, err, needle);
	assert_int_equal(r, -EINVAL);
	assert_non_null(strstr(err, needle));
	assert_non_null(strstr(err, "CUSIM_GPUS"));
}

static const struct sim_model *model_of(unsigned i)
{
	return sim_config_model(&desc[i]);
}

static void test_config_default(void **state)
{
	(void)state;
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(parse(pass ? "" : NULL, "default"), 1);
		assert_string_equal(model_of(0)->key, "H100");
		assert_string_equal(desc[0].name, "NVIDIA H100 80GB HBM3");
		assert_int_equal(desc[0].total_mem, 80ull << 30);
		assert_int_equal(desc[0].sm_count, 132);
		assert_int_equal(desc[0].minor, 0);
		assert_int_equal(desc[0].pci_domain, 0);
		assert_int_equal(desc[0].pci_bus, 0x18);
		assert_int_equal(desc[0].pci_device, 0);
	}
	/* The default is exactly what SIM_DEFAULT_GPUS spells. */
	struct sim_device_desc d0 = desc[0];
	assert_int_equal(parse(SIM_DEFAULT_GPUS, "default"), 1);
	assert_memory_equal(&d0, &desc[0], sizeof(d0));
}

static void test_config_model_defaults(void **state)
{
	(void)state;
	for (size_t i = 0; i < sim_nmodels; i++) {
		const struct sim_model *m = &sim_models[i];

		assert_int_equal(parse(m->key, "default"), 1);
		assert_ptr_equal(model_of(0), m);
		assert_int_equal(desc[0].total_mem, m->default_mem);
		assert_int_equal(desc[0].sm_count, m->default_sms);
		assert_int_equal(strncmp(desc[0].name, m->name, strlen(m->name)), 0);
	}
	assert_int_equal(parse("T4", "default"), 1);
	assert_string_equal(desc[0].name, "Tesla T4");
	assert_int_equal(parse("V100", "default"), 1);
	assert_string_equal(desc[0].name, "Tesla V100-SXM2-32GB");
	/* Model names are case-insensitive. */
	assert_int_equal(parse("l40s", "default"), 1);
	assert_string_equal(model_of(0)->key, "L40S");
}

static void test_config_multiple(void **state)
{
	(void)state;
	assert_int_equal(parse("H100:80GiB:132,A100:40GiB:108,L4", "default"), 3);
	assert_string_equal(desc[0].name, "NVIDIA H100 80GB HBM3");
	assert_string_equal(desc[1].name, "NVIDIA A100-SXM4-40GB");
	assert_string_equal(desc[2].name, "NVIDIA L4");
	assert_int_equal(desc[1].total_mem, 40ull << 30);
	assert_int_equal(desc[1].sm_count, 108);
	assert_int_equal(desc[2].total_mem, 24ull << 30);
	assert_int_equal(desc[2].sm_count, 58);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(desc[i].minor, i);
	/* Empty items (",,") are skipped, like strtok does. */
	assert_int_equal(parse("A10,,T4", "default"), 2);
	assert_string_equal(model_of(1)->key, "T4");
}

static void test_config_sm_override(void **state)
{
	(void)state;
	assert_int_equal(parse("H100:80GiB:66", "default"), 1);
	assert_int_equal(desc[0].sm_count, 66);
	/* Empty MEMORY keeps the model's memory. */
	assert_int_equal(parse("L4::20", "default"), 1);
	assert_int_equal(desc[0].sm_count, 20);
	assert_int_equal(desc[0].total_mem, 24ull << 30);
	assert_int_equal(parse("A100:40G:1", "default"), 1);
	assert_int_equal(desc[0].sm_count, 1);
	assert_int_equal(parse("A100:40G:1024", "default"), 1);
	assert_int_equal(desc[0].sm_count, 1024);
	/* Empty SMS keeps the model's count. */
	assert_int_equal(parse("A100:40G:", "default"), 1);
	assert_int_equal(desc[0].sm_count, 108);
}

static void test_config_memory(void **state)
{
	(void)state;
	assert_int_equal(parse("H100:40GiB", "default"), 1);
	assert_int_equal(desc[0].total_mem, 40ull << 30);
	/* The marketing name follows the configured memory. */
	assert_string_equal(desc[0].name, "NVIDIA H100 40GB HBM3");
	assert_int_equal(parse("A100:80G", "default"), 1);
	assert_string_equal(desc[0].name, "NVIDIA A100-SXM4-80GB");
	assert_int_equal(parse("H100:1.5G", "default"), 1);
	assert_int_equal(desc[0].total_mem, 1610612736);
	/* Rounded down to 2 MiB: 10^9 bytes is 476 whole 2 MiB pages. */
	assert_int_equal(parse("H100:1000000000", "default"), 1);
	assert_int_equal(desc[0].total_mem, 476ull * (2u << 20));
	assert_int_equal(parse("H100:40GB", "default"), 1);
	assert_int_equal(desc[0].total_mem, 40000000000ull & ~((2ull << 20) - 1));
	assert_int_equal(desc[0].total_mem % (2u << 20), 0);
	/* Bounds: 64 MiB and 16 TiB are accepted. */
	assert_int_equal(parse("T4:64MiB", "default"), 1);
	assert_int_equal(desc[0].total_mem, 64ull << 20);
	assert_int_equal(parse("T4:16TiB", "default"), 1);
	assert_int_equal(desc[0].total_mem, 16ull << 40);
	/* 64 MiB + 1 byte rounds down to 64 MiB. */
	assert_int_equal(parse("T4:67108865", "default"), 1);
	assert_int_equal(desc[0].total_mem, 64ull << 20);
}

static void test_config_errors(void **state)
{
	char long_spec[300];

	(void)state;
	expect_error("X100", "\"X100\"");
	expect_error("H100,Z9", "\"Z9\"");
	expect_error("H100,Z9", "device 1");
	expect_error("H100:80G:132:4", "too many");
	expect_error("H100:lots", "\"lots\"");
	expect_error("H100:1MiB", "\"1MiB\"");
	expect_error("H100:67108863", "\"67108863\"");
	expect_error("H100:17TiB", "\"17TiB\"");
	expect_error("H100:-1G", "\"-1G\"");
	expect_error("H100:80G:0", "\"0\"");
	expect_error("H100:80G:1025", "\"1025\"");
	expect_error("H100:80G:-1", "\"-1\"");
	expect_error("H100:80G:abc", "\"abc\"");
	expect_error("H100:80G:12x", "\"12x\"");
	expect_error(",", "names no device");
	expect_error(",,,", "names no device");
	/* The model, memory and SM messages say what is accepted. */
	expect_error("X100", "H100, H200, A100");
	expect_error("H100:lots", "GiB");
	expect_error("H100:80G:0", "1 to 1024");

	memset(long_spec, 0, sizeof(long_spec));
	for (size_t i = 0; i + 5 < sizeof(long_spec); i += 5)
		memcpy(long_spec + i, "H100,", 5);
	expect_error(long_spec, "longer than 255");
}

static void test_config_too_many_devices(void **state)
{
	char spec[256] = "";
	struct sim_device_desc small[2];

	(void)state;
	for (int i = 0; i < SIM_MAX_DEVICES; i++)
		strcat(spec, i ? ",T4" : "T4");
	assert_int_equal(parse(spec, "default"), SIM_MAX_DEVICES);
	strcat(spec, ",T4");
	expect_error(spec, "more than 16 devices");
	/* The limit is the caller's array size. */
	assert_int_equal(sim_config_parse_gpus("T4,T4,T4", "x", small, 2, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "more than 2 devices"));
	assert_int_equal(sim_config_parse_gpus("T4,T4", "x", small, 2, err, sizeof(err)), 2);
}

static bool uuid_well_formed(const struct sim_device_desc *d)
{
	static const char hex[] = "0123456789abcdef";
	const char *u = d->uuid;
	char again[SIM_UUID_LEN];

	if (strlen(u) != 40 || strncmp(u, "GPU-", 4) != 0)
		return false;
	for (int i = 4; i < 40; i++) {
		bool dash = i == 12 || i == 17 || i == 22 || i == 27;
		if (dash ? u[i] != '-' : !strchr(hex, u[i]) || u[i] == '\0')
			return false;
	}
	/* RFC 4122 version 4, variant 10xx, as real GPU UUIDs. */
	if (u[18] != '4' || !strchr("89ab", u[23]))
		return false;
	/* The string spells the bytes. */
	snprintf(again, sizeof(again),
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 d->uuid_bytes[0], d->uuid_bytes[1], d->uuid_bytes[2], d->uuid_bytes[3],
		 d->uuid_bytes[4], d->uuid_bytes[5], d->uuid_bytes[6], d->uuid_bytes[7],
		 d->uuid_bytes[8], d->uuid_bytes[9], d->uuid_bytes[10], d->uuid_bytes[11],
		 d->uuid_bytes[12], d->uuid_bytes[13], d->uuid_bytes[14], d->uuid_bytes[15]);
	return strcmp(again, u) == 0;
}

static void test_config_uuid(void **state)
{
	struct sim_device_desc first[SIM_MAX_DEVICES];
	const char *spec = "H100,H100,A100,T4,H100,H100,H100,H100,H100,H100";
	int n;

	(void)state;
	n = parse(spec, "inst-a");
	assert_int_equal(n, 10);
	memcpy(first, desc, sizeof(first));
	for (int i = 0; i < n; i++) {
		assert_true(uuid_well_formed(&desc[i]));
		for (int j = 0; j < i; j++) {
			assert_string_not_equal(desc[i].uuid, desc[j].uuid);
			assert_memory_not_equal(desc[i].uuid_bytes, desc[j].uuid_bytes, 16);
		}
	}
	/* Stable: the same instance and spec always give the same UUIDs. */
	assert_int_equal(parse(spec, "inst-a"), n);
	for (int i = 0; i < n; i++) {
		assert_string_equal(desc[i].uuid, first[i].uuid);
		assert_memory_equal(desc[i].uuid_bytes, first[i].uuid_bytes, 16);
	}
	/* Another instance gets other UUIDs, device by device. */
	assert_int_equal(parse(spec, "inst-b"), n);
	for (int i = 0; i < n; i++)
		assert_string_not_equal(desc[i].uuid, first[i].uuid);
	/* The model is part of the identity; memory and SMs are not. */
	assert_int_equal(parse("A100", "inst-a"), 1);
	assert_string_not_equal(desc[0].uuid, first[0].uuid);
	assert_int_equal(parse("H100:40G:12", "inst-a"), 1);
	assert_string_equal(desc[0].uuid, first[0].uuid);
}

static void test_config_pci(void **state)
{
	static const uint32_t buses[8] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};
	char spec[256] = "";

	(void)state;
	for (int i = 0; i < SIM_MAX_DEVICES; i++)
		strcat(spec, i ? ",A10" : "A10");
	assert_int_equal(parse(spec, "default"), SIM_MAX_DEVICES);
	for (unsigned i = 0; i < SIM_MAX_DEVICES; i++) {
		assert_int_equal(desc[i].pci_bus, buses[i % 8]);
		assert_int_equal(desc[i].pci_domain, i / 8);
		assert_int_equal(desc[i].pci_device, 0);
		assert_int_equal(desc[i].minor, i);
		/* (domain, bus) pairs are unique. */
		for (unsigned j = 0; j < i; j++)
			assert_false(desc[i].pci_domain == desc[j].pci_domain &&
				     desc[i].pci_bus == desc[j].pci_bus);
	}
}

static void test_config_model_lookup(void **state)
{
	struct sim_device_desc d = {0};

	(void)state;
	d.model = 2;
	assert_ptr_equal(sim_config_model(&d), &sim_models[2]);
	/* An out-of-range index (a corrupt instance) falls back to the first model. */
	d.model = (uint32_t)sim_nmodels;
	assert_ptr_equal(sim_config_model(&d), &sim_models[0]);
	d.model = UINT32_MAX;
	assert_ptr_equal(sim_config_model(&d), &sim_models[0]);
}

static void expect_instance(const char *value, const char *want)
{
	const char *name = NULL;

	if (value)
		setenv("CUSIM_INSTANCE", value, 1);
	else
		unsetenv("CUSIM_INSTANCE");
	assert_int_equal(sim_config_instance(&name, err, sizeof(err)), 0);
	assert_string_equal(name, want);
}

static void expect_bad_instance(const char *value)
{
	const char *name = "untouched";

	setenv("CUSIM_INSTANCE", value, 1);
	err[0] = '\0';
	assert_int_equal(sim_config_instance(&name, err, sizeof(err)), -EINVAL);
	assert_string_equal(name, "untouched");
	assert_non_null(strstr(err, "CUSIM_INSTANCE"));
	assert_non_null(strstr(err, value));
	assert_non_null(strstr(err, "[A-Za-z0-9._-]"));
}

static void test_config_instance_name(void **state)
{
	char n64[65], n65[66];

	(void)state;
	expect_instance(NULL, "default");
	expect_instance("", "default");
	expect_instance("ci-job_42.a", "ci-job_42.a");
	expect_instance("-x", "-x");
	expect_instance("a.", "a.");
	memset(n64, 'a', 64);
	n64[64] = '\0';
	expect_instance(n64, n64);

	memset(n65, 'b', 65);
	n65[65] = '\0';
	expect_bad_instance(n65);
	expect_bad_instance(".hidden");
	expect_bad_instance("..");
	expect_bad_instance("a/b");
	expect_bad_instance("../etc");
	expect_bad_instance("has space");
	expect_bad_instance("tab\t");
	expect_bad_instance("uni\xc3\xa9");
	unsetenv("CUSIM_INSTANCE");
}

static const char *const um_vars[] = {"CUSIM_UM_BANDWIDTH", "CUSIM_UM_FAULT_NS",
				      "CUSIM_UM_BATCH_NS", "CUSIM_UM_BATCH_FAULTS", "CUSIM_UM_LRU"};

static void um_unset(void)
{
	for (size_t i = 0; i < sizeof(um_vars) / sizeof(um_vars[0]); i++)
		unsetenv(um_vars[i]);
}

/* name=value is refused with a message naming both (and the accepted form's word). */
static void expect_bad_um(const char *name, const char *value, const char *form)
{
	struct sim_um_params p;

	um_unset();
	setenv(name, value, 1);
	assert_int_equal(sim_config_um(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, name));
	assert_non_null(strstr(err, value));
	assert_non_null(strstr(err, form));
	um_unset();
}

/* The unified-memory parameters: defaults, each variable, and what is refused. */
static void test_config_um(void **state)
{
	struct sim_um_params p;

	(void)state;
	um_unset();
	assert_int_equal(sim_config_um(&p, err, sizeof(err)), 0);
	assert_int_equal(p.bandwidth, 25000000000ull);
	assert_int_equal(p.fault_ns, 10000);
	assert_int_equal(p.batch_ns, 50000);
	assert_int_equal(p.batch_faults, 256);
	assert_int_equal(p.lru, SIM_UM_LRU_MIGRATION);
	setenv("CUSIM_UM_BANDWIDTH", "4GiB", 1);
	setenv("CUSIM_UM_FAULT_NS", "0", 1);
	setenv("CUSIM_UM_BATCH_NS", "1000000000", 1);
	setenv("CUSIM_UM_BATCH_FAULTS", "65536", 1);
	setenv("CUSIM_UM_LRU", "access", 1);
	assert_int_equal(sim_config_um(&p, err, sizeof(err)), 0);
	assert_int_equal(p.bandwidth, 4ull << 30);
	assert_int_equal(p.fault_ns, 0);
	assert_int_equal(p.batch_ns, 1000000000);
	assert_int_equal(p.batch_faults, 65536);
	assert_int_equal(p.lru, SIM_UM_LRU_ACCESS);
	expect_bad_um("CUSIM_UM_BANDWIDTH", "fast", "bytes per second");
	expect_bad_um("CUSIM_UM_BANDWIDTH", "1KiB", "from 1MiB");
	expect_bad_um("CUSIM_UM_FAULT_NS", "-1", "nanoseconds");
	expect_bad_um("CUSIM_UM_FAULT_NS", "1000000001", "nanoseconds");
	expect_bad_um("CUSIM_UM_BATCH_NS", "10us", "nanoseconds");
	expect_bad_um("CUSIM_UM_BATCH_FAULTS", "0", "faults");
	expect_bad_um("CUSIM_UM_BATCH_FAULTS", "65537", "faults");
	expect_bad_um("CUSIM_UM_LRU", "lfu", "migration");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_default),
		cmocka_unit_test(test_config_model_defaults),
		cmocka_unit_test(test_config_multiple),
		cmocka_unit_test(test_config_sm_override),
		cmocka_unit_test(test_config_memory),
		cmocka_unit_test(test_config_errors),
		cmocka_unit_test(test_config_too_many_devices),
		cmocka_unit_test(test_config_uuid),
		cmocka_unit_test(test_config_pci),
		cmocka_unit_test(test_config_model_lookup),
		cmocka_unit_test(test_config_instance_name),
		cmocka_unit_test(test_config_um),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
