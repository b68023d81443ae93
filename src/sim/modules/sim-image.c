/*
 * Image loader: kind detection, fatbin containers and their compressed
 * entries, and cubins (ELF). PTX text is parsed in sim-image-ptx.c.
 *
 * Formats, as the CUDA 13.0 toolkit writes them (see docs/cusim-modules.md):
 *
 * fatbin	16-byte header {u32 magic 0xBA55ED50, u16 version, u16 header_size,
 *		u64 fat_size}, then entries, each a header {u16 kind (1 PTX, 2 ELF),
 *		u16 version, u32 header_size, u64 payload_size, u32 compressed_size,
 *		u32, u16, u16, u32 arch (e.g. 90), u32 name_off, u32 name_len,
 *		u64 flags, u64, u64 decompressed_size} followed by its payload.
 *		flags 0x2000: LZ4 block, 0x8000: zstd frame (nvcc 13 compresses PTX
 *		with zstd by default), 0x100000: arch-specific code (sm_90a).
 * cubin	ELF64, EM_CUDA (190). Kernels are STT_FUNC symbols with
 *		STO_CUDA_ENTRY (0x10) in st_other; their attributes are records
 *		{u8 format, u8 attribute, u16 value-or-length[, payload]} in the
 *		section ".nv.info.<name>" (sh_info = the kernel's section) and in the
 *		module-wide ".nv.info" (keyed by symbol index). Variables are
 *		STT_OBJECT symbols in .nv.global (zeroed), .nv.global.init or
 *		.nv.constantN (initial bytes in the section).
 */
#include "sim-image.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>


#define FATBIN_MAGIC 0xBA55ED50u
#define WRAPPER_MAGIC 0x466243b1u
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2
#define FATBIN_ENTRY_MIN_HEADER 64u
#define FATBIN_FLAG_LZ4 0x2000ull
#define FATBIN_FLAG_ZSTD 0x8000ull
#define FATBIN_FLAG_ARCH_SPECIFIC 0x100000ull

#define ELF_EM_CUDA 190
#define ELF_OSABI_CUDA_V8 0x41		/* CUDA 12.8+ ABI: arch in e_flags bits 8..15 */
#define ELF_SHDR_SIZE 64u
#define ELF_SYM_SIZE 24u
#define ELF_SHT_SYMTAB 2
#define ELF_SHT_NOTE 7
#define ELF_SHT_NOBITS 8
#define ELF_SHT_CUDA_INFO 0x70000000u
#define ELF_SHT_CUDA_GLOBAL 0x70000007u	/* .nv.global in relocatable cubins */
#define ELF_SHT_CUDA_SHARED 0x7000000au	/* .nv.shared.* in relocatable cubins */
#define ELF_STT_OBJECT 1
#define ELF_STT_FUNC 2
#define ELF_STT_CUDA_OBJECT 13		/* variables of relocatable cubins */
#define ELF_STO_CUDA_ENTRY 0x10

/* .nv.info record formats and the attributes we read. */
#define EIFMT_NVAL 1
#define EIFMT_BVAL 2
#define EIFMT_HVAL 3
#define EIFMT_SVAL 4
#define EIATTR_MAX_THREADS 0x05
#define EIATTR_REQNTID 0x10
#define EIATTR_FRAME_SIZE 0x11
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define EIATTR_REGCOUNT 0x2f
#define EIATTR_CTA_PER_CLUSTER 0x3d
#define EIATTR_EXPLICIT_CLUSTER 0x3e

/* Shared memory the compiler reserves in every block on sm_90 (.nv.shared.reserved.0). */
#define RESERVED_SMEM 1024

/* ---- common helpers ---- */

void sim_image_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

CUresult sim_image_add_func(struct sim_image *img, struct sim_image_func **ret)
{
	struct sim_image_func *f;

	if (img->nfuncs >= (1u << 20))
		return CUDA_ERROR_INVALID_IMAGE;
	f = realloc(img->funcs, (img->nfuncs + 1) * sizeof(*f));
	if (!f)
		return CUDA_ERROR_OUT_OF_MEMORY;
	img->funcs = f;
	f = &img->funcs[img->nfuncs++];
	memset(f, 0, sizeof(*f));
	*ret = f;
	return CUDA_SUCCESS;
}

