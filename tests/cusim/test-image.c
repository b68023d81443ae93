/*
 * The image parsers (src/sim/modules/sim-image.c, sim-image-ptx.c) on their own,
 * under ASan/UBSan: hand-written PTX for each corner of the grammar we read,
 * fatbins assembled here to pin entry selection and LZ4 decoding, the real
 * nvcc outputs (CUSIM_TEST_KERNELS), and a mutation loop whose inputs end
 * just before an unreadable page.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "sim-image.h"

static char err[256];

/* Parses a NUL-terminated PTX text for a device of compute capability cc. */
static CUresult ptx(const char *text, int cc, struct sim_image **ret)
{
	struct sim_image_src src = {.base = (const unsigned char *)text, .len = SIZE_MAX};

	*ret = NULL;
	return sim_image_parse(&src, cc, ret, err, sizeof(err));
}

static const struct sim_image_func *func(const struct sim_image *img, const char *name)
{
	const struct sim_image_func *f = sim_image_find_func(img, name);

	if (!f)
		fail_msg("no kernel %s", name);
	return f;
}

static const struct sim_image_global *global(const struct sim_image *img, const char *name)
{
	for (uint32_t i = 0; i < img->nglobals; i++)
		if (strcmp(img->globals[i].name, name) == 0)
			return &img->globals[i];
	fail_msg("no variable %s", name);
	return NULL;
}

#define HEAD ".version 9.0\n.target sm_90\n.address_size 64\n"

static void test_image_ptx_params(void **state)
{
	static const char text[] = HEAD
		"// comment .entry fake(\n"
		"/* .entry fake2( */\n"
		".visible .entry k1(\n"
		"\t.param .u8 k1_param_0,\n"
		"\t.param .align 16 .b8 k1_param_1[20],\n"
		"\t.param .u16 k1_param_2,\n"
		"\t.param .u64 .ptr .global .align 16 k1_param_3,\n"
		"\t.param .f64 k1_param_4,\n"
		"\t.param .v2 .u32 k1_param_5,\n"
		"\t.param .b32 k1_param_6[3]\n"
		")\n{\n\tret;\n}\n"
		".entry k2()\n{\n}\n"
		".entry k3 {\n}\n"
		".extern .entry proto(.param .u32 a);\n";
	const struct sim_image_func *f;
	struct sim_image *img;

	(void)state;
	assert_int_equal(ptx(text, 90, &img), CUDA_SUCCESS);
	assert_int_equal(img->nfuncs, 3);
	f = func(img, "k1");
	assert_int_equal(f->nparams, 7);
	/* u8 at 0; 20-byte array aligned 16 at 16; u16 at 36; pointer (its .align is the
	 * pointee's) at 40; f64 at 48; v2.u32 (8 bytes, align 8) at 56; b32[3] at 64. */
	assert_int_equal(f->params[0].offset, 0);
	assert_int_equal(f->params[0].size, 1);
	assert_int_equal(f->params[1].offset, 16);
	assert_int_equal(f->params[1].size, 20);
	assert_int_equal(f->params[2].offset, 36);
	assert_int_equal(f->params[3].offset, 40);
	assert_int_equal(f->params[3].size, 8);
	assert_int_equal(f->params[4].offset, 48);
	assert_int_equal(f->params[5].offset, 56);
	assert_int_equal(f->params[5].size, 8);
	assert_int_equal(f->params[6].offset, 64);
	assert_int_equal(f->params[6].size, 12);
	assert_int_equal(f->param_bytes, 76);
	assert_int_equal(func(img, "k2")->nparams, 0);
	assert_int_equal(func(img, "k3")->param_bytes, 0);
	assert_null(sim_image_find_func(img, "proto"));
	assert_null(sim_image_find_func(img, "fake"));
	sim_image_free(img);
}

