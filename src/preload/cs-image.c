/*
 * The device memory a module image declares, read before the driver loads
 * it: the bytes of its __device__ variables. That is the floor of what the
 * load takes on the GPU (the driver adds constant banks, code and local
 * memory, and rounds), reserved before the driver is asked so that a group
 * at its limit cannot load a module whose variables do not fit
 * (cs-module.c measures the rest).
 *
 * What is read, as the CUDA 13.0 toolkit writes it (docs/cusim-modules.md
 * has the formats):
 *   cubin   ELF64: the sizes of the sections .nv.global (zero-filled
 *           variables) and .nv.global.init (initialized ones);
 *   PTX     module-scope .global declarations that define storage (not
 *           .extern): element size x vector width x every [N];
 *   fatbin  the first uncompressed cubin entry, else the first uncompressed
 *           PTX entry (every entry of a fatbin comes from the same source and
 *           declares the same variables); compressed entries are not
 *           decompressed here, and a fatbin with nothing else has floor 0;
 *   wrapper a cudart fatbin wrapper (magic 0x466243b1): its fatbin.
 * Anything else, or anything malformed, is 0: the load itself decides.
 *
 * The caller's pointer comes without a length and is read only through
 * process_vm_readv on the process itself, which fails instead of faulting
 * on unmapped memory (where a seccomp profile forbids the call the pointer
 * is trusted, as the driver trusts it). Files are read with pread. Nothing
 * is allocated; PTX is streamed through a static buffer, so callers hold
 * the footprint lock (cs-footprint.c).
 */
#include "cs-image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define ELF_MAGIC 0x464c457fu
#define FATBIN_MAGIC 0xBA55ED50u
#define WRAPPER_MAGIC 0x466243b1u
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2
#define FATBIN_COMPRESSED 0xA000ull	/* LZ4 (0x2000) or zstd (0x8000) */
#define FATBIN_MAX_ENTRIES 4096
#define ELF_SHDR_SIZE 64u
#define ELF_MAX_SECTIONS 65535u
/* Images larger than this are not scanned (the driver's own limit is far below). */
#define IMAGE_MAX (1ull << 36)

/* Where an image's bytes are: the caller's memory, or a file. */
struct src {
	const unsigned char *mem;	/* NULL: read fd */
	int fd;
	uint64_t base;			/* offset of the image (a fatbin entry) in mem/fd */
};

static _Atomic bool vm_readv_unavailable;

static bool mem_read(void *dst, const unsigned char *p, size_t n)
{
	struct iovec local = {.iov_base = dst, .iov_len = n};
	struct iovec remote = {.iov_base = (void *)p, .iov_len = n};
	ssize_t got;

	if (!atomic_load_explicit(&vm_readv_unavailable, memory_order_relaxed)) {
		got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
		if (got == (ssize_t)n)
			return true;
		if (got >= 0 || (errno != ENOSYS && errno != EPERM))
			return false;
		atomic_store_explicit(&vm_readv_unavailable, true, memory_order_relaxed);
	}
	memcpy(dst, p, n);
	return true;
}

/* n bytes at offset off of the image; false when they cannot all be read. */
static bool src_read(const struct src *s, uint64_t off, void *dst, size_t n)
{
	uint64_t at;

	if (off > IMAGE_MAX || n > IMAGE_MAX || __builtin_add_overflow(s->base, off, &at))
		return false;
	if (s->mem) {
		if ((uintptr_t)s->mem + at < (uintptr_t)s->mem)
			return false;
		return mem_read(dst, s->mem + at, n);
	}
	return pread(s->fd, dst, n, (off_t)at) == (ssize_t)n;
}

