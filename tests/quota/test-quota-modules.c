/*
 * Module and library memory is charged to the group: what an image's
 * variables take on the device (tests/kernels/test-globals.cu: 256 MiB of
 * __device__ bytes, a 4 KiB table and a __constant__ bank) is charged when
 * it is loaded, in every way a program loads one (cuModuleLoad,
 * cuModuleLoadData, cuModuleLoadDataEx, cuModuleLoadFatBinary,
 * cuLibraryLoadFromFile, cuLibraryLoadData; PTX, cubin and fatbin), shown in
 * the views, refused when it does not fit, and given back by the unload or
 * by the end of its context.
 *
 * The issue this answers: a 1 GiB module loaded under a 4 GiB limit left
 * the group's usage unchanged, and a 3.5 GiB allocation after it was
 * granted (4.75 GiB held). Here the same at a quarter of the scale (cusim
 * writes every byte of a module's variables at load).
 */
#include "qt.h"

#include "cuslice/nvml-abi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIMIT GiB
/* What cusim's device holds for test-globals (each variable rounded up to 512 bytes). */
#define MODULE_BYTES (256 * MiB + 4096 + 512)
/* What the image declares in __device__ variables: reserved before the load. */
#define MODULE_DECLARED (256 * MiB + 4096)

struct world {
	struct qt_proc c;
	struct cs_group_handle h;
	uint64_t limit;
};

/* The path of a file of tests/kernels; the test is skipped when nvcc did not build it. */
static const char *kernel(const char *name)
{
	static char buf[4][4096];
	static unsigned next;
	const char *dir = getenv("CUSIM_TEST_KERNELS");
	char *path = buf[next++ % 4];
	FILE *f;

	snprintf(path, sizeof(buf[0]), "%s/%s", dir ? dir : "", name);
	f = dir ? fopen(path, "rb") : NULL;
	if (!f) {
		print_message("%s not built (no nvcc): skipped\n", name);
		skip();
	}
	fclose(f);
	return path;
}

static void start(struct world *w, const char *tag, uint64_t limit)
{
	const char *group;

	qt_begin(tag, QT_CTX);
	group = qt_group(tag);
	w->limit = limit;
	qt_client(&w->c, group, qt_u64(limit), NULL);
	qt_region_open(&w->h, group);
	assert_int_equal(qt_used(&w->h), QT_CTX);
}

/* The group is charged `bytes`, the process's slot too, the device holds as much. */
static void assert_charged(struct world *w, uint64_t bytes)
{
	int slot = qt_slot_of(&w->h, w->c.pid);
	const char *line;

	assert_int_equal(qt_used(&w->h), bytes);
	assert_true(slot >= 0);
	assert_int_equal(qt_slot_used(&w->h, slot), bytes);
	assert_int_equal(qt_device_used(), bytes);
	/* The group's view says so too. */
	line = qt_cmd(&w->c, "info");
	assert_int_equal(qt_rc(line), 0);
	assert_int_equal(qt_val(line, "free"), w->limit - bytes);
}

static void finish(struct world *w)
{
	qt_send(&w->c, "exit");
	assert_int_equal(qt_finish(&w->c), 0);
	assert_int_equal(cs_group_reclaim(&w->h), 1);
	assert_int_equal(qt_used(&w->h), 0);
}

/*
 * Loads test-globals with `how` ("module file", "library data", ...) from
 * `file`: charged while loaded, so that 896 MiB more is refused under the
 * 1 GiB limit; given back by the unload, after which the 896 MiB fit.
 */
static void loaded_and_unloaded(const char *tag, const char *how, const char *file)
{
	const char *path = kernel(file);
	unsigned id, big;
	struct world w;

	start(&w, tag, LIMIT);
	id = qt_expect(&w.c, 0, "%s %s", how, path);
	assert_charged(&w, QT_CTX + MODULE_BYTES);
	qt_expect(&w.c, QT_OOM, "device 896MiB");
	assert_charged(&w, QT_CTX + MODULE_BYTES);
	qt_expect(&w.c, 0, "free %u", id);
	assert_charged(&w, QT_CTX);
	big = qt_expect(&w.c, 0, "device 896MiB");
	qt_expect(&w.c, 0, "free %u", big);
	finish(&w);
}

static void test_modules_load_ptx_file(void **state)
{
	(void)state;
	loaded_and_unloaded("qm-ptxf", "module file", "test-globals.ptx");
}

static void test_modules_load_cubin_file(void **state)
{
	(void)state;
	loaded_and_unloaded("qm-cubinf", "module file", "test-globals.cubin");
}

static void test_modules_load_fatbin_file(void **state)
{
	(void)state;
	loaded_and_unloaded("qm-fatf", "module file", "test-globals.fatbin");
}

static void test_modules_load_ptx_data(void **state)
{
	(void)state;
	loaded_and_unloaded("qm-ptxd", "module data", "test-globals.ptx");
}

static void test_modules_load_cubin_dataex(void **state)
{
	(void)state;
	loaded_and_unloaded("qm-cubinx", "module dataex", "test-globals.cubin");
}

static void test_modules_load_fatbinary(void **state)
{
	(void)state;
	loaded_and_unloaded("qm-fatb", "module fatbin", "test-globals.fatbin");
}

static void test_modules_library_file(void **state)
{
	(void)state;
	loaded_and_unloaded("qm-libf", "library file", "test-globals.cubin");
}

static void test_modules_library_data(void **state)
{
	(void)state;
	loaded_and_unloaded("qm-libd", "library data", "test-globals.ptx");
}