static void test_image_ptx_body(void **state)
{
	static const char text[] = HEAD
		".shared .align 4 .b8 module_smem[64];\n"
		".func (.param .b32 r) helper(.param .b32 a)\n{\n\t.shared .b8 not_counted[999];\n"
		"\t{ .reg .b32 t; }\n\tret;\n}\n"
		".func proto_only(.param .b32 a);\n"
		".entry k(.param .u64 p)\n.maxntid 64, 2, 1\n.maxnreg 16\n{\n"
		"\t.reg .b32 %r<5>;\n"
		"\t.shared .align 8 .b8 s1[10];\n"
		"\t.shared .align 16 .b8 s2[32];\n"
		"\t.local .align 8 .b8 __local_depot0[24];\n"
		"\t.extern .shared .align 16 .b8 dyn[];\n"
		"\tmov.b64 %rd1, {%r1, %r2};\n"
		"\tst.shared.f32 [s1], %f1;\n"
		"\t.loc 1 2 3\n"
		"\t.shared .b8 s3[3];\n"
		"$L__BB0_1:\n"
		"\t@%p1 bra $L__BB0_1;\n"
		"\t{\n\t\t.shared .b8 s4[1];\n\t}\n"
		"}\n"
		".entry r(.param .u64 p)\n.reqntid 32, 4\n.explicitcluster\n.reqnctapercluster 4, 1, 1\n"
		".minnctapersm 1\n{\n\tret;\n$L1:\n}\n"
		".section .debug_info\n{\n.b8 1, 2\n.b32 3\n}\n";
	const struct sim_image_func *f;
	struct sim_image *img;

	(void)state;
	assert_int_equal(ptx(text, 90, &img), CUDA_SUCCESS);
	assert_int_equal(img->nfuncs, 2);
	f = func(img, "k");
	/* s1 at 0 (10), s2 at 16 (32), s3 at 48 (3), s4 at 51 (1): 52; dyn is dynamic. */
	assert_int_equal(f->static_smem, 52);
	assert_int_equal(f->local_bytes, 24);
	assert_int_equal(f->max_threads, 128);
	assert_int_equal(f->num_regs, 16);
	assert_int_equal(f->ptx_version, 90);
	assert_int_equal(f->binary_version, 90);
	f = func(img, "r");
	assert_int_equal(f->max_threads, 128);
	assert_int_equal(f->reqntid[0], 32);
	assert_int_equal(f->reqntid[1], 4);
	assert_int_equal(f->reqntid[2], 1);
	assert_int_equal(f->cluster[0], 4);
	assert_int_equal(f->cluster[1], 1);
	assert_true(f->cluster_must_be_set);
	assert_int_equal(f->num_regs, SIM_IMAGE_PTX_DEFAULT_REGS);
	sim_image_free(img);
}

