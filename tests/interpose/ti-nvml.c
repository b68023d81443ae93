/*
 * cs-nvml-query --json, run and read (ti-nvml.h).
 */
#include "ti-nvml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *ti_nvml_query(char *const env[])
{
	char *argv[] = {(char *)ti_client("cs-nvml-query"), "--json", NULL};
	static struct ti_out o;
	cJSON *root;

	ti_run(argv, env, &o);
	ti_assert_status(&o, 0);
	root = cJSON_Parse(o.out);
	if (!root)
		ti_print("cs-nvml-query --json (not JSON)", &o);
	assert_non_null(root);
	return root;
}

const cJSON *ti_nvml_device(const cJSON *root, int index)
{
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(root, "devices"), *d;

	cJSON_ArrayForEach(d, devs) {
		if ((int)ti_json_u64(d, "index") == index)
			return d;
	}
	print_error("NVML: no device %d\n", index);
	fail();
	return NULL;
}

const cJSON *ti_nvml_device_named(const cJSON *root, const char *prefix)
{
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(root, "devices"), *d;

	cJSON_ArrayForEach(d, devs) {
		if (strncmp(ti_json_str(d, "name"), prefix, strlen(prefix)) == 0)
			return d;
	}
	print_error("NVML: no device named %s...\n", prefix);
	fail();
	return NULL;
}

uint64_t ti_json_u64(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < 0) {
		print_error("JSON: no non-negative number \"%s\"\n", key);
		fail();
	}
	return (uint64_t)v->valuedouble;
}

const char *ti_json_str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsString(v)) {
		print_error("JSON: no string \"%s\"\n", key);
		fail();
	}
	return v->valuestring;
}

int ti_nvml_nprocs(const cJSON *dev)
{
	return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(dev, "processes"));
}

int64_t ti_nvml_proc_used(const cJSON *dev, long pid)
{
	const cJSON *p;

	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(dev, "processes")) {
		if ((long)ti_json_u64(p, "pid") == pid)
			return (int64_t)ti_json_u64(p, "used_memory");
	}
	return -1;
}

int ti_nvml_samples_of(const cJSON *dev, const char *key, long pid, long *others)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(dev, key), *s;
	int n = 0;

	if (!cJSON_IsArray(arr)) {
		print_error("JSON: no array \"%s\" (the NVML query failed?)\n", key);
		fail();
	}
	if (others)
		*others = 0;
	cJSON_ArrayForEach(s, arr) {
		if ((long)ti_json_u64(s, "pid") == pid)
			n++;
		else if (others && !*others)
			*others = (long)ti_json_u64(s, "pid");
	}
	return n;
}