/* A module whose declared variables do not fit is refused before the driver loads it. */
static void test_modules_refused_before_loading(void **state)
{
	struct world w;

	(void)state;
	start(&w, "qm-refuse", QT_CTX + 128 * MiB);
	qt_expect(&w.c, QT_OOM, "module file %s", kernel("test-globals.cubin"));
	qt_expect(&w.c, QT_OOM, "module data %s", kernel("test-globals.ptx"));
	qt_expect(&w.c, QT_OOM, "library data %s", kernel("test-globals.fatbin"));
	assert_charged(&w, QT_CTX);
	finish(&w);
}

/*
 * The declared bytes fit, what the load takes does not (cusim rounds each
 * variable up to 512 bytes): the module is unloaded again and refused.
 */
static void test_modules_measured_beyond_declared(void **state)
{
	struct world w;

	(void)state;
	start(&w, "qm-beyond", QT_CTX + MODULE_BYTES - 1);
	assert_true(MODULE_DECLARED < MODULE_BYTES - 1);
	qt_expect(&w.c, QT_OOM, "module file %s", kernel("test-globals.cubin"));
	assert_charged(&w, QT_CTX);
	finish(&w);
}

/* With the limit at what the module takes, it loads and the group is full to the byte. */
static void test_modules_to_the_byte(void **state)
{
	struct world w;
	unsigned id;

	(void)state;
	start(&w, "qm-byte", QT_CTX + MODULE_BYTES);
	id = qt_expect(&w.c, 0, "module file %s", kernel("test-globals.cubin"));
	assert_charged(&w, w.limit);
	qt_expect(&w.c, QT_OOM, "device 1");
	qt_expect(&w.c, 0, "free %u", id);
	assert_charged(&w, QT_CTX);
	finish(&w);
}

/* The end of a module's context gives its charge back: destroy, and primary reset. */
static void test_modules_context_ends(void **state)
{
	struct world w;
	unsigned ctx;

	(void)state;
	start(&w, "qm-ctxend", LIMIT);
	ctx = qt_expect(&w.c, 0, "ctx");
	qt_expect(&w.c, 0, "use %u", ctx);
	qt_expect(&w.c, 0, "module file %s", kernel("test-globals.cubin"));
	assert_charged(&w, 2 * QT_CTX + MODULE_BYTES);
	qt_expect(&w.c, 0, "use primary");
	qt_expect(&w.c, 0, "free %u", ctx);
	assert_charged(&w, QT_CTX);

	qt_expect(&w.c, 0, "module data %s", kernel("test-globals.ptx"));
	qt_expect(&w.c, 0, "library file %s", kernel("test-globals.cubin"));
	assert_charged(&w, QT_CTX + 2 * MODULE_BYTES);
	/* A reset destroys the primary context with everything loaded in it. */
	qt_expect(&w.c, 0, "preset");
	assert_int_equal(qt_used(&w.h), 0);
	assert_int_equal(qt_device_used(), 0);
	qt_expect(&w.c, 0, "pretain");
	assert_charged(&w, QT_CTX);
	finish(&w);
}

/*
 * A library is charged in each context it is loaded into: at its load in
 * the current context, and at its first use in another (cuLibraryGetGlobal
 * here); each charge goes with its context, all with the unload.
 */
static void test_modules_library_per_context(void **state)
{
	struct world w;
	unsigned lib, ctx;
	const char *line;

	(void)state;
	start(&w, "qm-libctx", LIMIT);
	lib = qt_expect(&w.c, 0, "library data %s", kernel("test-globals.ptx"));
	assert_charged(&w, QT_CTX + MODULE_BYTES);
	ctx = qt_expect(&w.c, 0, "ctx");
	qt_expect(&w.c, 0, "use %u", ctx);
	line = qt_cmd(&w.c, "libglobal %u cusim_big", lib);
	assert_int_equal(qt_rc(line), 0);
	assert_int_equal(qt_val(line, "bytes"), 256 * MiB);
	assert_charged(&w, 2 * QT_CTX + 2 * MODULE_BYTES);
	/* Known in this context now: a second lookup takes nothing more. */
	qt_expect(&w.c, 0, "libmodule %u", lib);
	assert_charged(&w, 2 * QT_CTX + 2 * MODULE_BYTES);
	qt_expect(&w.c, 0, "use primary");
	qt_expect(&w.c, 0, "free %u", ctx);
	assert_charged(&w, QT_CTX + MODULE_BYTES);
	qt_expect(&w.c, 0, "free %u", lib);
	assert_charged(&w, QT_CTX);
	finish(&w);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_modules_load_ptx_file, qt_end),
		cmocka_unit_test_teardown(test_modules_load_cubin_file, qt_end),
		cmocka_unit_test_teardown(test_modules_load_fatbin_file, qt_end),
		cmocka_unit_test_teardown(test_modules_load_ptx_data, qt_end),
		cmocka_unit_test_teardown(test_modules_load_cubin_dataex, qt_end),
		cmocka_unit_test_teardown(test_modules_load_fatbinary, qt_end),
		cmocka_unit_test_teardown(test_modules_library_file, qt_end),
		cmocka_unit_test_teardown(test_modules_library_data, qt_end),
		cmocka_unit_test_teardown(test_modules_refused_before_loading, qt_end),
		cmocka_unit_test_teardown(test_modules_measured_beyond_declared, qt_end),
		cmocka_unit_test_teardown(test_modules_to_the_byte, qt_end),
		cmocka_unit_test_teardown(test_modules_context_ends, qt_end),
		cmocka_unit_test_teardown(test_modules_library_per_context, qt_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
