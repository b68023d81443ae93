/*
 * Writes a parsed image back as a cubin: the output of cusim's linker
 * (cuLinkComplete), which cuModuleLoadData must load again.
 *
 * The cubin carries exactly what cusim's loader reads from a cubin
 * (sim-image.c), in the layout nvcc 13 uses (OS/ABI 0x41, the architecture
 * in e_flags bits 8..15):
 *   .symtab/.strtab	a global STT_FUNC symbol with STO_CUDA_ENTRY per
 *			kernel, a global STT_OBJECT symbol per variable;
 *   .text.NAME		the kernel's section (16 bytes of nothing: no code runs);
 *   .nv.info.NAME	(sh_info = .text.NAME) KPARAM_INFO per parameter,
 *			CBANK_PARAM_SIZE, MAX_THREADS or REQNTID, CTA_PER_CLUSTER,
 *			EXPLICIT_CLUSTER;
 *   .nv.info		REGCOUNT and FRAME_SIZE per kernel symbol;
 *   .nv.shared.NAME	NOBITS, the kernel's static shared memory;
 *   .nv.global		NOBITS, zero-filled variables;
 *   .nv.global.init	initialized variables, with their bytes;
 *   .nv.constant3	the module's __constant__ bytes (CONST_SIZE_BYTES);
 *   .note.nv.cuinfo	the virtual architecture (PTX_VERSION).
 */
#include "sim-image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	SHT_PROGBITS = 1,
	SHT_SYMTAB = 2,
	SHT_STRTAB = 3,
	SHT_NOTE = 7,
	SHT_NOBITS = 8,
	SHT_CUDA_INFO = 0x70000000,
	SHF_WRITE = 1,
	SHF_ALLOC = 2,
	SHF_EXEC = 4,
	STT_OBJECT = 1,
	STT_FUNC = 2,
	STB_GLOBAL = 1,
	STO_CUDA_ENTRY = 0x10,
	EIFMT_NVAL = 1,
	EIFMT_HVAL = 3,
	EIFMT_SVAL = 4,
	EIATTR_MAX_THREADS = 0x05,
	EIATTR_REQNTID = 0x10,
	EIATTR_FRAME_SIZE = 0x11,
	EIATTR_KPARAM_INFO = 0x17,
	EIATTR_CBANK_PARAM_SIZE = 0x19,
	EIATTR_REGCOUNT = 0x2f,
	EIATTR_CTA_PER_CLUSTER = 0x3d,
	EIATTR_EXPLICIT_CLUSTER = 0x3e,
};

#define TEXT_BYTES 16u
#define VAR_ALIGN 16u

/* A growable byte buffer; `oom` sticks once an allocation failed. */
struct buf {
	unsigned char *p;
	size_t n, cap;
	bool oom;
};

