/*
 * Files and directories for the test harnesses: a private directory's
 * removal and reading a whole (small) file, such as a child's log.
 * Uses no cmocka assertion.
 */
#ifndef CS_TEST_FILES_H
#define CS_TEST_FILES_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Removes path and everything under it, not following symbolic links;
 * what cannot be removed is left (a test's cleanup must not fail the test).
 */
void th_rm_tree(const char *path);

/*
 * Reads the first len - 1 bytes of path into buf, NUL-terminated. Returns
 * the number of bytes read, or -errno (buf then holds "").
 */
ssize_t th_read_file(const char *path, char *buf, size_t len);

#endif
