/*
 * Kubernetes resource quantities ("3Gi", "1.5G", "500m", "12e3", "100").
 * Pure; unit-tested and fuzzable on its own.
 */
#ifndef K8S_QUANTITY_H
#define K8S_QUANTITY_H

#include <stdint.h>

/*
 * The quantity q times scale, rounded up to an integer (as Kubernetes
 * rounds a quantity up to the precision it keeps): with scale 1 a memory
 * amount in bytes, with scale 10000 a percentage in ppm. Grammar: an
 * optional '+', digits with an optional fraction, and an optional suffix:
 * Ki Mi Gi Ti Pi Ei (powers of 1024), n u m k M G T P E (powers of 1000),
 * or an exponent e<int> / E<int>. 0, -EINVAL (not a quantity, or negative),
 * or -ERANGE (the result does not fit in 63 bits).
 */
int k8s_quantity_scaled(const char *q, uint64_t scale, uint64_t *out);

#endif
