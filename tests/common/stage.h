/*
 * Copies of build products that another uid can run, wherever the checkout
 * lives.
 *
 * Some tests drop to another uid (nobody, 65534) and run built programs or
 * load built libraries as that uid: the CLI refused by the daemon's socket,
 * libcuslice refused by the daemon. The build tree may lie under a directory
 * that uid cannot enter (a checkout in /root, mode 0700). There exec fails
 * with EACCES, the loader skips the library, and the test fails for a reason
 * that has nothing to do with what it checks (or, worse, passes on an error
 * message that happens to match).
 *
 * A stage is a new directory /tmp/cs-stage-XXXXXX, owned by the caller,
 * mode 0755: others may read and execute in it, only the owner may write, so
 * the other uid can plant nothing there. It holds byte-for-byte copies
 * (mode 0755) of the files put in it: the same programs, built the same way;
 * only their directory differs.
 */
#ifndef CS_TEST_STAGE_H
#define CS_TEST_STAGE_H

#include <stddef.h>

struct stage {
	char dir[64]; /* "" when no stage is open */
};

/* Creates an empty stage. Returns 0, or -errno (s->dir is then ""). */
int stage_open(struct stage *s);

/*
 * Copies the file src into the stage as `name` (NULL: src's base name) and
 * writes the copy's path to ret_path[0..len). Returns 0, or -errno (-EEXIST
 * when the stage already holds that name, -ENAMETOOLONG when the path does
 * not fit); ret_path is untouched on failure.
 */
int stage_add(struct stage *s, const char *src, const char *name, char *ret_path, size_t len);

/*
 * Copies the library `soname` as the dynamic loader would find it along
 * search_path (colon-separated directories, e.g. $LD_LIBRARY_PATH: the first
 * that holds it) into the stage under that name, so that the other uid's
 * LD_LIBRARY_PATH may name the stage instead. Returns 0, or -ENOENT when no
 * directory holds it, or stage_add's error.
 */
int stage_add_lib(struct stage *s, const char *search_path, const char *soname);

/* Removes the stage and everything in it; nothing when none is open. */
void stage_close(struct stage *s);

#endif
