/*
 * Per-device limits written by people: CUSLICE_MEM_LIMIT (sizes or
 * percentages of a device's memory), CUSLICE_CORE_LIMIT (the same syntax,
 * percentages only), and the same values in policies (cusliced, the Slurm
 * plugin).
 *
 *   8GiB                       every device
 *   50%                        every device, half of its memory
 *   0=8GiB,1=4GiB              per CUDA device ordinal, as the process
 *                              numbers devices (after CUDA_VISIBLE_DEVICES)
 *   GPU-1a2b=8GiB              per GPU UUID, or a prefix of one
 *   4GiB,0=8GiB                one bare value: the default for devices no
 *                              key names
 *
 * A VALUE is a size (cs_size_parse forms) or a percentage from 0 to 100 with
 * up to 4 decimals ("12.5%"); with CS_LIMIT_OVER (a group that
 * oversubscribes unified memory) up to 1000% ("150%": 1.5 x the GPU). When only percentages are accepted (core
 * limits), the '%' is optional: "30" and "30%" both mean 30%. A key is a
 * decimal ordinal or "GPU-"/"MIG-" followed by hex digits and dashes.
 * Nothing else is accepted: no blanks anywhere (a blank is more likely a
 * quoting mistake than intent), no empty items, no key named twice, at most
 * one default. A limit of 0 is valid (the device is unusable).
 *
 * Pure functions: no allocation, no global state; usable inside libcuslice.
 */
#ifndef CS_LIMITS_H
#define CS_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Same token sequence as include/cuslice/region.h, so either header may come first. */
#ifndef CS_LIMIT_NONE
#define CS_LIMIT_NONE UINT64_MAX
#endif

#define CS_LIMIT_RULES_MAX 32
/* Parse-time bound on ordinals; cs_limits_check_ordinals knows the real one. */
#define CS_LIMIT_ORDINAL_MAX 1023
#define CS_LIMIT_UUID_LEN 48		/* buffer for a UUID or prefix + NUL */
#define CS_LIMIT_UUID_MAX 40		/* "GPU-" + 36 characters: longer keys name no device */
#define CS_LIMIT_PPM_MAX 1000000u	/* 100% */
#define CS_LIMIT_OVER_PPM_MAX 10000000u	/* 1000%: CS_LIMIT_OVER's bound */

enum cs_limit_flags {
	CS_LIMIT_SIZES = 1,		/* values may be sizes */
	CS_LIMIT_PERCENT = 2,		/* values may be percentages */
	CS_LIMIT_OVER = 4,		/* percentages up to 1000% (oversubscribe mode) */
};

enum cs_limit_key {
	CS_LIMIT_KEY_ALL,		/* the default: every device no other rule names */
	CS_LIMIT_KEY_ORDINAL,
	CS_LIMIT_KEY_UUID,
};

struct cs_limit_rule {
	enum cs_limit_key key;
	int ordinal;			/* CS_LIMIT_KEY_ORDINAL */
	char uuid[CS_LIMIT_UUID_LEN];	/* CS_LIMIT_KEY_UUID: UUID or prefix, as written */
	bool percent;			/* ppm is the value, else bytes */
	uint64_t bytes;
	uint32_t ppm;			/* percent as parts per million: 12.5% = 125000 */
};

struct cs_limits {
	unsigned n;
	struct cs_limit_rule rule[CS_LIMIT_RULES_MAX];
	char var[32];			/* the variable parsed, for later messages */
};

/* A device as the process sees it, for cs_limits_resolve. */
struct cs_limit_device {
	int ordinal;			/* CUDA ordinal, -1 when unknown */
	const char *uuid;		/* "GPU-...", NULL when unknown */
	uint64_t total;			/* what 100% is: bytes of memory, or the caller's unit */
};

/*
 * Parses text, the value of environment variable `var`, accepting the value
 * forms in flags (CS_LIMIT_SIZES and/or CS_LIMIT_PERCENT). Returns 0 and fills
 * *out, or -EINVAL with *out untouched and a one-line message in err naming
 * var, the offending item and the accepted forms. err may be NULL.
 */
int cs_limits_parse(const char *var, const char *text, unsigned flags, struct cs_limits *out,
		    char *err, size_t errlen);

/*
 * The limit for device d: an ordinal rule for d->ordinal wins, then the UUID
 * rule with the longest key that prefixes d->uuid (case-insensitive), then
 * the default, else CS_LIMIT_NONE. A percentage resolves to
 * total * ppm / 10^6, rounded down.
 */
uint64_t cs_limits_resolve(const struct cs_limits *l, const struct cs_limit_device *d);

/*
 * -EINVAL with a message when a percentage rule is 0 %: for compute shares,
 * which would block every launch of the group forever.
 */
int cs_limits_check_shares(const struct cs_limits *l, char *err, size_t errlen);

/*
 * Returns 0, or -EINVAL with a message when an ordinal rule names a device
 * >= device_count (the process does not see it).
 */
int cs_limits_check_ordinals(const struct cs_limits *l, int device_count, char *err,
			     size_t errlen);

/*
 * Returns 0, or -EINVAL with a message when a UUID rule is the one that
 * decides the limit of more than one of the n devices: its key is a prefix
 * shared by several GPUs, where a unique prefix was meant.
 */
int cs_limits_check_uuids(const struct cs_limits *l, const struct cs_limit_device *devs,
			  unsigned n, char *err, size_t errlen);

/*
 * Returns 0, or -EINVAL with a message naming the key and the n GPUs when a
 * UUID rule prefixes none of uuids[0..n) (case-insensitive): the node's
 * GPUs, so that a mistyped UUID fails like a mistyped ordinal instead of
 * silently leaving a GPU unlimited. A rule for a GPU of the node that the
 * caller does not see is fine (one configuration may serve several jobs).
 */
int cs_limits_check_uuid_keys(const struct cs_limits *l, const char *const *uuids, unsigned n,
			      char *err, size_t errlen);

#endif
