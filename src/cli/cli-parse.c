/*
 * Checks of option values. The messages are part of the interface (tests
 * compare them): they name the option, repeat the value, and give the
 * accepted form.
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "cs-group.h"
#include "cs-size.h"

#define GPU_FORMS "expected a comma list of GPU ordinals or UUIDs, e.g. 0,1 or GPU-1a2b3c4d"
#define CORES_FORMS "expected a percentage from 1 to 100, up to 4 decimals (e.g. 30 or 12.5%)"
#define GROUP_FORMS "expected 1 to 63 characters of A-Z a-z 0-9 . _ -, not starting with . or -"
/* At most this many GPUs in --gpu: a group has CS_GROUP_MAX_DEVICES device entries. */
#define MAX_GPUS CS_GROUP_MAX_DEVICES

/*
 * A percentage "D[.DDDD][%]": at most 4 decimals (libcuslice keeps parts per
 * million), the sign required when `need_sign`. 0 and *ret set, or -EINVAL.
 */
static int parse_percent(const char *s, bool need_sign, double *ret)
{
	unsigned long whole = 0, frac = 0, scale = 1;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		whole = whole * 10 + (unsigned long)(*p - '0');
		if (whole > 1000)
			return -EINVAL;
	}
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		for (; isdigit((unsigned char)*p); p++) {
			if (scale == 10000)
				return -EINVAL;
			frac = frac * 10 + (unsigned long)(*p - '0');
			scale *= 10;
		}
	}
	if (*p == '%')
		p++;
	else if (need_sign)
		return -EINVAL;
	if (*p)
		return -EINVAL;
	*ret = (double)whole + (double)frac / (double)scale;
	return 0;
}

int cli_parse_mem(const char *opt, const char *s, uint64_t *ret_bytes, double *ret_percent,
		  char *err, size_t errlen)
{
	return cli_parse_mem_upto(opt, s, 100, ret_bytes, ret_percent, err, errlen);
}

int cli_parse_mem_upto(const char *opt, const char *s, unsigned max_percent, uint64_t *ret_bytes,
		       double *ret_percent, char *err, size_t errlen)
{
	size_t n = strlen(s);
	double pct;
	int e;

	if (n && s[n - 1] == '%') {
		if (parse_percent(s, true, &pct) < 0 || pct > (double)max_percent) {
			snprintf(err, errlen,
				 "%s \"%s\": expected a percentage of the GPU's memory from 0%% to "
				 "%u%%, up to 4 decimals (e.g. 50%%)",
				 opt, s, max_percent);
			return -EINVAL;
		}
		*ret_bytes = 0;
		*ret_percent = pct;
		return 0;
	}
	e = cs_size_parse(s, ret_bytes);
	if (e == -ERANGE) {
		snprintf(err, errlen, "%s \"%s\": too large (a size must fit in 64 bits)", opt, s);
		return -EINVAL;
	}
	if (e < 0) {
		snprintf(err, errlen,
			 "%s \"%s\": not a size; expected %s; or a percentage such as 50%%", opt, s,
			 CS_SIZE_FORMS);
		return -EINVAL;
	}
	*ret_percent = -1.0;
	return 0;
}

int cli_parse_cores(const char *opt, const char *s, double *ret_percent, char *err, size_t errlen)
{
	double pct;

	if (parse_percent(s, false, &pct) < 0 || pct < 1.0 || pct > 100.0) {
		snprintf(err, errlen, "%s \"%s\": %s", opt, s, CORES_FORMS);
		return -EINVAL;
	}
	*ret_percent = pct;
	return 0;
}

int cli_parse_priority(const char *opt, const char *s, int *ret, char *err, size_t errlen)
{
	int p = cs_priority_parse(s);

	if (p < 0) {
		snprintf(err, errlen, "%s \"%.64s\": expected high, normal or best-effort", opt, s);
		return -EINVAL;
	}
	*ret = p + 1;
	return 0;
}

/* An ordinal (digits) or a "GPU-"/"MIG-" UUID or UUID prefix, as CUDA_VISIBLE_DEVICES takes. */
static bool gpu_item_valid(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return false;
	if (isdigit((unsigned char)s[0])) {
		if (n > 4)
			return false;
		for (i = 0; i < n; i++)
			if (!isdigit((unsigned char)s[i]))
				return false;
		return true;
	}
	if (n <= 4 || (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0))
		return false;
	i = 4;
	/* The older MIG form: "MIG-GPU-<uuid>/<gi>/<ci>". */
	if (s[0] == 'M' && n > 8 && strncmp(s, "MIG-GPU-", 8) == 0)
		i = 8;
	for (; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!isxdigit(ch) && ch != '-' && !(ch == '/' && s[0] == 'M'))
			return false;
	}
	return true;
}

/* The same GPU twice: equal text, or equal ordinals ("1" and "01"). */
static bool gpu_item_same(const char *a, size_t an, const char *b, size_t bn)
{
	if (isdigit((unsigned char)a[0]) && isdigit((unsigned char)b[0])) {
		while (an > 1 && *a == '0')
			a++, an--;
		while (bn > 1 && *b == '0')
			b++, bn--;
	}
	return an == bn && strncasecmp(a, b, an) == 0;
}

int cli_parse_gpus(const char *opt, const char *s, char *err, size_t errlen)
{
	const char *item[MAX_GPUS];
	size_t len[MAX_GPUS];
	unsigned n = 0;
	const char *p = s;

	if (!*s) {
		snprintf(err, errlen, "%s \"\": %s", opt, GPU_FORMS);
		return -EINVAL;
	}
	for (;;) {
		const char *end = strchr(p, ',');
		size_t l = end ? (size_t)(end - p) : strlen(p);

		if (l == 0) {
			snprintf(err, errlen, "%s \"%s\": empty item; %s", opt, s, GPU_FORMS);
			return -EINVAL;
		}
		if (!gpu_item_valid(p, l)) {
			snprintf(err, errlen,
				 "%s \"%s\": \"%.*s\" is not a GPU ordinal or UUID; %s", opt, s,
				 (int)l, p, GPU_FORMS);
			return -EINVAL;
		}
		for (unsigned i = 0; i < n; i++) {
			if (gpu_item_same(item[i], len[i], p, l)) {
				snprintf(err, errlen, "%s \"%s\": GPU %.*s is listed twice", opt, s,
					 (int)l, p);
				return -EINVAL;
			}
		}
		if (n == MAX_GPUS) {
			snprintf(err, errlen, "%s \"%s\": more than %d GPUs", opt, s, MAX_GPUS);
			return -EINVAL;
		}
		item[n] = p;
		len[n++] = l;
		if (!end)
			return 0;
		p = end + 1;
	}
}

int cli_parse_group(const char *opt, const char *s, char *err, size_t errlen)
{
	if (cs_group_name_valid(s))
		return 0;
	snprintf(err, errlen, "%s \"%s\": not a valid group name; %s", opt, s, GROUP_FORMS);
	return -EINVAL;
}
