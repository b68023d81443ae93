/*
 * Load-address-independent names of code addresses (ti-describe.h).
 */
#include "ti-describe.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *ti_describe(const void *p, char *buf, size_t len)
{
	Dl_info info;
	const char *file;

	if (!p) {
		snprintf(buf, len, "NULL");
		return buf;
	}
	if (!dladdr(p, &info) || !info.dli_fname) {
		snprintf(buf, len, "?");
		return buf;
	}
	file = strrchr(info.dli_fname, '/');
	file = file ? file + 1 : info.dli_fname;
	if (!info.dli_sname)
		snprintf(buf, len, "%s:?", file);
	else if (info.dli_saddr != p)
		snprintf(buf, len, "%s:%s+0x%zx", file, info.dli_sname,
			 (size_t)((uintptr_t)p - (uintptr_t)info.dli_saddr));
	else
		snprintf(buf, len, "%s:%s", file, info.dli_sname);
	return buf;
}
