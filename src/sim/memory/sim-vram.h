/*
 * Internal interface of the device-memory arena (sim-vram.c) beyond sim.h.
 */
#ifndef SIM_VRAM_H
#define SIM_VRAM_H

#include "sim-shared.h"

/* Epoch of per-thread state, bumped in a forked child (sim-state.c). */
extern _Atomic unsigned sim_epoch;

/* Creates the memfd and maps one span per instance device. Returns 0 or -errno. */
int sim_vram_init(struct sim_shared *sh);

/* In a forked child: drop the parent's arena and registry without touching them. */
void sim_vram_forget_after_fork(void);

#endif
