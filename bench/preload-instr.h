/*
 * preload-bench's instruction counts (preload-instr.c): the instructions
 * libcuslice adds to a call, counted by callgrind, bare and preloaded.
 */
#ifndef PRELOAD_INSTR_H
#define PRELOAD_INSTR_H

#include <stdbool.h>

/*
 * Sets this process's environment for its next child: a fresh simulator
 * instance (named from a counter) in `dir`, and with cuslice a fresh group
 * with the benchmark's limit under LD_PRELOAD=preload (preload-bench.c).
 */
void pb_child_env(const char *dir, const char *preload, bool cuslice, const char *core_limit);

/* `preload-bench instr OP N`: OP N times in one function callgrind counts. Exit status. */
int pb_instr_child(int argc, char **argv);

/*
 * Runs every OP bare and under `preload`, each under callgrind with two
 * counts of calls, and prints instructions per call. Prints a note and
 * returns when valgrind is not installed.
 */
void pb_instr_report(const char *self, const char *dir, const char *preload);

#endif
