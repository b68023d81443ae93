/*
 * The device memory a module image declares (cs-image.c): the floor that
 * libcuslice reserves before the driver loads a module. libc only, so that
 * the unit tests can build it alone.
 */
#ifndef CS_IMAGE_H
#define CS_IMAGE_H

#include <stdint.h>

/*
 * Bytes of __device__ variables a module image declares: a cubin's
 * .nv.global and .nv.global.init sections, a PTX text's module-scope
 * .global definitions, a fatbin's first uncompressed cubin (else PTX) entry,
 * a cudart fatbin wrapper's fatbin. 0 when unknown or unreadable. The
 * pointer is never trusted: it is read through process_vm_readv. Not
 * thread-safe (a static buffer streams PTX): libcuslice calls it under its
 * footprint lock.
 */
uint64_t cs_image_declared(const void *image);

/* The same for an image file. */
uint64_t cs_image_declared_file(const char *path);

#endif
