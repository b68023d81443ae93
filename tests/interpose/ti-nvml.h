/*
 * The NVML view as a monitoring tool gets it: cs-nvml-query --json run as a
 * child (under libcuslice when the environment says so), parsed.
 */
#ifndef TI_NVML_H
#define TI_NVML_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "ti.h"

/*
 * Runs cs-nvml-query --json with env (ti_run's form) and returns the parsed
 * document (free with cJSON_Delete). Fails the test, printing the output,
 * when it does not exit 0 or does not parse.
 */
cJSON *ti_nvml_query(char *const env[]);

/* Device `index` (NVML's numbering) of a document; fails the test when absent. */
const cJSON *ti_nvml_device(const cJSON *root, int index);

/* The device whose "name" starts with prefix; fails the test when there is none. */
const cJSON *ti_nvml_device_named(const cJSON *root, const char *prefix);

/* A non-negative integer member (exact up to 2^53); fails the test when absent. */
uint64_t ti_json_u64(const cJSON *o, const char *key);

/* A string member; fails the test when absent. */
const char *ti_json_str(const cJSON *o, const char *key);

/* Number of entries of a device's "processes" array. */
int ti_nvml_nprocs(const cJSON *dev);

/* used_memory of process pid on a device, or -1 when it is not listed. */
int64_t ti_nvml_proc_used(const cJSON *dev, long pid);

/*
 * The samples of pid in a device's array `key` ("process_samples",
 * "process_utilization"); *others (when not NULL) gets the pid of some other
 * process's sample, 0 when there is none. Fails the test when the array is
 * absent.
 */
int ti_nvml_samples_of(const cJSON *dev, const char *key, long pid, long *others);

#endif