static void put(struct buf *b, const void *src, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		unsigned char *p;

		while (cap < b->n + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	if (src)
		memcpy(b->p + b->n, src, n);
	else
		memset(b->p + b->n, 0, n);
	b->n += n;
}

static void put8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void put16(struct buf *b, uint16_t v)
{
	unsigned char le[2] = {(unsigned char)v, (unsigned char)(v >> 8)};

	put(b, le, 2);
}

static void put32(struct buf *b, uint32_t v)
{
	put16(b, (uint16_t)v);
	put16(b, (uint16_t)(v >> 16));
}

static void put64(struct buf *b, uint64_t v)
{
	put32(b, (uint32_t)v);
	put32(b, (uint32_t)(v >> 32));
}

static void pad_to(struct buf *b, size_t align)
{
	while (!b->oom && b->n % align)
		put8(b, 0);
}

/* Adds a NUL-terminated name to a string table; returns its offset. */
static uint32_t str_add(struct buf *tab, const char *s)
{
	uint32_t off = (uint32_t)tab->n;

	put(tab, s, strlen(s) + 1);
	return off;
}

struct section {
	uint32_t name, type, link, info;
	uint64_t flags, size, align, entsize;
	struct buf data;		/* file bytes (none for NOBITS) */
};

struct writer {
	struct section *sec;
	unsigned nsec, cap;
	struct buf shstr, str, sym;
	bool oom;
};

/* Appends a section; returns its index (0 when out of memory). */
static unsigned sec_add(struct writer *w, const char *name, uint32_t type, uint64_t flags)
{
	struct section *s;

	if (w->nsec == w->cap) {
		unsigned cap = w->cap ? 2 * w->cap : 16;
		struct section *v = realloc(w->sec, cap * sizeof(*v));

		if (!v) {
			w->oom = true;
			return 0;
		}
		w->sec = v;
		w->cap = cap;
	}
	s = &w->sec[w->nsec];
	memset(s, 0, sizeof(*s));
	s->name = name ? str_add(&w->shstr, name) : 0;
	s->type = type;
	s->flags = flags;
	s->align = 1;
	return w->nsec++;
}

static void sym_add(struct writer *w, const char *name, unsigned type, unsigned other,
		    unsigned shndx, uint64_t value, uint64_t size)
{
	put32(&w->sym, str_add(&w->str, name));
	put8(&w->sym, (uint8_t)(STB_GLOBAL << 4 | type));
	put8(&w->sym, (uint8_t)other);
	put16(&w->sym, (uint16_t)shndx);
	put64(&w->sym, value);
	put64(&w->sym, size);
}

/* An .nv.info record with a payload of three u32 (launch bounds, cluster shape). */
static void info_dims(struct buf *b, unsigned attr, const int d[3])
{
	put8(b, EIFMT_SVAL);
	put8(b, (uint8_t)attr);
	put16(b, 12);
	for (int i = 0; i < 3; i++)
		put32(b, (uint32_t)(d[i] > 0 ? d[i] : 1));
}

/* The per-kernel .nv.info.NAME records. */
static void kernel_info(struct buf *b, const struct sim_image_func *f)
{
	for (uint32_t i = 0; i < f->nparams; i++) {
		put8(b, EIFMT_SVAL);
		put8(b, EIATTR_KPARAM_INFO);
		put16(b, 12);
		put32(b, 0);
		put16(b, (uint16_t)i);
		put16(b, (uint16_t)f->params[i].offset);
		put32(b, (f->params[i].size & 0x3fff) << 18);
	}
	put8(b, EIFMT_HVAL);
	put8(b, EIATTR_CBANK_PARAM_SIZE);
	put16(b, (uint16_t)f->param_bytes);
	if (f->reqntid[0]) {
		info_dims(b, EIATTR_REQNTID, f->reqntid);
	} else if (f->max_threads) {
		int d[3] = {f->max_threads, 1, 1};

		info_dims(b, EIATTR_MAX_THREADS, d);
	}
	if (f->cluster[0])
		info_dims(b, EIATTR_CTA_PER_CLUSTER, f->cluster);
	if (f->cluster_must_be_set) {
		put8(b, EIFMT_NVAL);
		put8(b, EIATTR_EXPLICIT_CLUSTER);
		put16(b, 0);
	}
}

/* A module-wide .nv.info record {symbol, value}. */
static void info_sym(struct buf *b, unsigned attr, uint32_t sym, uint32_t v)
{
	put8(b, EIFMT_SVAL);
	put8(b, (uint8_t)attr);
	put16(b, 8);
	put32(b, sym);
	put32(b, v);
}

static void writer_free(struct writer *w)
{
	for (unsigned i = 0; i < w->nsec; i++)
		free(w->sec[i].data.p);
	free(w->sec);
	free(w->shstr.p);
	free(w->str.p);
	free(w->sym.p);
}

/* Lays out the sections after the ELF header and writes the whole file. */
static CUresult emit(struct writer *w, int arch, unsigned shstrndx, unsigned char **ret,
		     size_t *ret_len)
{
	struct buf out = {0};
	uint64_t *offs = calloc(w->nsec, sizeof(*offs));
	uint64_t shoff;

	if (!offs)
		return CUDA_ERROR_OUT_OF_MEMORY;
	put(&out, NULL, 64);
	for (unsigned i = 1; i < w->nsec; i++) {
		struct section *s = &w->sec[i];

		if (s->type == SHT_NOBITS)
			continue;
		pad_to(&out, s->align);
		offs[i] = out.n;
		put(&out, s->data.p, s->data.n);
		s->size = s->data.n;
	}
	pad_to(&out, 8);
	shoff = out.n;
	for (unsigned i = 0; i < w->nsec; i++) {
		const struct section *s = &w->sec[i];

		put32(&out, s->name);
		put32(&out, i ? s->type : 0);
		put64(&out, s->flags);
		put64(&out, 0);		/* sh_addr */
		put64(&out, offs[i]);
		put64(&out, i ? s->size : 0);
		put32(&out, s->link);
		put32(&out, s->info);
		put64(&out, i ? s->align : 0);
		put64(&out, s->entsize);
	}
	free(offs);
	if (out.oom) {
		free(out.p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	/* The ELF header, in place. */
	unsigned char *h = out.p;
	memset(h, 0, 64);
	memcpy(h, "\177ELF", 4);
	h[4] = 2;		/* ELFCLASS64 */
	h[5] = 1;		/* little endian */
	h[6] = 1;		/* EV_CURRENT */
	h[7] = 0x41;		/* CUDA OS/ABI, CUDA 12.8+ layout */
	h[8] = 8;		/* its ABI version */
	h[16] = 2;		/* ET_EXEC */
	h[18] = 190;		/* EM_CUDA */
	h[20] = 1;		/* e_version */
	for (int i = 0; i < 8; i++)
		h[40 + i] = (unsigned char)(shoff >> (8 * i));
	h[48 + 1] = (unsigned char)arch;	/* e_flags: SM in bits 8..15 */
	h[52] = 64;		/* e_ehsize */
	h[54] = 56;		/* e_phentsize */
	h[58] = 64;		/* e_shentsize */
	h[60] = (unsigned char)w->nsec;
	h[61] = (unsigned char)(w->nsec >> 8);
	h[62] = (unsigned char)shstrndx;
	h[63] = (unsigned char)(shstrndx >> 8);
	*ret = out.p;
	*ret_len = out.n;
	return CUDA_SUCCESS;
}

CUresult sim_image_write_cubin(const struct sim_image *img, int arch, unsigned char **ret,
			       size_t *ret_len)
{
	struct writer w = {0};
	unsigned shstrtab, strtab, symtab, note, info, glob = 0, init = 0, cbank;
	uint32_t nsym = 1;
	int const_bytes = 0, ptx = arch;
	char name[512];
	CUresult r;

	/* Three sections per kernel: section indexes are 16 bits. */
	if (img->nfuncs > 20000)
		return CUDA_ERROR_INVALID_IMAGE;
	put(&w.str, NULL, 1);	/* offset 0 of a string table is the empty name */
	put(&w.shstr, NULL, 1);
	put(&w.sym, NULL, 24);	/* symbol 0 */
	sec_add(&w, NULL, 0, 0);
	shstrtab = sec_add(&w, ".shstrtab", SHT_STRTAB, 0);
	strtab = sec_add(&w, ".strtab", SHT_STRTAB, 0);
	symtab = sec_add(&w, ".symtab", SHT_SYMTAB, 0);
	note = sec_add(&w, ".note.nv.cuinfo", SHT_NOTE, 0);
	info = sec_add(&w, ".nv.info", SHT_CUDA_INFO, 0);
	for (uint32_t i = 0; i < img->nfuncs; i++) {
		const struct sim_image_func *f = &img->funcs[i];
		unsigned text, kinfo, shared;

		if (f->const_bytes > const_bytes)
			const_bytes = f->const_bytes;
		if (i == 0 && f->ptx_version)
			ptx = f->ptx_version;
		snprintf(name, sizeof(name), ".text.%s", f->name);
		text = sec_add(&w, name, SHT_PROGBITS, SHF_ALLOC | SHF_EXEC);
		snprintf(name, sizeof(name), ".nv.info.%s", f->name);
		kinfo = sec_add(&w, name, SHT_CUDA_INFO, 0);
		snprintf(name, sizeof(name), ".nv.shared.%s", f->name);
		shared = sec_add(&w, name, SHT_NOBITS, SHF_ALLOC | SHF_WRITE);
		if (w.oom)
			break;
		put(&w.sec[text].data, NULL, TEXT_BYTES);
		w.sec[text].align = 128;
		w.sec[kinfo].info = text;
		w.sec[kinfo].align = 4;
		kernel_info(&w.sec[kinfo].data, f);
		w.sec[shared].size = (uint64_t)f->static_smem;
		sym_add(&w, f->name, STT_FUNC, STO_CUDA_ENTRY, text, 0, TEXT_BYTES);
		info_sym(&w.sec[info].data, EIATTR_REGCOUNT, nsym, (uint32_t)f->num_regs);
		info_sym(&w.sec[info].data, EIATTR_FRAME_SIZE, nsym, (uint32_t)f->local_bytes);
		nsym++;
	}
	for (uint32_t i = 0; i < img->nglobals && !w.oom; i++) {
		const struct sim_image_global *g = &img->globals[i];
		unsigned *idx = g->init ? &init : &glob;
		struct section *s;
		uint64_t off;

		if (!*idx)
			*idx = g->init ? sec_add(&w, ".nv.global.init", SHT_PROGBITS,
						 SHF_ALLOC | SHF_WRITE)
				       : sec_add(&w, ".nv.global", SHT_NOBITS, SHF_ALLOC | SHF_WRITE);
		if (w.oom)
			break;
		s = &w.sec[*idx];
		s->align = VAR_ALIGN;
		if (g->init) {
			pad_to(&s->data, VAR_ALIGN);
			off = s->data.n;
			put(&s->data, g->init, g->size);
		} else {
			off = sim_align_up(s->size, VAR_ALIGN);
			s->size = off + g->size;
		}
		sym_add(&w, g->name, STT_OBJECT, 0, *idx, off, g->size);
		nsym++;
	}
	if (const_bytes > 0 && !w.oom) {
		cbank = sec_add(&w, ".nv.constant3", SHT_PROGBITS, SHF_ALLOC);
		if (cbank) {
			put(&w.sec[cbank].data, NULL, (size_t)const_bytes);
			w.sec[cbank].align = 4;
		}
	}
	/* .note.nv.cuinfo: name "NVIDIA Corp", a descriptor whose second u16 is the PTX arch. */
	if (!w.oom) {
		struct buf *n = &w.sec[note].data;

		put32(n, 12);
		put32(n, 8);
		put32(n, 1000);
		put(n, "NVIDIA Corp", 12);
		put16(n, 2);
		put16(n, (uint16_t)ptx);
		put16(n, 0x5a);		/* the toolkit's version (CUDA 13.0 writes 0x5a), unused */
		put16(n, 0);
		w.sec[note].align = 4;
		w.sec[info].align = 4;
		w.sec[symtab].link = strtab;
		w.sec[symtab].info = 1;	/* every symbol but the first is global */
		w.sec[symtab].entsize = 24;
		w.sec[symtab].align = 8;
		w.sec[symtab].data = w.sym;
		w.sym = (struct buf){0};
		w.sec[strtab].data = w.str;
		w.str = (struct buf){0};
		w.sec[shstrtab].data = w.shstr;
		w.shstr = (struct buf){0};
	}
	for (unsigned i = 0; i < w.nsec && !w.oom; i++)
		w.oom = w.sec[i].data.oom;
	r = w.oom || w.sym.oom || w.str.oom || w.shstr.oom
		    ? CUDA_ERROR_OUT_OF_MEMORY
		    : emit(&w, arch, shstrtab, ret, ret_len);
	writer_free(&w);
	return r;
}