static void test_image_ptx_globals(void **state)
{
	static const char text[] = HEAD
		".global .align 4 .u32 a = 42;\n"
		".visible .global .align 4 .s32 neg = -2;\n"
		".global .align 8 .u64 h = 0x1122334455667788;\n"
		".global .f32 f = 0f3F800000;\n"
		".global .f64 d = 0d4000000000000000;\n"
		".global .f32 fd = 1.5;\n"
		".global .f32 fi = 3;\n"
		".global .align 2 .b16 arr[2][3] = {{1, 2, 3}, {4, 5}};\n"
		".global .b8 str[] = {104, 105, 0};\n"
		".global .u32 part[4] = {7};\n"
		".global .v2 .u32 vec = {9, 10};\n"
		".global .u64 ptr = generic(a);\n"
		".global .u64 ptr2 = a+4;\n"
		".global .u32 oct = 010;\n"
		".global .u32 bin = 0b101;\n"
		".global .u32 usuf = 7U;\n"
		".global .align 4 .b8 zeros[16];\n"
		".const .align 4 .b8 c1[20];\n"
		".const .align 8 .u64 c2 = 1;\n"
		".extern .global .u32 ext;\n"
		".global .texref tex;\n";
	const struct sim_image_global *g;
	struct sim_image *img;
	uint64_t u;
	float f;
	double d;
	int32_t i;

	(void)state;
	assert_int_equal(ptx(text, 90, &img), CUDA_SUCCESS);
	g = global(img, "a");
	assert_int_equal(g->size, 4);
	assert_int_equal(g->init[0], 42);
	g = global(img, "neg");
	memcpy(&i, g->init, 4);
	assert_int_equal(i, -2);
	g = global(img, "h");
	memcpy(&u, g->init, 8);
	assert_true(u == 0x1122334455667788ull);
	memcpy(&f, global(img, "f")->init, 4);
	assert_true(f == 1.0f);
	memcpy(&d, global(img, "d")->init, 8);
	assert_true(d == 2.0);
	memcpy(&f, global(img, "fd")->init, 4);
	assert_true(f == 1.5f);
	memcpy(&f, global(img, "fi")->init, 4);
	assert_true(f == 3.0f);
	g = global(img, "arr");
	assert_int_equal(g->size, 12);
	assert_int_equal(g->init[0], 1);
	assert_int_equal(g->init[8], 5);
	assert_int_equal(g->init[10], 0);	/* not initialized: zero */
	g = global(img, "str");
	assert_int_equal(g->size, 3);
	assert_string_equal((const char *)g->init, "hi");
	g = global(img, "part");
	assert_int_equal(g->size, 16);
	assert_int_equal(g->init[0], 7);
	assert_int_equal(g->init[4], 0);
	g = global(img, "vec");
	assert_int_equal(g->size, 8);
	assert_int_equal(g->init[4], 10);
	memcpy(&u, global(img, "ptr")->init, 8);
	assert_true(u == 0);	/* addresses are not relocated */
	memcpy(&u, global(img, "ptr2")->init, 8);
	assert_true(u == 0);
	assert_int_equal(global(img, "oct")->init[0], 8);
	assert_int_equal(global(img, "bin")->init[0], 5);
	assert_int_equal(global(img, "usuf")->init[0], 7);
	g = global(img, "zeros");
	assert_int_equal(g->size, 16);
	assert_null(g->init);
	assert_int_equal(global(img, "c1")->size, 20);
	for (uint32_t k = 0; k < img->nglobals; k++) {
		assert_string_not_equal(img->globals[k].name, "ext");
		assert_string_not_equal(img->globals[k].name, "tex");
	}
	sim_image_free(img);
}

