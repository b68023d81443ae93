/*
 * libcuslice's reading of a module image's declared __device__ bytes
 * (src/preload/cs-image.c), the floor it reserves before a module load:
 * hand-written PTX for each form of declaration, the nvcc outputs of
 * tests/kernels (CUSIM_TEST_KERNELS) in every container, and images that
 * end just before an unreadable page or are not images at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "cs-image.h"

/* test-kernels.cu: counter (4) + table (1024) + dinit (24); __constant__ coef is not counted. */
#define TEST_KERNELS_DECLARED 1052u
/* test-globals.cu: cusim_big (256 MiB) + cusim_table (4 KiB). */
#define TEST_GLOBALS_DECLARED ((256ull << 20) + 4096u)

static const char *kpath(const char *name)
{
	static char buf[4096];
	const char *dir = getenv("CUSIM_TEST_KERNELS");

	if (!dir)
		return NULL;
	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

/* A kernel file's bytes plus a NUL, in malloc'ed memory; NULL (test skipped) without nvcc. */
static unsigned char *slurp(const char *name)
{
	const char *path = kpath(name);
	FILE *f = path ? fopen(path, "rb") : NULL;
	unsigned char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

#define HEAD ".version 9.0\n.target sm_90\n.address_size 64\n"

static void test_declared_ptx_forms(void **state)
{
	static const char text[] = HEAD
		"// .global .b8 in_a_comment[1000];\n"
		"/* .global .b8 in_a_block[1000];\n .global .b8 x[5]; */\n"
		".global .align 4 .u32 one;\n"
		".visible .global .align 8 .b8 bytes[100] = {1, 2, 3};\n"
		".global .align 16 .v4 .f32 vecs[3];\n"
		".global .align 8 .u64 grid[2][5] = {{1, 2}, {3}};\n"
		".weak .global .align 2 .f16 halves[0x10];\n"
		".extern .global .align 4 .b8 elsewhere[4096];\n"
		".global .align 1 .b8 sized_by_init[] = {1, 2, 3};\n"
		".global .texref tex;\n"
		".const .align 4 .b8 constant[256];\n"
		".shared .align 4 .b8 shared[512];\n"
		".visible .entry k(.param .u64 p)\n{\n"
		"\t.local .align 4 .b8 frame[64];\n"
		"\t.global .u32 not_module_scope;\n"
		"\tret;\n}\n"
		".global .b32 after_function;\n";
	/* 4 + 100 + 3 x 16 + 10 x 8 + 16 x 2 + 4 */
	(void)state;
	assert_int_equal(cs_image_declared(text), 4 + 100 + 48 + 80 + 32 + 4);
	assert_int_equal(cs_image_declared(HEAD), 0);
	assert_int_equal(cs_image_declared(""), 0);
	assert_int_equal(cs_image_declared(NULL), 0);
	/* Overflowing declarations saturate instead of wrapping. */
	assert_int_equal(cs_image_declared(HEAD ".global .u64 a[0xffffffffffffffff];\n"
					   ".global .b8 b[2];\n"),
			 UINT64_MAX);
}

static void expect_file(const char *name, uint64_t want)
{
	unsigned char *img = slurp(name);

	if (!img) {
		print_message("%s: not built (no nvcc), skipped\n", name);
		return;
	}
	if (cs_image_declared(img) != want || cs_image_declared_file(kpath(name)) != want)
		fail_msg("%s: declared %llu in memory, %llu from the file, expected %llu", name,
			 (unsigned long long)cs_image_declared(img),
			 (unsigned long long)cs_image_declared_file(kpath(name)),
			 (unsigned long long)want);
	free(img);
}

static void test_declared_nvcc_outputs(void **state)
{
	(void)state;
	expect_file("test-kernels.ptx", TEST_KERNELS_DECLARED);
	expect_file("test-kernels.cubin", TEST_KERNELS_DECLARED);
	expect_file("test-kernels.fatbin", TEST_KERNELS_DECLARED);
	expect_file("test-kernels-plain.fatbin", TEST_KERNELS_DECLARED);
	expect_file("test-kernels-sm80.fatbin", TEST_KERNELS_DECLARED);
	/* Everything compressed: not decompressed here, the measured load decides. */
	expect_file("test-kernels-lz4.fatbin", 0);
	expect_file("test-kernels-zstd.fatbin", 0);
	expect_file("test-kernels-ptx-zstd.fatbin", 0);
	expect_file("test-kernels-ptx-lz4.fatbin", 0);
	expect_file("test-globals.ptx", TEST_GLOBALS_DECLARED);
	expect_file("test-globals.cubin", TEST_GLOBALS_DECLARED);
	expect_file("test-globals.fatbin", TEST_GLOBALS_DECLARED);
	assert_int_equal(cs_image_declared_file("/nonexistent/x.cubin"), 0);
	assert_int_equal(cs_image_declared_file(NULL), 0);
}

/* A cudart fatbin wrapper {magic, version, data, filename_or_fatbins} names its fatbin. */
static void test_declared_wrapper(void **state)
{
	unsigned char *fat = slurp("test-kernels.fatbin");
	struct {
		uint32_t magic, version;
		const void *data;
		const void *unused;
	} wrapper = {0x466243b1u, 1, NULL, NULL};

	(void)state;
	if (!fat) {
		print_message("test-kernels.fatbin: not built (no nvcc), skipped\n");
		return;
	}
	wrapper.data = fat;
	assert_int_equal(cs_image_declared(&wrapper), TEST_KERNELS_DECLARED);
	wrapper.data = (const void *)(uintptr_t)16;	/* unmapped */
	assert_int_equal(cs_image_declared(&wrapper), 0);
	free(fat);
}

/*
 * Every prefix of the real images (and PTX without its NUL), placed so
 * that it ends where an unreadable region begins: the reader never faults and
 * never reports more than the whole image declares.
 *
 * The unreadable region is as long as the whole image plus a page. A prefix
 * of an ELF still holds the real e_shoff, which points past its end; with
 * only one guard page the reader read whatever mapping followed it (with
 * ASLR, sometimes one whose bytes parsed as a .nv.global larger than the
 * image's), so the test failed on one CI run out of many. Every offset the
 * reader follows comes from bytes it read in full, and those of a real image
 * stay within it, so they all land on the unreadable region.
 */
static void test_declared_truncated(void **state)
{
	static const char *const names[] = {"test-kernels.cubin", "test-kernels.fatbin",
					    "test-kernels.ptx", "test-globals.ptx"};
	long pg = sysconf(_SC_PAGESIZE);

	(void)state;
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		unsigned char *img = slurp(names[k]);
		const char *path = kpath(names[k]);
		FILE *f = path ? fopen(path, "rb") : NULL;
		size_t len, data, pages;
		uint64_t whole;
		unsigned char *m;

		if (!img || !f) {
			free(img);
			if (f)
				fclose(f);
			continue;
		}
		fseek(f, 0, SEEK_END);
		len = (size_t)ftell(f);
		fclose(f);
		whole = cs_image_declared(img);
		data = (len + (size_t)pg - 1) / (size_t)pg;
		pages = 2 * data + 1;
		m = mmap(NULL, pages * (size_t)pg, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert_true(m != MAP_FAILED);
		assert_int_equal(mprotect(m + data * (size_t)pg, (pages - data) * (size_t)pg,
					  PROT_NONE), 0);
		for (size_t cut = 0; cut <= len; cut += cut < 256 ? 1 : 61) {
			unsigned char *at = m + data * (size_t)pg - cut;

			memcpy(at, img, cut);
			assert_true(cs_image_declared(at) <= whole);
		}
		munmap(m, pages * (size_t)pg);
		free(img);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_declared_ptx_forms),
		cmocka_unit_test(test_declared_nvcc_outputs),
		cmocka_unit_test(test_declared_wrapper),
		cmocka_unit_test(test_declared_truncated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
