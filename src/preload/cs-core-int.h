/*
 * Internals shared by the launch gate (cs-core.c) and the compute controller
 * (cs-core-tick.c). See cs-core.c for the gate, cs-core-tick.c for the
 * controller and src/group/cs-core-ctl.h for the arithmetic.
 */
#ifndef CS_CORE_INT_H
#define CS_CORE_INT_H

#include "cs-preload.h"

#include "cs-core-ctl.h"

/* The controller's period: credit is added, and NVML asked, this often. */
#define CS_CORE_TICK_NS 5000000ull
/* A tick later than this earns no more than this (the rest of the gap is lost). */
#define CS_CORE_LATE_TICK_NS (4 * CS_CORE_TICK_NS)
/* A gate whose controller has been silent this long is ignored. */
#define CS_CORE_STALE_NS 500000000ull
/* A gate the scheduler holds is passed once cusliced has been silent this long. */
#define CS_SCHED_STALE_NS 2000000000ull
/* A waiting launch rechecks at least this often. */
#define CS_CORE_WAIT_NS 20000000ull

/* CLOCK_MONOTONIC now, ns. */
uint64_t cs_core_mono_ns(void);

/* Sleeps on a shared futex word while it holds val, at most ns. */
void cs_core_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ns);

/* Wakes every process waiting on a shared futex word. */
void cs_core_futex_wake_all(_Atomic uint32_t *word);

#endif