/* Up to n bytes at off (fewer at the end of a file or of readable memory); the count read. */
static size_t src_read_some(const struct src *s, uint64_t off, void *dst, size_t n)
{
	ssize_t got;
	size_t done = 0;

	if (s->mem) {
		/* Page by page: the text may end just before an unreadable page. */
		while (done < n) {
			uintptr_t at = (uintptr_t)s->mem + s->base + off + done;
			size_t chunk = 4096 - at % 4096;

			if (chunk > n - done)
				chunk = n - done;
			if (!mem_read((char *)dst + done, (const unsigned char *)at, chunk))
				break;
			done += chunk;
		}
		return done;
	}
	got = pread(s->fd, dst, n, (off_t)(s->base + off));
	return got > 0 ? (size_t)got : 0;
}

static uint16_t rd16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const unsigned char *p)
{
	return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16;
}

static uint64_t rd64(const unsigned char *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* ---- cubin ---- */

/* Sum of the sizes of .nv.global and .nv.global.init. */
static uint64_t elf_declared(const struct src *s)
{
	unsigned char hdr[64], sh[ELF_SHDR_SIZE], strtab[ELF_SHDR_SIZE], name[17];
	uint64_t shoff, stroff, total = 0;
	unsigned shnum, shstrndx;

	if (!src_read(s, 0, hdr, sizeof(hdr)) || hdr[4] != 2 /* ELFCLASS64 */ ||
	    rd16(hdr + 58) != ELF_SHDR_SIZE)
		return 0;
	shoff = rd64(hdr + 40);
	shnum = rd16(hdr + 60);
	shstrndx = rd16(hdr + 62);
	if (shstrndx >= shnum ||
	    !src_read(s, shoff + (uint64_t)shstrndx * ELF_SHDR_SIZE, strtab, sizeof(strtab)))
		return 0;
	stroff = rd64(strtab + 24);
	for (unsigned i = 1; i < shnum; i++) {
		uint64_t size;

		if (!src_read(s, shoff + (uint64_t)i * ELF_SHDR_SIZE, sh, sizeof(sh)))
			return 0;
		memset(name, 0, sizeof(name));
		/* Section names are short; a name near the end of the table reads less. */
		if (!src_read(s, stroff + rd32(sh), name, sizeof(name) - 1) &&
		    !src_read(s, stroff + rd32(sh), name, sizeof(".nv.global")))
			continue;
		size = rd64(sh + 32);
		if (strcmp((char *)name, ".nv.global") == 0 ||
		    strcmp((char *)name, ".nv.global.init") == 0)
			total = add_sat(total, size);
	}
	return total;
}

/* ---- PTX ---- */

#define PTX_CHUNK 65536u
#define PTX_TOKENS 24
#define PTX_TOKEN_LEN 48

/* A PTX scanner's state: comments, braces, the current module-scope statement. */
struct ptx {
	enum { P_CODE, P_LINE_COMMENT, P_BLOCK_COMMENT, P_STRING } mode;
	char prev;			/* previous character (comment delimiters) */
	unsigned depth;			/* brace depth */
	bool skip;			/* inside an initializer: up to the ';' at depth 0 */
	unsigned ntok;			/* tokens of the current statement */
	char tok[PTX_TOKENS][PTX_TOKEN_LEN];
	unsigned toklen;		/* characters of the token being read, 0: none */
	uint64_t total;
};

static char ptx_buf[PTX_CHUNK];

/* Bytes of a PTX fundamental type (.b8 .u32 .f64 .f16x2 ...), 0 for others. */
static uint64_t ptx_type_bytes(const char *t)
{
	static const struct {
		const char *name;
		unsigned bytes;
	} types[] = {
	    {".b8", 1},   {".u8", 1},    {".s8", 1},     {".b16", 2},    {".u16", 2},
	    {".s16", 2},  {".f16", 2},   {".bf16", 2},   {".b32", 4},    {".u32", 4},
	    {".s32", 4},  {".f32", 4},   {".f16x2", 4},  {".bf16x2", 4}, {".b64", 8},
	    {".u64", 8},  {".s64", 8},   {".f64", 8},    {".b128", 16},
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(t, types[i].name) == 0)
			return types[i].bytes;
	return 0;
}

/* A decimal or 0x number token; false for anything else. */
static bool ptx_number(const char *t, uint64_t *v)
{
	char *end;

	if (!*t || !(t[0] >= '0' && t[0] <= '9'))
		return false;
	errno = 0;
	*v = strtoull(t, &end, 0);
	return errno == 0 && *end == '\0';
}

/*
 * A complete module-scope statement (its tokens up to '=' or ';'): adds the
 * bytes of a .global variable it defines.
 */
static void ptx_statement(struct ptx *p)
{
	uint64_t elem = 0, vec = 1, n, bytes;
	unsigned i = 0;

	for (; i < p->ntok; i++) {
		if (strcmp(p->tok[i], ".extern") == 0)
			return;
		if (strcmp(p->tok[i], ".global") == 0)
			break;
	}
	if (i == p->ntok)
		return;
	for (i++; i < p->ntok && !elem; i++) {
		if (strcmp(p->tok[i], ".align") == 0)
			i++;
		else if (strcmp(p->tok[i], ".v2") == 0)
			vec = 2;
		else if (strcmp(p->tok[i], ".v4") == 0)
			vec = 4;
		else if (strcmp(p->tok[i], ".v8") == 0)
			vec = 8;
		else if (!(elem = ptx_type_bytes(p->tok[i])))
			return;	/* .texref, .samplerref and the like: no device memory of ours */
	}
	bytes = elem * vec;
	/* tok[i] is the name; [N] dimensions follow. */
	for (i++; i < p->ntok; i += 3) {
		if (i + 2 >= p->ntok || strcmp(p->tok[i], "[") != 0 ||
		    strcmp(p->tok[i + 2], "]") != 0 || !ptx_number(p->tok[i + 1], &n))
			return;	/* [] sized by its initializer, or something unexpected */
		if (__builtin_mul_overflow(bytes, n, &bytes))
			bytes = UINT64_MAX;
	}
	p->total = add_sat(p->total, bytes);
}

static void ptx_end_token(struct ptx *p)
{
	if (!p->toklen)
		return;
	p->tok[p->ntok][p->toklen] = '\0';
	p->toklen = 0;
	if (p->ntok < PTX_TOKENS - 1)
		p->ntok++;
}

static void ptx_char_token(struct ptx *p, char c)
{
	ptx_end_token(p);
	p->tok[p->ntok][0] = c;
	p->toklen = 1;
	ptx_end_token(p);
}

static bool ptx_ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '$' || c == '%';
}

