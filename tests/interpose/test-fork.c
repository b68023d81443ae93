/*
 * Fork after CUDA init under libcuslice. The program is linked with libcuda
 * and re-runs itself under LD_PRELOAD=libcuslice.so (group "fork", limit
 * 4 GiB, contexts 64 MiB). The parent initialises CUDA, allocates 256 MiB
 * and forks; the child is a new member of the group: it cuInit's, retains
 * its primary context and allocates 128 MiB. The test reads the group
 * region directly (src/group/cs-group.h) through a handle of its own:
 *   both alive:   2 contexts + 256 MiB + 128 MiB, each process its share;
 *   child exited (without freeing) and reclaimed: less exactly its context
 *                 and its 128 MiB;
 *   parent frees: its context only; releases it: 0.
 *
 * The child never uses cmocka's asserts (a failure would longjmp into a copy
 * of the runner): it reports through a pipe and its exit status.
 */
#include "ti.h"

#include <cuda.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cs-group.h"
#include "cst.h"

#define CTX (64 * TI_MiB)

static struct cs_group_handle H;	/* the test's own handle on the group */
static struct cs_group_dev *dev;	/* the group's entry for GPU 0 */
static unsigned gdev;

static const char *group_dir(void)
{
	return getenv("CUSLICE_SHM_DIR");
}

/* The slot of process pid in the group, NULL when it has none. */
static struct cs_group_proc *slot_of(pid_t pid)
{
	for (unsigned i = 0; i < CS_GROUP_MAX_PROCS; i++) {
		struct cs_group_proc *p = &H.g->proc[i];

		if (atomic_load(&p->state) == CS_GROUP_PROC_LIVE && p->pid == pid)
			return p;
	}
	return NULL;
}

static unsigned live_slots(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < CS_GROUP_MAX_PROCS; i++)
		n += atomic_load(&H.g->proc[i].state) == CS_GROUP_PROC_LIVE;
	return n;
}

/* Opens the test's handle on the group and finds device 0's entry (after cuInit). */
static void open_group(void)
{
	char uuid[CS_GROUP_UUID_LEN];
	const unsigned char *b;
	CUuuid u;
	CUdevice d;

	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&d, 0));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetUuid_v2(&u, d));
	b = (const unsigned char *)u.bytes;
	snprintf(uuid, sizeof(uuid),
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
	assert_int_equal(cs_group_open(&H, group_dir(), "fork"), 0);
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		if (atomic_load(&H.g->dev[i].state) == CS_GROUP_DEV_READY &&
		    strcmp(H.g->dev[i].uuid, uuid) == 0) {
			dev = &H.g->dev[i];
			gdev = i;
			return;
		}
	}
	print_error("group fork has no entry for %s\n", uuid);
	fail();
}

/* The forked child's part; returns its exit status (0: done as asked). */
static int child_main(int report, int go)
{
	CUdevice d;
	CUcontext ctx;
	CUdeviceptr p;
	char c = 'f';
	CUresult r;

	r = cuInit(0);
	if (r == CUDA_SUCCESS)
		r = cuDeviceGet(&d, 0);
	if (r == CUDA_SUCCESS)
		r = cuDevicePrimaryCtxRetain(&ctx, d);
	if (r == CUDA_SUCCESS)
		r = cuCtxSetCurrent(ctx);
	if (r == CUDA_SUCCESS)
		r = cuMemAlloc(&p, 128 * TI_MiB);
	if (r != CUDA_SUCCESS) {
		dprintf(2, "fork child: CUDA call failed: %d\n", (int)r);
		(void)!write(report, &c, 1);
		return 1;
	}
	c = 'r';
	(void)!write(report, &c, 1);
	/* Holds its memory until told to go, then exits without freeing it. */
	(void)!read(go, &c, 1);
	return 0;
}

static void test_fork_child_is_a_member(void **state)
{
	int to_parent[2], to_child[2], status;
	struct cs_group_proc *mine, *its;
	CUdeviceptr buf;
	CUdevice d;
	pid_t kid;
	char c = 0;

	(void)state;
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&buf, 256 * TI_MiB));
	open_group();
	assert_int_equal(atomic_load(&dev->used), CTX + 256 * TI_MiB);
	mine = slot_of(getpid());
	assert_non_null(mine);
	assert_int_equal(atomic_load(&mine->used[gdev]), CTX + 256 * TI_MiB);

	assert_int_equal(pipe(to_parent), 0);
	assert_int_equal(pipe(to_child), 0);
	fflush(NULL);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		close(to_parent[0]);
		close(to_child[1]);
		_exit(child_main(to_parent[1], to_child[0]));
	}
	close(to_parent[1]);
	close(to_child[0]);
	assert_int_equal(read(to_parent[0], &c, 1), 1);
	assert_int_equal(c, 'r');

	/* Both alive: two contexts and both allocations, each process its own. */
	assert_int_equal(atomic_load(&dev->used), 2 * CTX + 256 * TI_MiB + 128 * TI_MiB);
	its = slot_of(kid);
	assert_non_null(its);
	assert_int_equal(atomic_load(&its->used[gdev]), CTX + 128 * TI_MiB);
	assert_int_equal(atomic_load(&mine->used[gdev]), CTX + 256 * TI_MiB);
	assert_int_equal(live_slots(), 2);

	/* The child exits holding its memory; a reclaim gives back exactly its share. */
	assert_int_equal(write(to_child[1], "x", 1), 1);
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(cs_group_reclaim(&H), 1);
	assert_int_equal(atomic_load(&dev->used), CTX + 256 * TI_MiB);
	assert_null(slot_of(kid));
	assert_int_equal(live_slots(), 1);
	/* The parent's slot is untouched by the child's life and death. */
	assert_ptr_equal(slot_of(getpid()), mine);
	assert_int_equal(atomic_load(&mine->used[gdev]), CTX + 256 * TI_MiB);

	cst_assert_cu(CUDA_SUCCESS, cuMemFree(buf));
	assert_int_equal(atomic_load(&dev->used), CTX);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&d, 0));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRelease(d));
	assert_int_equal(atomic_load(&dev->used), 0);
	close(to_parent[0]);
	close(to_child[1]);
	cs_group_close(&H);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_child_is_a_member),
	};
	struct ti_env env;
	int status;

	(void)argc;
	if (getenv("TI_FORK_INSIDE")) {
		if (!ti_preload_loaded())
			return 1;
		return cmocka_run_group_tests(tests, NULL, NULL);
	}
	if (ti_setup(argv[0], "fork", "H100:8GiB", "64MiB") != 0)
		return 1;
	ti_env_cuslice(&env, "fork");
	ti_env_add(&env, "CUSLICE_MEM_LIMIT=4GiB");
	ti_env_add(&env, "CUSLICE_CTX_MEM=64MiB");
	ti_env_add(&env, "TI_FORK_INSIDE=1");
	status = ti_run_inherit(argv, env.v);
	if (status < 0)
		fprintf(stderr, "cannot run %s under libcuslice\n", argv[0]);
	return status < 0 ? 1 : status;
}
