/*
 * The second of two libraries defining the same names (libti-a.c is the
 * first): what dlsym(RTLD_NEXT) from libti-a must find.
 */
#include "libti.h"

int ti_sym(void)
{
	return 2;
}

int cu_ti_sym(void)
{
	return 2;
}

int nvti_sym(void)
{
	return 2;
}

int ti_b_id(void)
{
	return 2;
}
