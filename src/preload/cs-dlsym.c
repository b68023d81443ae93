/*
 * dlsym's decisions: our wrappers for driver and NVML functions looked up
 * on their library's handle; invisible for every other lookup.
 *
 * NVIDIA's runtime dlopens libcuda.so.1 with RTLD_LOCAL and asks only for
 * cuGetProcAddress(_v2) by name; cuBLASLt asks for ~90 versioned names. Our
 * exported symbols are not what dlsym on such a handle finds, so we answer
 * those lookups ourselves: when the name is one we wrap and the lookup would
 * have found the real driver's (or our) definition, the caller gets our
 * wrapper.
 *
 * Everything else (other names, other libraries' definitions of these names,
 * RTLD_NEXT) goes to libc's dlsym by a tail call. That matters: glibc
 * decides what RTLD_NEXT (and RTLD_DEFAULT's namespace) mean from its
 * caller's return address, and a tail call leaves that address the one of
 * our caller, so the lookup behaves exactly as if we were not here. The
 * exported dlsym (cs-dlsym-export.c) is only that tail call around
 * cs_dlsym_route, which decides; the jump is guaranteed there, not left
 * to the optimizer.
 *
 * One unversioned definition answers references to dlsym@GLIBC_2.2.5 (old
 * binaries, libdl users) and dlsym@GLIBC_2.34 alike: the loader accepts a
 * base-version definition for a versioned reference.
 */
#include "cs-preload.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "cs-log.h"

typedef void *(*dlsym_fn)(void *, const char *);

static _Atomic(dlsym_fn) real_dlsym_p;

/* libc's dlsym, found by version (2.34 moved it from libdl into libc). */
static dlsym_fn find_real_dlsym(void)
{
	static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
	dlsym_fn f = NULL;

	/*
	 * Preloaded, libc comes after us. Loaded by the driver directory's shim
	 * (src/shim), we come after libc, and RTLD_NEXT does not see it: then
	 * libc's own handle answers.
	 */
	void *scopes[2] = {RTLD_NEXT, NULL};

	for (int k = 0; k < 2 && !f; k++) {
		if (k == 1)
			scopes[1] = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
		for (size_t i = 0; scopes[k] && i < sizeof(versions) / sizeof(versions[0]) && !f;
		     i++) {
			f = (dlsym_fn)dlvsym(scopes[k], "dlsym", versions[i]);
			if (f == cs_dlsym_export)
				f = NULL;
		}
	}
	if (f)
		atomic_store_explicit(&real_dlsym_p, f, memory_order_relaxed);
	return f;
}

void *cs_real_dlsym(void *handle, const char *name)
{
	dlsym_fn f = atomic_load_explicit(&real_dlsym_p, memory_order_relaxed);

	if (!f)
		f = find_real_dlsym();
	return f ? f(handle, name) : NULL;
}

/* dlopen(NULL): lookups on it search the global scope, like RTLD_DEFAULT. */
static void *program_handle(void)
{
	static _Atomic(void *) h;
	void *p = atomic_load_explicit(&h, memory_order_relaxed);

	if (!p) {
		p = dlopen(NULL, RTLD_NOW | RTLD_NOLOAD);
		atomic_store_explicit(&h, p, memory_order_relaxed);
	}
	return p;
}

static int compare_hook(const void *key, const void *elem)
{
	return strcmp(key, ((const struct cs_hook_name *)elem)->name);
}

enum hook_answer {
	ANSWER_PASS,	/* not ours: whatever libc says */
	ANSWER_WRAPPER,	/* our wrapper */
	ANSWER_NULL,	/* only our export would have been found: not there without us */
};

static enum hook_answer hook_lookup(void *handle, const char *name, void **wrapper)
{
	const struct cs_hook_name *h;
	void *found;

	h = bsearch(name, cs_hooks_by_name, CS_HOOK_COUNT, sizeof(cs_hooks_by_name[0]),
		    compare_hook);
	if (!h)
		return ANSWER_PASS;
	*wrapper = (void *)cs_hook_wrappers[h->id];
	found = cs_real_dlsym(handle, name);
	if (!found)
		return ANSWER_PASS;
	if (found == *wrapper) {
		/*
		 * A global lookup found our export. Without us it would have
		 * found the definition after us, if any: the driver when the
		 * program linked it, nothing when it did not. (A lookup on our
		 * own handle, or on a library that depends on us, finds the
		 * wrapper by right.)
		 */
		if (handle != RTLD_DEFAULT && handle != program_handle())
			return ANSWER_WRAPPER;
		return cs_real_dlsym(RTLD_NEXT, name) ? ANSWER_WRAPPER : ANSWER_NULL;
	}
	return found == cs_real_get(h->id) ? ANSWER_WRAPPER : ANSWER_PASS;
}

struct cs_dlsym_route cs_dlsym_route(void *handle, const char *name)
{
	struct cs_dlsym_route r = {NULL, NULL};
	dlsym_fn f;

	if (handle != RTLD_NEXT && !cs_process.skipped && ((name[0] == 'c' && name[1] == 'u') ||
				    (name[0] == 'n' && name[1] == 'v'))) {
		void *wrapper = NULL;

		switch (hook_lookup(handle, name, &wrapper)) {
		case ANSWER_WRAPPER:
			r.answer = wrapper;
			return r;
		case ANSWER_NULL:
			return r;
		case ANSWER_PASS:
			break;
		}
	}
	f = atomic_load_explicit(&real_dlsym_p, memory_order_relaxed);
	if (CS_UNLIKELY(!f)) {
		f = find_real_dlsym();
		if (!f)
			cs_log(CS_LOG_ERROR, CS_LOG_NAME, "libc's dlsym not found");
	}
	r.next = (void *(*)(void *, const char *))f;
	return r;
}
