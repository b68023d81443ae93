/*
 * The graphics-interop prototypes (cudaGL.h, cudaEGL.h, cudaVDPAU.h), for
 * sim-interop.c and the generated cuGetProcAddress table. sim.h comes first:
 * it selects every ABI variant's declaration.
 */
#ifndef SIM_INTEROP_H
#define SIM_INTEROP_H

#include "sim.h"

#include <vdpau/vdpau.h>

#include <cudaEGL.h>
#include <cudaGL.h>
#include <cudaVDPAU.h>

#endif
