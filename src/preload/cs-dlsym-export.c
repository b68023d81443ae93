/*
 * The exported dlsym: cs_dlsym_route decides (cs-dlsym.c), and a lookup that
 * is not ours goes to libc's dlsym by a tail call, so that libc sees our
 * caller's return address (RTLD_NEXT and the caller's namespace are
 * resolved from it). A call would make libcuslice the caller: another
 * interposer's dlsym(RTLD_NEXT, "x") would find its own x again.
 *
 * The jump is a guarantee, not the optimizer's choice: clang's musttail
 * makes any build emit it (or fail to compile); gcc has no musttail before
 * 15, so meson compiles this one file optimized (-O2, sibling calls on)
 * whatever the build type. tests/interpose/check-tailcall.sh checks the
 * built library's dlsym: one direct call (the router), then an indirect jmp,
 * and no indirect call.
 */
#include "cs-preload.h"

#include <dlfcn.h>

#if defined(__has_attribute)
#if __has_attribute(musttail)
#define CS_MUSTTAIL __attribute__((musttail))
#endif
#endif
#ifndef CS_MUSTTAIL
#define CS_MUSTTAIL
#endif

CS_EXPORT void *dlsym(void *handle, const char *name)
{
	struct cs_dlsym_route r = cs_dlsym_route(handle, name);

	if (!r.next)
		return r.answer;
	CS_MUSTTAIL return r.next(handle, name);
}

/*
 * Our dlsym under a name only we see: inside this library "dlsym" means
 * whichever definition comes first in the process, libc's when the driver
 * directory's shim loaded us after libc.
 */
#if defined(__clang__)
extern __typeof__(dlsym) cs_dlsym_export __attribute__((alias("dlsym")));
#else
extern __typeof__(dlsym) cs_dlsym_export __attribute__((alias("dlsym"), copy(dlsym)));
#endif
