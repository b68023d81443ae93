/*
 * dlsym(RTLD_NEXT) and dlsym(RTLD_DEFAULT) made from a library loaded after
 * libcuslice (libti-a), and RTLD_NEXT from the program itself. Prints one
 * line per lookup: what was found and, for ti_sym & co., what calling it
 * returns. test-dlsym runs it with and without LD_PRELOAD=libcuslice.so and
 * expects the same lines.
 */
#include <stdio.h>
#include <dlfcn.h>

#include "libti.h"
#include "ti-describe.h"

/* Looks name up from libti-a and prints the answer (and the call's result). */
static void from_a(int handle, const char *name, int call)
{
	void *p = ti_a_lookup(handle, name);
	char buf[256];

	printf("libti-a %s %s -> %s", handle == TI_HANDLE_NEXT ? "next" : "default", name,
	       ti_describe(p, buf, sizeof(buf)));
	if (p && call)
		printf(" = %d", ((int (*)(void))p)());
	printf("\n");
}

int main(void)
{
	char buf[256];

	/* Both libraries are loaded, a before b. */
	printf("direct ti_sym = %d, ti_b_id = %d\n", ti_sym(), ti_b_id());
	from_a(TI_HANDLE_NEXT, "ti_sym", 1);
	from_a(TI_HANDLE_NEXT, "cu_ti_sym", 1);
	from_a(TI_HANDLE_NEXT, "nvti_sym", 1);
	from_a(TI_HANDLE_NEXT, "ti_b_id", 1);
	from_a(TI_HANDLE_NEXT, "ti_a_lookup", 0);
	from_a(TI_HANDLE_NEXT, "puts", 0);
	from_a(TI_HANDLE_NEXT, "cuInit", 0);
	from_a(TI_HANDLE_NEXT, "cuMemAlloc_v2", 0);
	from_a(TI_HANDLE_DEFAULT, "ti_sym", 1);
	from_a(TI_HANDLE_DEFAULT, "cu_ti_sym", 1);
	from_a(TI_HANDLE_DEFAULT, "nvti_sym", 1);
	from_a(TI_HANDLE_DEFAULT, "cuInit", 0);
	printf("program next ti_sym -> %s\n", ti_describe(dlsym(RTLD_NEXT, "ti_sym"), buf,
							   sizeof(buf)));
	printf("program next cu_ti_sym -> %s\n",
	       ti_describe(dlsym(RTLD_NEXT, "cu_ti_sym"), buf, sizeof(buf)));
	printf("program default nvti_sym -> %s\n",
	       ti_describe(dlsym(RTLD_DEFAULT, "nvti_sym"), buf, sizeof(buf)));
	return 0;
}