/* One character of code (not comment, not string). */
static void ptx_code(struct ptx *p, char c)
{
	bool top = p->depth == 0 && !p->skip;

	switch (c) {
	case '{':
		if (top) {
			p->ntok = 0;	/* a function body (or a block): no variable here */
			p->toklen = 0;
		}
		p->depth++;
		return;
	case '}':
		if (p->depth)
			p->depth--;
		return;
	case ';':
		if (p->depth == 0) {
			if (top) {
				ptx_end_token(p);
				ptx_statement(p);
			}
			p->skip = false;
			p->ntok = 0;
			p->toklen = 0;
		}
		return;
	case '=':
		if (top) {
			ptx_end_token(p);
			ptx_statement(p);
			p->skip = true;
		}
		return;
	default:
		break;
	}
	if (!top)
		return;
	if (ptx_ident_char(c)) {
		if (p->toklen < PTX_TOKEN_LEN - 1)
			p->tok[p->ntok][p->toklen++] = c;
	} else if (c == '[' || c == ']') {
		ptx_char_token(p, c);
	} else {
		ptx_end_token(p);
	}
}

static void ptx_feed(struct ptx *p, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];

		switch (p->mode) {
		case P_LINE_COMMENT:
			if (c == '\n')
				p->mode = P_CODE;
			break;
		case P_BLOCK_COMMENT:
			if (p->prev == '*' && c == '/') {
				p->mode = P_CODE;
				c = 0;	/* the '/' closes; it does not open another */
			}
			break;
		case P_STRING:
			if (c == '"')
				p->mode = P_CODE;
			break;
		case P_CODE:
			if (p->prev == '/' && (c == '/' || c == '*')) {
				p->mode = c == '/' ? P_LINE_COMMENT : P_BLOCK_COMMENT;
				c = 0;
			} else if (c == '"') {
				p->mode = P_STRING;
			} else if (c != '/') {
				ptx_code(p, c);
			}
			break;
		}
		p->prev = c;
	}
}

