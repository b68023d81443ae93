/*
 * Two tiny libraries for dlsym transparency (tests/interpose/test-dlsym.c):
 * libti-a and libti-b both define ti_sym, cu_ti_sym and nvti_sym (the last
 * two with the "cu" / "nv" prefixes libcuslice's dlsym looks at first);
 * libti-a's return 1, libti-b's 2. A program links libti-a before libti-b.
 */
#ifndef LIBTI_H
#define LIBTI_H

#define TI_HANDLE_NEXT 0
#define TI_HANDLE_DEFAULT 1

int ti_sym(void);
int cu_ti_sym(void);
int nvti_sym(void);

/* 2: libti-b is loaded (a program references it so the linker keeps it). */
int ti_b_id(void);

/*
 * dlsym(RTLD_NEXT or RTLD_DEFAULT, name) called from inside libti-a, so that
 * glibc resolves RTLD_NEXT relative to libti-a.
 */
void *ti_a_lookup(int handle, const char *name);

#endif
