/*
 * The first of two libraries defining the same names (see libti.h). Its
 * lookups are made from here, so RTLD_NEXT means "after libti-a": libti-b's
 * definitions, whether or not libcuslice's dlsym sits between.
 */
#include "libti.h"

#include <dlfcn.h>

int ti_sym(void)
{
	return 1;
}

int cu_ti_sym(void)
{
	return 1;
}

int nvti_sym(void)
{
	return 1;
}

void *ti_a_lookup(int handle, const char *name)
{
	void *p = dlsym(handle == TI_HANDLE_NEXT ? RTLD_NEXT : RTLD_DEFAULT, name);

	/*
	 * Not a tail call: glibc takes the caller of dlsym from the return
	 * address, and a jump to dlsym would make that the program, not us.
	 */
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}