CUresult sim_image_add_global(struct sim_image *img, struct sim_image_global **ret)
{
	struct sim_image_global *g;

	if (img->nglobals >= (1u << 20))
		return CUDA_ERROR_INVALID_IMAGE;
	g = realloc(img->globals, (img->nglobals + 1) * sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	img->globals = g;
	g = &img->globals[img->nglobals++];
	memset(g, 0, sizeof(*g));
	*ret = g;
	return CUDA_SUCCESS;
}

CUresult sim_image_add_ref(struct sim_image *img, const char *name, size_t len, bool surface)
{
	struct sim_image_ref *v;

	for (uint32_t i = 0; i < img->nrefs; i++)
		if (strlen(img->refs[i].name) == len && memcmp(img->refs[i].name, name, len) == 0)
			return CUDA_SUCCESS;
	if (img->nrefs >= (1u << 16))
		return CUDA_ERROR_INVALID_IMAGE;
	v = realloc(img->refs, (img->nrefs + 1) * sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	img->refs = v;
	v = &img->refs[img->nrefs];
	v->name = strndup(name, len);
	if (!v->name)
		return CUDA_ERROR_OUT_OF_MEMORY;
	v->surface = surface;
	img->nrefs++;
	return CUDA_SUCCESS;
}

void sim_image_free(struct sim_image *img)
{
	if (!img)
		return;
	for (uint32_t i = 0; i < img->nrefs; i++)
		free(img->refs[i].name);
	free(img->refs);
	for (uint32_t i = 0; i < img->nfuncs; i++) {
		free(img->funcs[i].name);
		free(img->funcs[i].params);
	}
	for (uint32_t i = 0; i < img->nglobals; i++) {
		free(img->globals[i].name);
		free(img->globals[i].init);
	}
	free(img->funcs);
	free(img->globals);
	free(img);
}

const struct sim_image_func *sim_image_find_func(const struct sim_image *img, const char *name)
{
	for (uint32_t i = 0; i < img->nfuncs; i++)
		if (strcmp(img->funcs[i].name, name) == 0)
			return &img->funcs[i];
	return NULL;
}

static uint16_t rd16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* True when [off, off+len) lies inside [0, size), without overflow. */
static bool in_bounds(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* ---- reading a caller's pointer without trusting it ---- */

/* Set once process_vm_readv turns out to be unavailable (seccomp, old kernel). */
static _Atomic int vm_readv_unavailable;

bool sim_image_safe_read(void *dst, const void *src, size_t n)
{
	uintptr_t s = (uintptr_t)src;

	if (n == 0)
		return true;
	if (!src || s + n < s)
		return false;
	if (!atomic_load_explicit(&vm_readv_unavailable, memory_order_relaxed)) {
		struct iovec local = {.iov_base = dst, .iov_len = n};
		struct iovec remote = {.iov_base = (void *)s, .iov_len = n};
		ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);

		if (got == (ssize_t)n)
			return true;
		if (got >= 0 || (errno != ENOSYS && errno != EPERM))
			return false;
		/*
		 * Why the fallback: a seccomp profile may forbid the syscall.
		 * Then the pointer is trusted as the real driver trusts it.
		 */
		atomic_store_explicit(&vm_readv_unavailable, 1, memory_order_relaxed);
	}
	memcpy(dst, src, n);
	return true;
}

static bool src_read(const struct sim_image_src *src, uint64_t off, void *dst, size_t n)
{
	if (src->len != SIZE_MAX) {
		if (!in_bounds(off, n, src->len))
			return false;
		memcpy(dst, src->base + off, n);
		return true;
	}
	if (off > SIM_IMAGE_MAX_BYTES || (uintptr_t)src->base + off < (uintptr_t)src->base)
		return false;
	return sim_image_safe_read(dst, src->base + off, n);
}

/* A private copy of [off, off+n) of src (n + 1 bytes, NUL-terminated), or NULL. */
static unsigned char *src_copy(const struct sim_image_src *src, uint64_t off, size_t n)
{
	unsigned char *buf;

	if (n > SIM_IMAGE_MAX_BYTES)
		return NULL;
	buf = malloc(n + 1);
	if (!buf)
		return NULL;
	if (!src_read(src, off, buf, n)) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/*
 * Length of the NUL-terminated text at src (without the NUL); for a bounded
 * source without a NUL, its whole length. SIZE_MAX when the text runs into
 * unreadable memory or past SIM_IMAGE_MAX_BYTES.
 */
static size_t src_strlen(const struct sim_image_src *src)
{
	unsigned char chunk[4096];
	size_t len = 0;

	if (src->len != SIZE_MAX) {
		const unsigned char *nul = memchr(src->base, 0, src->len);
		return nul ? (size_t)(nul - src->base) : src->len;
	}
	while (len < SIM_IMAGE_MAX_BYTES) {
		/* Reads never cross a page boundary they do not need to. */
		size_t n = sizeof(chunk) - (((uintptr_t)src->base + len) % sizeof(chunk));
		const unsigned char *nul;

		if (!src_read(src, len, chunk, n)) {
			/* The page may hold the end of the text: read it byte by byte. */
			for (size_t i = 0; i < n; i++) {
				if (!src_read(src, len + i, chunk, 1))
					return SIZE_MAX;
				if (chunk[0] == '\0')
					return len + i;
			}
			return SIZE_MAX;
		}
		nul = memchr(chunk, 0, n);
		if (nul)
			return len + (size_t)(nul - chunk);
		len += n;
	}
	return SIZE_MAX;
}

/* ---- decompression of fatbin entries ---- */

/*
 * Decodes an LZ4 block (no frame) of slen bytes into exactly dlen bytes.
 * Every read and write is bounds-checked; false on any inconsistency.
 */
static bool lz4_decode(const unsigned char *s, size_t slen, unsigned char *d, size_t dlen)
{
	size_t ip = 0, op = 0;

	while (ip < slen) {
		unsigned token = s[ip++];
		size_t lit = token >> 4, mlen = token & 15, moff;
		unsigned b;

		if (lit == 15) {
			do {
				if (ip >= slen)
					return false;
				b = s[ip++];
				lit += b;
			} while (b == 255);
		}
		if (lit > slen - ip || lit > dlen - op)
			return false;
		memcpy(d + op, s + ip, lit);
		ip += lit;
		op += lit;
		if (ip == slen)
			break;	/* the last sequence has literals only */
		if (slen - ip < 2)
			return false;
		moff = (size_t)s[ip] | (size_t)s[ip + 1] << 8;
		ip += 2;
		if (moff == 0 || moff > op)
			return false;
		if (mlen == 15) {
			do {
				if (ip >= slen)
					return false;
				b = s[ip++];
				mlen += b;
			} while (b == 255);
		}
		mlen += 4;
		if (mlen > dlen - op)
			return false;
		/* Byte by byte: the match may overlap what it produces. */
		for (size_t i = 0; i < mlen; i++, op++)
			d[op] = d[op - moff];
	}
	return op == dlen;
}

typedef size_t (*zstd_decompress_fn)(void *dst, size_t dcap, const void *src, size_t slen);
typedef unsigned (*zstd_is_error_fn)(size_t code);

static pthread_once_t zstd_once = PTHREAD_ONCE_INIT;
static zstd_decompress_fn zstd_decompress;
static zstd_is_error_fn zstd_is_error;

/*
 * zstd is a system library on every current distribution (dpkg and rpm use
 * it) but its headers are not a build dependency of cuslice: it is loaded
 * when the first zstd-compressed entry is met. Without it such entries are
 * skipped (another entry of the fatbin may still serve the device).
 */
static void zstd_load(void)
{
	void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
	void *dec, *iserr;

	if (!h)
		return;
	dec = dlsym(h, "ZSTD_decompress");
	iserr = dlsym(h, "ZSTD_isError");
	if (!dec || !iserr)
		return;
	memcpy(&zstd_decompress, &dec, sizeof(dec));
	memcpy(&zstd_is_error, &iserr, sizeof(iserr));
}

static bool zstd_decode(const unsigned char *s, size_t slen, unsigned char *d, size_t dlen)
{
	size_t n;

	pthread_once(&zstd_once, zstd_load);
	if (!zstd_decompress)
		return false;
	n = zstd_decompress(d, dlen, s, slen);
	return !zstd_is_error(n) && n == dlen;
}

/* ---- cubin (ELF) ---- */

struct shdr {
	uint32_t name, type;
	uint64_t flags, offset, size;
	uint32_t link, info;
	uint64_t entsize;
};

struct elf {
	const unsigned char *b;
	size_t n;
	uint64_t shoff;
	unsigned shnum;
	struct shdr shstr;
	char *err;
	size_t errlen;
};

static void get_shdr(const struct elf *e, unsigned i, struct shdr *s)
{
	const unsigned char *p = e->b + e->shoff + (uint64_t)i * ELF_SHDR_SIZE;

	s->name = rd32(p);
	s->type = rd32(p + 4);
	s->flags = rd64(p + 8);
	s->offset = rd64(p + 24);
	s->size = rd64(p + 32);
	s->link = rd32(p + 40);
	s->info = rd32(p + 44);
	s->entsize = rd64(p + 56);
}

/* Sections that occupy no bytes of the file. */
static bool shdr_nobits(const struct shdr *s)
{
	return s->type == ELF_SHT_NOBITS || s->type == ELF_SHT_CUDA_GLOBAL ||
	       s->type == ELF_SHT_CUDA_SHARED;
}

/* The section's bytes, or NULL when it has none or they lie outside the file. */
static const unsigned char *sec_data(const struct elf *e, const struct shdr *s)
{
	if (shdr_nobits(s) || !in_bounds(s->offset, s->size, e->n))
		return NULL;
	return e->b + s->offset;
}

/* The NUL-terminated string at idx of a string table section, or NULL. */
static const char *str_at(const struct elf *e, const struct shdr *tab, uint64_t idx)
{
	const unsigned char *d = sec_data(e, tab);

	if (!d || idx >= tab->size || !memchr(d + idx, 0, tab->size - idx))
		return NULL;
	return (const char *)d + idx;
}

static const char *sec_name(const struct elf *e, const struct shdr *s)
{
	return str_at(e, &e->shstr, s->name);
}

/* Device architecture of a cubin from its header (e.g. 90). */
static int elf_arch(const unsigned char *hdr)
{
	uint32_t flags = rd32(hdr + 48);

	/* CUDA 12.8 moved the SM number from bits 0..7 to bits 8..15 (OS/ABI 0x41). */
	return hdr[7] == ELF_OSABI_CUDA_V8 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
}

/* Validates the ELF header of b[0..n) as a 64-bit little-endian CUDA ELF. */
static bool elf_header_ok(const unsigned char *b, size_t n)
{
	return n >= 64 && memcmp(b, "\177ELF", 4) == 0 && b[4] == 2 /* ELFCLASS64 */ &&
	       b[5] == 1 /* little endian */ && rd16(b + 18) == ELF_EM_CUDA;
}

/* Ranks code of architecture `arch` for a device of compute capability cc; <0: unusable. */
static int rank_sass(int arch, bool specific, int cc)
{
	if (arch == cc)
		return 100000;
	if (!specific && arch / 10 == cc / 10 && arch < cc)
		return 50000 + arch;
	return -1;
}

static int rank_ptx(int arch, bool specific, int cc)
{
	if (arch <= 0 || arch > cc || (specific && arch != cc))
		return -1;
	return arch;
}

/* Called for each .nv.info record; false stops the walk as malformed. */
typedef bool (*nvinfo_fn)(unsigned attr, unsigned fmt, unsigned val, const unsigned char *payload,
			  void *arg);

/* Walks one .nv.info record list; calls fn for each record. False when malformed. */
static bool nvinfo_walk(const unsigned char *d, uint64_t size, nvinfo_fn fn, void *arg)
{
	uint64_t off = 0;

	while (off + 4 <= size) {
		unsigned fmt = d[off], attr = d[off + 1], val = rd16(d + off + 2);
		const unsigned char *payload = NULL;

		off += 4;
		if (fmt == EIFMT_SVAL) {
			if (val > size - off)
				return false;
			payload = d + off;
			off += val;
		} else if (fmt != EIFMT_NVAL && fmt != EIFMT_BVAL && fmt != EIFMT_HVAL) {
			return false;
		}
		if (!fn(attr, fmt, val, payload, arg))
			return false;
	}
	return off == size;
}

/* Per-symbol values from the module-wide .nv.info. */
struct sym_info {
	uint32_t nsyms;
	int *regs;
	int *frame;
};

static bool global_info_rec(unsigned attr, unsigned fmt, unsigned val, const unsigned char *p,
			    void *arg)
{
	struct sym_info *si = arg;
	uint32_t sym;

	if (fmt != EIFMT_SVAL || val < 8 || (attr != EIATTR_REGCOUNT && attr != EIATTR_FRAME_SIZE))
		return true;
	sym = rd32(p);
	if (sym >= si->nsyms)
		return true;
	if (attr == EIATTR_REGCOUNT)
		si->regs[sym] = (int)(rd32(p + 4) & 0xffff);
	else
		si->frame[sym] = (int)(rd32(p + 4) & 0x7fffffff);
	return true;
}

/* Per-kernel .nv.info records being collected. */
struct kinfo {
	struct sim_image_func *f;
	uint32_t nparams;		/* 1 + highest ordinal seen */
	uint32_t cap;
	bool *seen;
	uint32_t cbank_size;
	bool has_cbank_size;
	bool oom;
};

static bool kernel_info_rec(unsigned attr, unsigned fmt, unsigned val, const unsigned char *p,
			    void *arg)
{
	struct kinfo *k = arg;
	struct sim_image_func *f = k->f;

	switch (attr) {
	case EIATTR_KPARAM_INFO: {
		uint32_t ord, off, size;

		if (fmt != EIFMT_SVAL || val < 12)
			return false;
		ord = rd16(p + 4);
		off = rd16(p + 6);
		size = (rd32(p + 8) >> 18) & 0x3fff;
		if (size == 0 || off + size > SIM_IMAGE_MAX_PARAM_BYTES)
			return false;
		if (ord >= k->cap) {
			uint32_t cap = ord + 16;
			struct sim_image_param *np = realloc(f->params, cap * sizeof(*np));
			bool *ns;

			if (!np) {
				k->oom = true;
				return false;
			}
			f->params = np;
			ns = realloc(k->seen, cap * sizeof(*ns));
			if (!ns) {
				k->oom = true;
				return false;
			}
			memset(ns + k->cap, 0, (cap - k->cap) * sizeof(*ns));
			k->seen = ns;
			k->cap = cap;
		}
		if (k->seen[ord])
			return false;
		k->seen[ord] = true;
		f->params[ord].offset = off;
		f->params[ord].size = size;
		if (ord + 1 > k->nparams)
			k->nparams = ord + 1;
		return true;
	}
	case EIATTR_CBANK_PARAM_SIZE:
		if (fmt == EIFMT_HVAL) {
			k->cbank_size = val;
			k->has_cbank_size = true;
		}
		return true;
	case EIATTR_MAX_THREADS:
	case EIATTR_REQNTID:
	case EIATTR_CTA_PER_CLUSTER: {
		uint32_t x, y, z;
		uint64_t prod;

		if (fmt != EIFMT_SVAL || val < 12)
			return true;
		x = rd32(p);
		y = rd32(p + 4);
		z = rd32(p + 8);
		if (x > 1024 || y > 1024 || z > 1024)
			return false;
		prod = (uint64_t)x * y * z;
		if (attr == EIATTR_CTA_PER_CLUSTER) {
			f->cluster[0] = (int)x;
			f->cluster[1] = (int)y;
			f->cluster[2] = (int)z;
		} else if (attr == EIATTR_REQNTID) {
			f->reqntid[0] = (int)x;
			f->reqntid[1] = (int)y;
			f->reqntid[2] = (int)z;
			f->max_threads = (int)prod;
		} else if (!f->max_threads || prod < (uint64_t)f->max_threads) {
			f->max_threads = (int)prod;
		}
		return true;
	}
	case EIATTR_EXPLICIT_CLUSTER:
		f->cluster_must_be_set = true;
		return true;
	default:
		return true;
	}
}

/* Fills f's parameters and attributes from its .nv.info.<name> section. */
static CUresult elf_kernel_info(const struct elf *e, const struct shdr *info,
				struct sim_image_func *f)
{
	const unsigned char *d = sec_data(e, info);
	struct kinfo k = {.f = f};
	uint32_t end = 0;
	CUresult r = CUDA_SUCCESS;

	if (!d) {
		sim_image_set_err(e->err, e->errlen, "cubin: .nv.info.%s lies outside the image",
				  f->name);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	if (!nvinfo_walk(d, info->size, kernel_info_rec, &k)) {
		sim_image_set_err(e->err, e->errlen, "cubin: malformed .nv.info.%s", f->name);
		r = k.oom ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_IMAGE;
		goto out;
	}
	for (uint32_t i = 0; i < k.nparams; i++) {
		if (!k.seen[i]) {
			sim_image_set_err(e->err, e->errlen, "cubin: %s: parameter %u undescribed",
					  f->name, i);
			r = CUDA_ERROR_INVALID_IMAGE;
			goto out;
		}
		if (f->params[i].offset + f->params[i].size > end)
			end = f->params[i].offset + f->params[i].size;
	}
	f->nparams = k.nparams;
	f->param_bytes = end;
	if (k.has_cbank_size) {
		if (k.cbank_size < end) {
			sim_image_set_err(e->err, e->errlen, "cubin: %s: parameters exceed their bank",
					  f->name);
			r = CUDA_ERROR_INVALID_IMAGE;
			goto out;
		}
		f->param_bytes = k.cbank_size;
	}
out:
	free(k.seen);
	return r;
}

/* The virtual architecture recorded in .note.nv.cuinfo, or 0. */
static int elf_note_ptx_arch(const struct elf *e, const struct shdr *s)
{
	const unsigned char *d = sec_data(e, s);
	uint32_t namesz, descsz;
	uint64_t desc;

	if (!d || s->size < 12)
		return 0;
	namesz = rd32(d);
	descsz = rd32(d + 4);
	desc = 12 + (((uint64_t)namesz + 3) & ~3ull);
	if (descsz < 4 || !in_bounds(desc, 4, s->size))
		return 0;
	return rd16(d + desc + 2);
}

/* True for the sections that hold __device__ and __constant__ variables. */
static bool is_var_section(const char *name)
{
	const char *c = ".nv.constant";

	if (strcmp(name, ".nv.global") == 0 || strcmp(name, ".nv.global.init") == 0)
		return true;
	/* .nv.constantN (module banks), not .nv.constant0.<kernel> (parameters). */
	if (strncmp(name, c, strlen(c)) != 0 || !name[strlen(c)])
		return false;
	for (const char *p = name + strlen(c); *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

static CUresult elf_add_global(struct elf *e, struct sim_image *img, const char *name,
			       const struct shdr *sec, uint64_t value, uint64_t size)
{
	struct sim_image_global *g;
	const unsigned char *d;
	CUresult r;

	if (!in_bounds(value, size, sec->size) ||
	    size > (shdr_nobits(sec) ? SIM_IMAGE_MAX_VAR_BYTES : SIM_IMAGE_MAX_BYTES)) {
		sim_image_set_err(e->err, e->errlen, "cubin: variable %s lies outside its section",
				  name);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	for (uint32_t i = 0; i < img->nglobals; i++)
		if (strcmp(img->globals[i].name, name) == 0)
			return CUDA_SUCCESS;
	r = sim_image_add_global(img, &g);
	if (r)
		return r;
	g->size = size;
	g->name = strdup(name);
	if (!g->name)
		return CUDA_ERROR_OUT_OF_MEMORY;
	d = sec_data(e, sec);
	if (shdr_nobits(sec))
		return CUDA_SUCCESS;
	if (!d) {
		sim_image_set_err(e->err, e->errlen, "cubin: section of %s lies outside the image",
				  name);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	g->init = malloc(size);
	if (!g->init)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(g->init, d + value, size);
	return CUDA_SUCCESS;
}

/* Static shared memory of a kernel: its .nv.shared.<name> section, less the reserved part. */
static int elf_static_smem(const struct elf *e, const char *kname, bool reserved)
{
	for (unsigned i = 1; i < e->shnum; i++) {
		struct shdr s;
		const char *n;

		get_shdr(e, i, &s);
		n = sec_name(e, &s);
		if (n && strncmp(n, ".nv.shared.", 11) == 0 && strcmp(n + 11, kname) == 0) {
			uint64_t v = s.size;

			if (reserved)
				v = v > RESERVED_SMEM ? v - RESERVED_SMEM : 0;
			return v > INT32_MAX ? INT32_MAX : (int)v;
		}
	}
	return 0;
}

/*
 * Parses the cubin b[0..n) into img. `cc` > 0: refuse code the device cannot
 * run (a cubin loaded by itself); 0: the caller already chose it.
 */
static CUresult parse_elf(const unsigned char *b, size_t n, int cc, struct sim_image *img,
			  char *err, size_t errlen)
{
	struct elf e = {.b = b, .n = n, .err = err, .errlen = errlen};
	struct shdr symtab = {0}, strtab, s;
	struct sym_info si = {0};
	unsigned shstrndx, nsymtab = 0;
	int ptx_arch = 0, const_bytes = 0;
	bool reserved = false;
	CUresult r = CUDA_SUCCESS;

	if (!elf_header_ok(b, n)) {
		sim_image_set_err(err, errlen, "cubin: not a 64-bit CUDA ELF image");
		return CUDA_ERROR_INVALID_IMAGE;
	}
	e.shoff = rd64(b + 40);
	e.shnum = rd16(b + 60);
	shstrndx = rd16(b + 62);
	if (rd16(b + 58) != ELF_SHDR_SIZE || e.shnum == 0 || shstrndx >= e.shnum ||
	    !in_bounds(e.shoff, (uint64_t)e.shnum * ELF_SHDR_SIZE, n)) {
		sim_image_set_err(err, errlen, "cubin: bad section header table");
		return CUDA_ERROR_INVALID_IMAGE;
	}
	img->arch = elf_arch(b);
	if (cc > 0 && rank_sass(img->arch, false, cc) < 0) {
		sim_image_set_err(err, errlen, "cubin for sm_%d cannot run on a device of compute "
				  "capability %d.%d", img->arch, cc / 10, cc % 10);
		return CUDA_ERROR_NO_BINARY_FOR_GPU;
	}
	get_shdr(&e, shstrndx, &e.shstr);
	if (!sec_data(&e, &e.shstr)) {
		sim_image_set_err(err, errlen, "cubin: section name table outside the image");
		return CUDA_ERROR_INVALID_IMAGE;
	}

	for (unsigned i = 1; i < e.shnum; i++) {
		const char *name;

		get_shdr(&e, i, &s);
		name = sec_name(&e, &s);
		if (!name) {
			sim_image_set_err(err, errlen, "cubin: section %u has a bad name", i);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		if (s.type == ELF_SHT_SYMTAB && !nsymtab++)
			symtab = s;
		else if (s.type == ELF_SHT_NOTE && strcmp(name, ".note.nv.cuinfo") == 0)
			ptx_arch = elf_note_ptx_arch(&e, &s);
		else if (strncmp(name, ".nv.shared.reserved.", 20) == 0)
			reserved = true;
		else if (strcmp(name, ".nv.constant3") == 0)
			const_bytes = s.size > INT32_MAX ? INT32_MAX : (int)s.size;
	}
	if (!nsymtab || symtab.link >= e.shnum || !sec_data(&e, &symtab) ||
	    (symtab.entsize && symtab.entsize != ELF_SYM_SIZE)) {
		sim_image_set_err(err, errlen, "cubin: no usable symbol table");
		return CUDA_ERROR_INVALID_IMAGE;
	}
	get_shdr(&e, symtab.link, &strtab);
	if (!sec_data(&e, &strtab)) {
		sim_image_set_err(err, errlen, "cubin: string table outside the image");
		return CUDA_ERROR_INVALID_IMAGE;
	}
	si.nsyms = (uint32_t)(symtab.size / ELF_SYM_SIZE);
	si.regs = calloc(si.nsyms + 1, sizeof(int));
	si.frame = calloc(si.nsyms + 1, sizeof(int));
	if (!si.regs || !si.frame) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	for (unsigned i = 1; i < e.shnum; i++) {
		const unsigned char *d;

		get_shdr(&e, i, &s);
		if (s.type != ELF_SHT_CUDA_INFO || strcmp(sec_name(&e, &s), ".nv.info") != 0)
			continue;
		d = sec_data(&e, &s);
		if (!d || !nvinfo_walk(d, s.size, global_info_rec, &si)) {
			sim_image_set_err(err, errlen, "cubin: malformed .nv.info");
			r = CUDA_ERROR_INVALID_IMAGE;
			goto out;
		}
	}

	for (uint32_t i = 1; i < si.nsyms && r == CUDA_SUCCESS; i++) {
		const unsigned char *sym = b + symtab.offset + (uint64_t)i * ELF_SYM_SIZE;
		unsigned type = sym[4] & 0xf, other = sym[5], shndx = rd16(sym + 6);
		uint64_t value = rd64(sym + 8), size = rd64(sym + 16);
		const char *name = str_at(&e, &strtab, rd32(sym));
		struct sim_image_func *f;
		struct shdr text;

		if (!name) {
			sim_image_set_err(err, errlen, "cubin: symbol %u has a bad name", i);
			r = CUDA_ERROR_INVALID_IMAGE;
			break;
		}
		if (!name[0] || shndx == 0 || shndx >= e.shnum)
			continue;
		get_shdr(&e, shndx, &s);
		if (type == ELF_STT_OBJECT || type == ELF_STT_CUDA_OBJECT) {
			const char *sn = sec_name(&e, &s);

			if (size > 0 && is_var_section(sn))
				r = elf_add_global(&e, img, name, &s, value, size);
			continue;
		}
		if (type != ELF_STT_FUNC || !(other & ELF_STO_CUDA_ENTRY) ||
		    sim_image_find_func(img, name))
			continue;
		text = s;
		r = sim_image_add_func(img, &f);
		if (r)
			break;
		f->name = strdup(name);
		if (!f->name) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		/* The kernel's .nv.info.<name> names its text section in sh_info. */
		for (unsigned j = 1; j < e.shnum; j++) {
			struct shdr inf;
			const char *in;

			get_shdr(&e, j, &inf);
			in = sec_name(&e, &inf);
			if (inf.type == ELF_SHT_CUDA_INFO && inf.info == shndx &&
			    strncmp(in, ".nv.info.", 9) == 0) {
				r = elf_kernel_info(&e, &inf, f);
				break;
			}
		}
		/* Before CUDA 12.8 the register count sat in the text section's sh_info. */
		f->num_regs = si.regs[i] ? si.regs[i] : (int)(text.info >> 24);
		if (f->num_regs == 0)
			f->num_regs = SIM_IMAGE_PTX_DEFAULT_REGS;
		f->local_bytes = si.frame[i];
		f->static_smem = elf_static_smem(&e, name, reserved);
		f->binary_version = img->arch;
		f->ptx_version = ptx_arch ? ptx_arch : img->arch;
	}
	for (uint32_t i = 0; i < img->nfuncs; i++)
		img->funcs[i].const_bytes = const_bytes;
out:
	free(si.regs);
	free(si.frame);
	return r;
}

/*
 * Extent of the cubin at src from its headers: the furthest of the section
 * table, the program header table and every section with file content.
 * 0 when the headers are unreadable or inconsistent.
 */
static size_t elf_extent(const struct sim_image_src *src)
{
	unsigned char hdr[64], sh[ELF_SHDR_SIZE];
	uint64_t shoff, phoff, end;
	unsigned shnum, phnum, phentsize;

	if (!src_read(src, 0, hdr, sizeof(hdr)) || !elf_header_ok(hdr, sizeof(hdr)))
		return 0;
	shoff = rd64(hdr + 40);
	phoff = rd64(hdr + 32);
	shnum = rd16(hdr + 60);
	phnum = rd16(hdr + 56);
	phentsize = rd16(hdr + 54);
	if (rd16(hdr + 58) != ELF_SHDR_SIZE || shoff > SIM_IMAGE_MAX_BYTES ||
	    phoff > SIM_IMAGE_MAX_BYTES)
		return 0;
	end = 64;
	if (shoff + (uint64_t)shnum * ELF_SHDR_SIZE > end)
		end = shoff + (uint64_t)shnum * ELF_SHDR_SIZE;
	if (phnum && phoff + (uint64_t)phnum * phentsize > end)
		end = phoff + (uint64_t)phnum * phentsize;
	for (unsigned i = 1; i < shnum; i++) {
		struct shdr s;

		if (!src_read(src, shoff + (uint64_t)i * ELF_SHDR_SIZE, sh, sizeof(sh)))
			return 0;
		s.type = rd32(sh + 4);
		s.offset = rd64(sh + 24);
		s.size = rd64(sh + 32);
		if (shdr_nobits(&s))
			continue;
		if (s.offset > SIM_IMAGE_MAX_BYTES || s.size > SIM_IMAGE_MAX_BYTES)
			return 0;
		if (s.offset + s.size > end)
			end = s.offset + s.size;
	}
	return end > SIM_IMAGE_MAX_BYTES ? 0 : (size_t)end;
}

/* ---- fatbin ---- */

struct fat_entry {
	uint64_t payload;		/* offset of the payload in the fatbin */
	uint64_t size;			/* payload bytes */
	uint64_t csize;			/* compressed bytes (0: not compressed) */
	uint64_t dsize;			/* decompressed bytes */
	uint64_t flags;
	unsigned kind;
	int arch;
	int rank;
};

/* The payload of entry fe as plain bytes (decompressed), or NULL with *why set. */
static unsigned char *fat_payload(const struct sim_image_src *src, const struct fat_entry *fe,
				  size_t *ret_len, CUresult *why)
{
	unsigned char *raw, *out;
	size_t clen;
	bool ok;

	*why = CUDA_ERROR_INVALID_IMAGE;
	raw = src_copy(src, fe->payload, fe->size);
	if (!raw)
		return NULL;
	if (!(fe->flags & (FATBIN_FLAG_LZ4 | FATBIN_FLAG_ZSTD))) {
		*ret_len = fe->size;
		return raw;
	}
	clen = fe->csize ? fe->csize : fe->size;
	if (clen > fe->size || fe->dsize == 0 || fe->dsize > SIM_IMAGE_MAX_BYTES) {
		free(raw);
		return NULL;
	}
	out = malloc(fe->dsize + 1);
	if (!out) {
		free(raw);
		*why = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	if (fe->flags & FATBIN_FLAG_ZSTD) {
		ok = zstd_decode(raw, clen, out, fe->dsize);
		if (!ok && !zstd_decompress)
			*why = CUDA_ERROR_NOT_SUPPORTED;
	} else {
		ok = lz4_decode(raw, clen, out, fe->dsize);
	}
	free(raw);
	if (!ok) {
		free(out);
		return NULL;
	}
	out[fe->dsize] = '\0';
	*ret_len = fe->dsize;
	return out;
}

#define FAT_MAX_ENTRIES 4096

static CUresult parse_fatbin(const struct sim_image_src *src, int cc, struct sim_image *img,
			     char *err, size_t errlen)
{
	unsigned char hdr[16], eh[FATBIN_ENTRY_MIN_HEADER], last;
	struct fat_entry *ents = NULL;
	unsigned nents = 0, hsize;
	uint64_t fat_size, off, end;
	CUresult r = CUDA_ERROR_NO_BINARY_FOR_GPU, why = CUDA_SUCCESS;

	if (!src_read(src, 0, hdr, sizeof(hdr)) || rd32(hdr) != FATBIN_MAGIC) {
		sim_image_set_err(err, errlen, "fatbin: unreadable header");
		return CUDA_ERROR_INVALID_IMAGE;
	}
	hsize = rd16(hdr + 6);
	fat_size = rd64(hdr + 8);
	if (hsize < 16 || hsize > 4096 || fat_size > SIM_IMAGE_MAX_BYTES) {
		sim_image_set_err(err, errlen, "fatbin: bad header");
		return CUDA_ERROR_INVALID_IMAGE;
	}
	end = hsize + fat_size;
	ents = calloc(FAT_MAX_ENTRIES, sizeof(*ents));
	if (!ents)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (off = hsize; off < end; nents++) {
		struct fat_entry *fe = &ents[nents];
		uint32_t ehsize;

		if (nents == FAT_MAX_ENTRIES || end - off < sizeof(eh) ||
		    !src_read(src, off, eh, sizeof(eh))) {
			sim_image_set_err(err, errlen, "fatbin: entry %u truncated", nents);
			r = CUDA_ERROR_INVALID_IMAGE;
			goto out;
		}
		ehsize = rd32(eh + 4);
		fe->kind = rd16(eh);
		fe->size = rd64(eh + 8);
		fe->csize = rd32(eh + 16);
		fe->arch = (int)rd32(eh + 28);
		fe->flags = rd64(eh + 40);
		fe->dsize = rd64(eh + 56);
		fe->payload = off + ehsize;
		if (ehsize < FATBIN_ENTRY_MIN_HEADER || ehsize > 4096 ||
		    !in_bounds(off + ehsize, fe->size, end)) {
			sim_image_set_err(err, errlen, "fatbin: entry %u has a bad header", nents);
			r = CUDA_ERROR_INVALID_IMAGE;
			goto out;
		}
		/* A truncated image fails here rather than when its entry is chosen. */
		if (fe->size && !src_read(src, fe->payload + fe->size - 1, &last, 1)) {
			sim_image_set_err(err, errlen, "fatbin: entry %u truncated", nents);
			r = CUDA_ERROR_INVALID_IMAGE;
			goto out;
		}
		if (fe->kind == FATBIN_KIND_ELF)
			fe->rank = rank_sass(fe->arch, fe->flags & FATBIN_FLAG_ARCH_SPECIFIC, cc);
		else if (fe->kind == FATBIN_KIND_PTX)
			fe->rank = rank_ptx(fe->arch, fe->flags & FATBIN_FLAG_ARCH_SPECIFIC, cc);
		else
			fe->rank = -1;	/* LTO IR and future kinds: not loadable */
		off = fe->payload + fe->size;
	}

	/* Best entry first; one whose compression cannot be undone yields to the next. */
	for (;;) {
		struct fat_entry *best = NULL;
		unsigned char *buf;
		size_t len;

		for (unsigned i = 0; i < nents; i++)
			if (ents[i].rank >= 0 && (!best || ents[i].rank > best->rank))
				best = &ents[i];
		if (!best)
			break;
		best->rank = -1;
		buf = fat_payload(src, best, &len, &why);
		if (!buf) {
			if (why == CUDA_ERROR_OUT_OF_MEMORY) {
				r = why;
				goto out;
			}
			sim_image_set_err(err, errlen, "fatbin: %s entry for %s_%d cannot be %s",
					  best->kind == FATBIN_KIND_ELF ? "cubin" : "PTX",
					  best->kind == FATBIN_KIND_ELF ? "sm" : "compute", best->arch,
					  why == CUDA_ERROR_NOT_SUPPORTED
						  ? "decompressed (libzstd.so.1 not found)"
						  : "read or decompressed");
			continue;
		}
		if (best->kind == FATBIN_KIND_ELF)
			r = parse_elf(buf, len, 0, img, err, errlen);
		else
			r = sim_image_parse_ptx((const char *)buf, len, cc, img, err, errlen);
		img->code = best->kind == FATBIN_KIND_ELF ? SIM_IMAGE_ELF : SIM_IMAGE_PTX;
		free(buf);
		goto out;
	}
	/* Entries for this device existed but none could be decoded: the image is at fault. */
	if (why != CUDA_SUCCESS)
		r = CUDA_ERROR_INVALID_IMAGE;
	else
		sim_image_set_err(err, errlen, "fatbin: no code for compute capability %d.%d",
				  cc / 10, cc % 10);
out:
	free(ents);
	return r;
}

/* ---- entry ---- */

static CUresult parse_src(const struct sim_image_src *src, int cc, struct sim_image *img,
			  char *err, size_t errlen)
{
	unsigned char m[24];
	size_t len;
	unsigned char *buf;
	CUresult r;

	if (src_read(src, 0, m, 4)) {
		if (memcmp(m, "\177ELF", 4) == 0) {
			img->kind = img->code = SIM_IMAGE_ELF;
			len = src->len != SIZE_MAX ? src->len : elf_extent(src);
			buf = len ? src_copy(src, 0, len) : NULL;
			if (!buf) {
				sim_image_set_err(err, errlen, "cubin: truncated or unreadable");
				return CUDA_ERROR_INVALID_IMAGE;
			}
			r = parse_elf(buf, len, cc, img, err, errlen);
			free(buf);
			return r;
		}
		if (rd32(m) == FATBIN_MAGIC) {
			img->kind = SIM_IMAGE_FATBIN;
			return parse_fatbin(src, cc, img, err, errlen);
		}
		if (rd32(m) == WRAPPER_MAGIC) {
			struct sim_image_src inner = {.len = SIZE_MAX};
			uint64_t data;

			/* struct __fatBinC_Wrapper_t {int magic, version; const void *data; void *}. */
			if (!src_read(src, 0, m, 16)) {
				sim_image_set_err(err, errlen, "fatbin wrapper: truncated");
				return CUDA_ERROR_INVALID_IMAGE;
			}
			data = rd64(m + 8);
			inner.base = (const unsigned char *)(uintptr_t)data;
			if (!src_read(&inner, 0, m, 4) || rd32(m) != FATBIN_MAGIC) {
				sim_image_set_err(err, errlen, "fatbin wrapper: no fatbin at its data");
				return CUDA_ERROR_INVALID_IMAGE;
			}
			img->kind = SIM_IMAGE_WRAPPER;
			return parse_fatbin(&inner, cc, img, err, errlen);
		}
	}
	img->kind = img->code = SIM_IMAGE_PTX;
	len = src_strlen(src);
	if (len == SIZE_MAX) {
		sim_image_set_err(err, errlen, "PTX: text not NUL-terminated in readable memory");
		return CUDA_ERROR_INVALID_PTX;
	}
	buf = src_copy(src, 0, len);
	if (!buf)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = sim_image_parse_ptx((const char *)buf, len, cc, img, err, errlen);
	free(buf);
	return r;
}

CUresult sim_image_parse(const struct sim_image_src *src, int cc, struct sim_image **ret,
			 char *err, size_t errlen)
{
	struct sim_image *img = calloc(1, sizeof(*img));
	CUresult r;

	if (!img)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (err && errlen)
		err[0] = '\0';
	r = parse_src(src, cc, img, err, errlen);
	if (r) {
		sim_image_free(img);
		return r;
	}
	*ret = img;
	return CUDA_SUCCESS;
}
