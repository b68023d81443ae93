/*
 * Names a code address the same way in every process, whatever the load
 * addresses: "libcuda.so.1:cuMemAlloc_v2", "NULL". Helper programs print
 * these so that a test can compare runs with and without libcuslice.
 */
#ifndef TI_DESCRIBE_H
#define TI_DESCRIBE_H

#include <stddef.h>

/*
 * Writes into buf "NULL" for NULL, else "<file name of the object>:<symbol>"
 * (dladdr; "+0x<offset>" appended when p is not the symbol's start, "?" for
 * an unnamed address). Returns buf.
 */
const char *ti_describe(const void *p, char *buf, size_t len);

#endif
