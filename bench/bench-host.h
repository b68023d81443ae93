/* The machine a benchmark ran on, for the heading of its report. */
#ifndef BENCH_HOST_H
#define BENCH_HOST_H

#include <stddef.h>

/* The CPU's model name from /proc/cpuinfo, or "unknown CPU". */
void bench_cpu_model(char *buf, size_t len);

/* The 1, 5 and 15 minute load averages ("0.52 0.40 0.33"), or "unknown". */
void bench_load_average(char *buf, size_t len);

#endif