static void test_image_ptx_errors(void **state)
{
	static const struct {
		const char *text;
		int cc;
		CUresult want;
	} cases[] = {
		{"", 90, CUDA_ERROR_INVALID_PTX},
		{"hello", 90, CUDA_ERROR_INVALID_PTX},
		{".target sm_90\n.version 9.0\n", 90, CUDA_ERROR_INVALID_PTX},
		{".version 9.0\n.address_size 64\n", 90, CUDA_ERROR_INVALID_PTX},	/* no .target */
		{".version 9.1\n.target sm_90\n", 90, CUDA_ERROR_UNSUPPORTED_PTX_VERSION},
		{".version 10.0\n.target sm_90\n", 90, CUDA_ERROR_UNSUPPORTED_PTX_VERSION},
		{".version 9\n.target sm_90\n", 90, CUDA_ERROR_INVALID_PTX},
		{".version 9.0\n.target sm_100\n", 90, CUDA_ERROR_INVALID_PTX},
		{".version 9.0\n.target sm_90a\n", 100, CUDA_ERROR_INVALID_PTX},
		{".version 9.0\n.target sm_90a\n", 90, CUDA_SUCCESS},
		{".version 8.0\n.target sm_75\n", 90, CUDA_SUCCESS},
		{".version 9.0\n.target sm_90x\n", 90, CUDA_ERROR_INVALID_PTX},
		{".version 9.0\n.target sm_90\n.address_size 32\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD "/* unterminated", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".entry k(\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".entry k(.param .u32 a) {\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".entry k(.param .u32) {}\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".entry k(.param .bogus a) {}\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".entry k(.param .b8 a[]) {}\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".entry k(.param .b8 a[40000]) {}\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".entry k() {}\n.entry k() {}\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".global .u32 v;\n.global .u32 v;\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".global .u32 v = {1, 2};\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".global .u32 v = 0fZZ;\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".global .u32 v[2] = {1, 2, 3};\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".global .u32 v = {{{{{{{{{{{1}}}}}}}}}}};\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".global .align 3 .u32 v;\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".global .b8 huge[4294967296][4294967296];\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD "mov.u32 %r1, 1;\n", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD "\x01", 90, CUDA_ERROR_INVALID_PTX},
		{HEAD ".unknown_directive x y z;\n.entry k() {}\n", 90, CUDA_SUCCESS},
		{HEAD ".entry k() {}\0garbage that is never read", 90, CUDA_SUCCESS},
	};
	struct sim_image *img;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CUresult r = ptx(cases[i].text, cases[i].cc, &img);

		if (r != cases[i].want)
			fail_msg("case %zu: got %d, want %d (%s)", i, (int)r, (int)cases[i].want, err);
		if (r != CUDA_SUCCESS)
			assert_true(err[0] != '\0');
		sim_image_free(img);
	}
}

/* ---- fatbins assembled here ---- */

struct buf {
	unsigned char *p;
	size_t n;
};

static void put(struct buf *b, const void *d, size_t n)
{
	b->p = realloc(b->p, b->n + n);
	assert_non_null(b->p);
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void put_u(struct buf *b, uint64_t v, size_t n)
{
	unsigned char t[8];

	for (size_t i = 0; i < n; i++)
		t[i] = (unsigned char)(v >> (8 * i));
	put(b, t, n);
}

/* One entry: kind 1 PTX / 2 ELF, its arch and flags, payload (stored as is), sizes. */
static void put_entry(struct buf *b, unsigned kind, unsigned arch, uint64_t flags,
		      const void *payload, size_t n, size_t csize, size_t dsize)
{
	put_u(b, kind, 2);
	put_u(b, 0x0101, 2);
	put_u(b, 64, 4);
	put_u(b, n, 8);
	put_u(b, csize, 4);
	put_u(b, 0, 4);
	put_u(b, 0, 4);
	put_u(b, arch, 4);
	put_u(b, 0, 8);
	put_u(b, flags, 8);
	put_u(b, 0, 8);
	put_u(b, dsize, 8);
	put(b, payload, n);
}

static void finish_fatbin(struct buf *b, const struct buf *entries)
{
	put_u(b, 0xBA55ED50u, 4);
	put_u(b, 1, 2);
	put_u(b, 16, 2);
	put_u(b, entries->n, 8);
	put(b, entries->p, entries->n);
}

static CUresult parse_buf(const struct buf *b, int cc, struct sim_image **ret)
{
	struct sim_image_src src = {.base = b->p, .len = b->n};

	*ret = NULL;
	return sim_image_parse(&src, cc, ret, err, sizeof(err));
}

static const char ptx80[] = ".version 8.0\n.target sm_80\n.address_size 64\n"
			    ".entry from_ptx80(.param .u32 a) {\n}\n";
static const char ptx90[] = ".version 9.0\n.target sm_90\n.address_size 64\n"
			    ".entry from_ptx90(.param .u64 a) {\n}\n";

/* An LZ4 block that is all literals (the last sequence of any block looks like this). */
static void lz4_literals(struct buf *out, const void *d, size_t n)
{
	size_t rest = n - 15;

	assert_true(n >= 15);
	put_u(out, 0xf0, 1);
	while (rest >= 255) {
		put_u(out, 255, 1);
		rest -= 255;
	}
	put_u(out, rest, 1);
	put(out, d, n);
}

static void test_image_fatbin_select(void **state)
{
	struct buf e = {0}, fb = {0}, z = {0};
	struct sim_image *img;

	(void)state;
	put_entry(&e, 1, 80, 0x11, ptx80, sizeof(ptx80), 0, 0);
	put_entry(&e, 1, 90, 0x11, ptx90, sizeof(ptx90), 0, 0);
	put_entry(&e, 4, 90, 0x11, "lto", 3, 0, 0);	/* unknown kind: skipped */
	finish_fatbin(&fb, &e);
	/* The newest PTX not above the device. */
	assert_int_equal(parse_buf(&fb, 90, &img), CUDA_SUCCESS);
	assert_int_equal(img->kind, SIM_IMAGE_FATBIN);
	assert_int_equal(img->code, SIM_IMAGE_PTX);
	assert_non_null(sim_image_find_func(img, "from_ptx90"));
	sim_image_free(img);
	assert_int_equal(parse_buf(&fb, 86, &img), CUDA_SUCCESS);
	assert_non_null(sim_image_find_func(img, "from_ptx80"));
	sim_image_free(img);
	assert_int_equal(parse_buf(&fb, 75, &img), CUDA_ERROR_NO_BINARY_FOR_GPU);
	/* Arch-specific PTX (compute_90a) only for exactly 9.0. */
	free(e.p);
	free(fb.p);
	memset(&e, 0, sizeof(e));
	memset(&fb, 0, sizeof(fb));
	put_entry(&e, 1, 90, 0x100011, ptx90, sizeof(ptx90), 0, 0);
	finish_fatbin(&fb, &e);
	assert_int_equal(parse_buf(&fb, 90, &img), CUDA_SUCCESS);
	sim_image_free(img);
	assert_int_equal(parse_buf(&fb, 100, &img), CUDA_ERROR_NO_BINARY_FOR_GPU);

	/* LZ4: a literal-only block decodes; a match pointing before the output does not. */
	free(e.p);
	free(fb.p);
	memset(&e, 0, sizeof(e));
	memset(&fb, 0, sizeof(fb));
	lz4_literals(&z, ptx90, sizeof(ptx90));
	put_entry(&e, 1, 90, 0x2011, z.p, z.n, z.n, sizeof(ptx90));
	finish_fatbin(&fb, &e);
	assert_int_equal(parse_buf(&fb, 90, &img), CUDA_SUCCESS);
	assert_non_null(sim_image_find_func(img, "from_ptx90"));
	sim_image_free(img);
	free(e.p);
	free(fb.p);
	memset(&e, 0, sizeof(e));
	memset(&fb, 0, sizeof(fb));
	{
		static const unsigned char bad[] = {0x14, '.', 0x05, 0x00, 0x00};

		put_entry(&e, 1, 90, 0x2011, bad, sizeof(bad), sizeof(bad), 10);
		finish_fatbin(&fb, &e);
		assert_int_equal(parse_buf(&fb, 90, &img), CUDA_ERROR_INVALID_IMAGE);
	}
	/* A decompressed size that does not match what the block produces. */
	free(e.p);
	free(fb.p);
	memset(&e, 0, sizeof(e));
	memset(&fb, 0, sizeof(fb));
	put_entry(&e, 1, 90, 0x2011, z.p, z.n, z.n, sizeof(ptx90) + 1);
	finish_fatbin(&fb, &e);
	assert_int_equal(parse_buf(&fb, 90, &img), CUDA_ERROR_INVALID_IMAGE);
	/* An entry that claims more bytes than the container holds. */
	free(e.p);
	free(fb.p);
	memset(&e, 0, sizeof(e));
	memset(&fb, 0, sizeof(fb));
	put_entry(&e, 1, 90, 0x11, ptx90, sizeof(ptx90), 0, 0);
	e.p[8] = 0xff;
	finish_fatbin(&fb, &e);
	assert_int_equal(parse_buf(&fb, 90, &img), CUDA_ERROR_INVALID_IMAGE);
	free(e.p);
	free(fb.p);
	free(z.p);
}

/* ---- the real nvcc outputs ---- */

static unsigned char *slurp(const char *name, size_t *len)
{
	const char *dir = getenv("CUSIM_TEST_KERNELS");
	char path[4096];
	unsigned char *b;
	FILE *f;
	long n;

	if (!dir)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	b = malloc((size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	b[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return b;
}

static const char *const real_files[] = {
	"test-kernels.ptx", "test-kernels.cubin", "test-kernels.fatbin",
	"test-kernels-plain.fatbin", "test-kernels-lz4.fatbin", "test-kernels-ptx-lz4.fatbin",
};

static void test_image_real(void **state)
{
	(void)state;
	if (!getenv("CUSIM_TEST_KERNELS"))
		skip();
	for (size_t i = 0; i < sizeof(real_files) / sizeof(real_files[0]); i++) {
		struct sim_image_src src;
		struct sim_image *img;
		const struct sim_image_func *f;
		size_t len;
		unsigned char *b = slurp(real_files[i], &len);

		src.base = b;
		src.len = len;
		assert_int_equal(sim_image_parse(&src, 90, &img, err, sizeof(err)), CUDA_SUCCESS);
		assert_int_equal(img->nfuncs, 9);
		assert_int_equal(img->nglobals, 4);
		f = func(img, "scale");
		assert_int_equal(f->nparams, 3);
		assert_int_equal(f->params[2].offset, 12);
		assert_int_equal(f->param_bytes, 16);
		assert_int_equal(global(img, "counter")->init[0], 42);
		assert_null(global(img, "table")->init);
		sim_image_free(img);
		free(b);
	}
}

/* Places n bytes so that the byte after them is unmapped. */
static unsigned char *guarded(const unsigned char *d, size_t n, void **map, size_t *maplen)
{
	size_t pg = 4096, pages = (n + pg - 1) / pg + 1;
	unsigned char *m = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(m != MAP_FAILED);
	assert_int_equal(mprotect(m + (pages - 1) * pg, pg, PROT_NONE), 0);
	memcpy(m + (pages - 1) * pg - n, d, n);
	*map = m;
	*maplen = pages * pg;
	return m + (pages - 1) * pg - n;
}

static void test_image_fuzz(void **state)
{
	unsigned seed = 4242;
	int results[4] = {0};

	(void)state;
	if (!getenv("CUSIM_TEST_KERNELS"))
		skip();
	for (size_t fi = 0; fi < sizeof(real_files) / sizeof(real_files[0]); fi++) {
		size_t len;
		unsigned char *b = slurp(real_files[fi], &len), *c = malloc(len);

		assert_non_null(c);
		for (int it = 0; it < 1500; it++) {
			struct sim_image_src bounded, unbounded;
			struct sim_image *img;
			size_t n = len, maplen;
			void *map;
			CUresult r;

			memcpy(c, b, len);
			if (it % 3 == 0)
				n = (size_t)rand_r(&seed) % len;
			else
				for (int k = 0; k < 1 + it % 7; k++)
					c[(size_t)rand_r(&seed) % (it % 2 ? len : (len < 256 ? len : 256))] =
						(unsigned char)rand_r(&seed);
			bounded.base = c;
			bounded.len = n;
			r = sim_image_parse(&bounded, 90, &img, err, sizeof(err));
			results[r == CUDA_SUCCESS]++;
			if (r == CUDA_SUCCESS)
				sim_image_free(img);
			unbounded.base = guarded(c, n, &map, &maplen);
			unbounded.len = SIZE_MAX;
			r = sim_image_parse(&unbounded, 90, &img, err, sizeof(err));
			results[2 + (r == CUDA_SUCCESS)]++;
			if (r == CUDA_SUCCESS)
				sim_image_free(img);
			munmap(map, maplen);
		}
		free(c);
		free(b);
	}
	assert_true(results[0] > 0 && results[1] > 0 && results[2] > 0 && results[3] > 0);
}

int main(void)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_image_ptx_params),
		cmocka_unit_test(test_image_ptx_body),
		cmocka_unit_test(test_image_ptx_globals),
		cmocka_unit_test(test_image_ptx_errors),
		cmocka_unit_test(test_image_fatbin_select),
		cmocka_unit_test(test_image_real),
		cmocka_unit_test(test_image_fuzz),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