/* Declared bytes of the NUL-terminated PTX at s (at most `limit` bytes). */
static uint64_t ptx_declared(const struct src *s, uint64_t limit)
{
	static struct ptx p;
	uint64_t off = 0;

	memset(&p, 0, sizeof(p));
	while (off < limit) {
		size_t want = limit - off < PTX_CHUNK ? (size_t)(limit - off) : PTX_CHUNK;
		size_t got = src_read_some(s, off, ptx_buf, want);
		const char *nul;

		if (got == 0)
			break;
		nul = memchr(ptx_buf, 0, got);
		ptx_feed(&p, ptx_buf, nul ? (size_t)(nul - ptx_buf) : got);
		if (nul || got < want)
			break;
		off += got;
	}
	return p.total;
}

/* ---- fatbin ---- */

static uint64_t fatbin_declared(const struct src *s)
{
	unsigned char hdr[16], eh[64];
	uint64_t off, end, ptx_off = 0, ptx_size = 0;
	struct src e = *s;

	if (!src_read(s, 0, hdr, sizeof(hdr)))
		return 0;
	off = rd16(hdr + 6);
	end = off + rd64(hdr + 8);
	for (unsigned i = 0; i < FATBIN_MAX_ENTRIES && off + sizeof(eh) <= end; i++) {
		uint64_t hsize, psize;
		unsigned kind;

		if (!src_read(s, off, eh, sizeof(eh)))
			return 0;
		kind = rd16(eh);
		hsize = rd32(eh + 4);
		psize = rd64(eh + 8);
		if (hsize < sizeof(eh) || hsize > IMAGE_MAX || psize > IMAGE_MAX)
			return 0;
		if (!(rd64(eh + 40) & FATBIN_COMPRESSED)) {
			if (kind == FATBIN_KIND_ELF) {
				e.base = s->base + off + hsize;
				return elf_declared(&e);
			}
			if (kind == FATBIN_KIND_PTX && !ptx_off) {
				ptx_off = off + hsize;
				ptx_size = psize;
			}
		}
		off += hsize + psize;
	}
	if (!ptx_off)
		return 0;
	e.base = s->base + ptx_off;
	return ptx_declared(&e, ptx_size);
}

static uint64_t declared(const struct src *s, int depth)
{
	unsigned char magic[16];

	if (!src_read(s, 0, magic, 4))
		return 0;
	switch (rd32(magic)) {
	case ELF_MAGIC:
		return elf_declared(s);
	case FATBIN_MAGIC:
		return fatbin_declared(s);
	case WRAPPER_MAGIC: {
		struct src f = {.mem = NULL, .fd = -1, .base = 0};

		/* {magic, version, const void *data, ...}: only in memory, one level. */
		if (!s->mem || depth > 0 || !src_read(s, 0, magic, sizeof(magic)))
			return 0;
		f.mem = (const unsigned char *)(uintptr_t)rd64(magic + 8);
		return f.mem ? declared(&f, depth + 1) : 0;
	}
	default:
		return ptx_declared(s, IMAGE_MAX);
	}
}

uint64_t cs_image_declared(const void *image)
{
	struct src s = {.mem = image, .fd = -1, .base = 0};

	return image ? declared(&s, 0) : 0;
}

uint64_t cs_image_declared_file(const char *path)
{
	struct src s = {.mem = NULL, .fd = -1, .base = 0};
	uint64_t bytes;

	if (!path)
		return 0;
	s.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s.fd < 0)
		return 0;
	bytes = declared(&s, 0);
	close(s.fd);
	return bytes;
}
