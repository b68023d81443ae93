/*
 * PTX text: enough of the grammar to know what a JIT-compiled module would
 * contain, without compiling it.
 *
 * Read at module scope: .version (newer than SIM_IMAGE_PTX_ISA_MAX is
 * refused), .target (must not exceed the device), .entry kernels with their
 * .param lists and performance directives (.maxntid, .reqntid, .maxnreg,
 * .explicitcluster, .reqnctapercluster), and .global / .const variables with
 * their initializers. Inside a kernel body only .shared and .local
 * declarations are read (static shared memory, local memory); instructions
 * are skipped token by token. .func bodies, debug .section blocks and
 * directives we do not know are skipped.
 *
 * Parameters are laid out as the PTX ABI lays out the parameter bank: each
 * at the next multiple of its alignment (.align N, else the element size),
 * the buffer as long as the last parameter's end; e.g. (.u64, .f32, .u32)
 * sits at offsets 0, 8, 12 in 16 bytes, as ptxas's EIATTR_KPARAM_INFO says.
 */
#include "sim-image.h"

#include <stdlib.h>
#include <string.h>

enum tok {
	T_EOF,
	T_DIR,			/* .name */
	T_ID,			/* identifier, %register, $label */
	T_NUM,			/* numeric literal (unsigned) */
	T_STR,			/* "string" */
	T_PUNCT,		/* one character */
	T_BAD,			/* a byte that cannot appear in PTX */
};

struct ptx {
	const char *p, *end;
	int line;
	enum tok t;		/* current token: kind, text, line */
	const char *s;
	size_t n;
	int tline;
	struct sim_image *img;
	int cc;
	int target;		/* sm_NN of .target */
	bool specific;		/* sm_NNa: runs on exactly that architecture */
	uint64_t const_bytes;
	char *err;
	size_t errlen;
};

struct ptype {
	const char *name;
	unsigned size;
	char cls;		/* i: integer/bits, f: f32, d: f64, h: other float formats */
};

static const struct ptype ptypes[] = {
	{".b8", 1, 'i'},     {".u8", 1, 'i'},      {".s8", 1, 'i'},     {".pred", 1, 'i'},
	{".b16", 2, 'i'},    {".u16", 2, 'i'},     {".s16", 2, 'i'},    {".f16", 2, 'h'},
	{".bf16", 2, 'h'},   {".b32", 4, 'i'},     {".u32", 4, 'i'},    {".s32", 4, 'i'},
	{".f32", 4, 'f'},    {".f16x2", 4, 'h'},   {".bf16x2", 4, 'h'}, {".tf32", 4, 'h'},
	{".b64", 8, 'i'},    {".u64", 8, 'i'},     {".s64", 8, 'i'},    {".f64", 8, 'd'},
	{".b128", 16, 'i'},  {".e4m3", 1, 'h'},    {".e5m2", 1, 'h'},   {".e4m3x2", 2, 'h'},
	{".e5m2x2", 2, 'h'},
};

/* ---- lexer ---- */

static bool id_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool id_char(char c)
{
	return id_start(c) || is_digit(c);
}

static void next(struct ptx *x)
{
	const char *p = x->p, *end = x->end;

	for (;;) {
		while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' ||
				   *p == '\f' || *p == '\v')) {
			if (*p == '\n')
				x->line++;
			p++;
		}
		if (end - p >= 2 && p[0] == '/' && p[1] == '/') {
			while (p < end && *p != '\n')
				p++;
			continue;
		}
		if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
			p += 2;
			while (end - p >= 2 && !(p[0] == '*' && p[1] == '/')) {
				if (*p == '\n')
					x->line++;
				p++;
			}
			if (end - p < 2) {
				x->s = p;
				x->p = end;
				x->t = T_BAD;
				return;
			}
			p += 2;
			continue;
		}
		break;
	}
	x->tline = x->line;
	x->s = p;
	if (p >= end) {
		x->t = T_EOF;
	} else if (*p == '.' && end - p >= 2 && id_start(p[1]) && p[1] != '%') {
		x->t = T_DIR;
		for (p++; p < end && id_char(*p); p++)
			;
	} else if (id_start(*p)) {
		x->t = T_ID;
		for (p++; p < end && id_char(*p); p++)
			;
	} else if (is_digit(*p)) {
		/* 42, 0x2a, 052, 0b101, 42U, 1.5, 1.5e-3, 0f3F800000, 0d3FF0000000000000. */
		bool radix = end - p >= 2 && p[0] == '0' && strchr("xXfFdDbB", p[1]);

		x->t = T_NUM;
		for (p++; p < end; p++) {
			if (id_char(*p) || *p == '.')
				continue;
			if ((*p == '+' || *p == '-') && !radix && (p[-1] == 'e' || p[-1] == 'E'))
				continue;
			break;
		}
	} else if (*p == '"') {
		x->t = T_STR;
		for (p++; p < end && *p != '"' && *p != '\n'; p++)
			if (*p == '\\' && end - p >= 2)
				p++;
		if (p >= end || *p != '"')
			x->t = T_BAD;
		else
			p++;
	} else if (*p > ' ' && *p < 0x7f) {
		x->t = T_PUNCT;
		p++;
	} else {
		x->t = T_BAD;
		p++;
	}
	x->n = (size_t)(p - x->s);
	x->p = p;
}

static bool is(const struct ptx *x, const char *w)
{
	size_t l = strlen(w);

	return (x->t == T_DIR || x->t == T_ID) && x->n == l && memcmp(x->s, w, l) == 0;
}

static bool punct(const struct ptx *x, char c)
{
	return x->t == T_PUNCT && x->s[0] == c;
}

static CUresult fail(struct ptx *x, const char *what)
{
	int n = x->t == T_EOF ? 0 : (int)(x->n > 32 ? 32 : x->n);

	sim_image_set_err(x->err, x->errlen, "PTX line %d: %s (at '%.*s')", x->tline, what, n,
			  x->s);
	return CUDA_ERROR_INVALID_PTX;
}

/* Skips tokens up to and including the next ';' outside braces. */
static CUresult skip_stmt(struct ptx *x)
{
	int depth = 0;

	for (;;) {
		if (x->t == T_EOF || x->t == T_BAD)
			return fail(x, "unterminated statement");
		if (punct(x, '{'))
			depth++;
		else if (punct(x, '}') && depth > 0)
			depth--;
		else if (punct(x, ';') && depth == 0)
			break;
		next(x);
	}
	next(x);
	return CUDA_SUCCESS;
}

/* Skips the rest of the current token's line (.file and .loc have no ';'). */
static void skip_line(struct ptx *x)
{
	int line = x->tline;

	while (x->t != T_EOF && x->tline == line)
		next(x);
}

/* Skips a {...} block starting at the current '{'. */
static CUresult skip_braced(struct ptx *x)
{
	int depth = 0;

	do {
		if (x->t == T_EOF || x->t == T_BAD)
			return fail(x, "unterminated block");
		if (punct(x, '{'))
			depth++;
		else if (punct(x, '}'))
			depth--;
		next(x);
	} while (depth > 0);
	return CUDA_SUCCESS;
}

/* ---- literals ---- */

enum lit_kind { LIT_INT, LIT_F32, LIT_F64, LIT_DEC };

struct lit {
	enum lit_kind kind;
	uint64_t bits;			/* LIT_INT value, LIT_F32/F64 raw bits */
	double d;			/* LIT_DEC */
};

static bool parse_lit(const struct ptx *x, struct lit *l)
{
	char buf[64], *endp;
	int base = 10;
	const char *s = buf;

	if (x->t != T_NUM || x->n >= sizeof(buf))
		return false;
	memcpy(buf, x->s, x->n);
	buf[x->n] = '\0';
	if ((buf[0] == '0' && (buf[1] == 'f' || buf[1] == 'F')) ||
	    (buf[0] == '0' && (buf[1] == 'd' || buf[1] == 'D'))) {
		size_t digits = strlen(buf + 2);
		bool f32 = buf[1] == 'f' || buf[1] == 'F';

		if (digits != (f32 ? 8u : 16u))
			return false;
		l->kind = f32 ? LIT_F32 : LIT_F64;
		l->bits = strtoull(buf + 2, &endp, 16);
		return *endp == '\0';
	}
	if (strpbrk(buf, ".eE") && !(buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X'))) {
		l->kind = LIT_DEC;
		l->d = strtod(buf, &endp);
		return *endp == '\0';
	}
	if (buf[x->n - 1] == 'U' || buf[x->n - 1] == 'u')
		buf[x->n - 1] = '\0';
	if (buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')) {
		base = 16;
		s = buf + 2;
	} else if (buf[0] == '0' && (buf[1] == 'b' || buf[1] == 'B')) {
		base = 2;
		s = buf + 2;
	} else if (buf[0] == '0' && buf[1]) {
		base = 8;
	}
	if (!*s)
		return false;
	l->kind = LIT_INT;
	l->bits = strtoull(s, &endp, base);
	return *endp == '\0';
}

static double lit_double(const struct lit *l, bool neg)
{
	double d;
	float f;
	uint32_t b32 = (uint32_t)l->bits;

	switch (l->kind) {
	case LIT_INT:
		d = (double)l->bits;
		break;
	case LIT_F32:
		memcpy(&f, &b32, sizeof(f));
		d = f;
		break;
	case LIT_F64:
		memcpy(&d, &l->bits, sizeof(d));
		break;
	default:
		d = l->d;
		break;
	}
	return neg ? -d : d;
}

/* Stores literal l (negated when neg) as one element of class cls and size `size` at p. */
static void store_lit(unsigned char *p, unsigned size, char cls, const struct lit *l, bool neg)
{
	uint64_t v = l->bits;

	if (cls == 'f' && l->kind != LIT_F32) {
		float f = (float)lit_double(l, neg);
		uint32_t b;

		memcpy(&b, &f, sizeof(b));
		v = b;
	} else if (cls == 'd' && l->kind != LIT_F64) {
		double d = lit_double(l, neg);

		memcpy(&v, &d, sizeof(v));
	} else if (cls == 'i' && l->kind == LIT_DEC) {
		v = (uint64_t)(int64_t)lit_double(l, neg);
	} else if (cls == 'h' && l->kind == LIT_DEC) {
		v = 0;	/* half-precision conversions are not needed by any loader query */
	} else if (neg) {
		v = (uint64_t)0 - v;
	}
	/* Little-endian, as the device stores it; a .b128 takes the value in its low half. */
	for (unsigned i = 0; i < size; i++)
		p[i] = i < 8 ? (unsigned char)(v >> (8 * i)) : 0;
}

/* ---- declarations ---- */

struct decl {
	const struct ptype *type;
	unsigned vec;
	uint64_t align;			/* explicit .align, 0: none */
	uint64_t count;			/* product of the array dimensions */
	bool unsized;			/* first dimension [] */
	bool opaque;			/* .texref/.samplerref/.surfref: no memory */
	char opaque_kind;		/* 't' texref, 's' surfref, 'm' samplerref */
	bool ptr;			/* .ptr seen: a following .align is the pointee's */
	const char *name;
	size_t name_len;
};

static uint64_t decl_size(const struct decl *d)
{
	return d->opaque ? 0 : (uint64_t)d->type->size * d->vec * d->count;
}

static uint64_t decl_align(const struct decl *d)
{
	return d->align ? d->align : (d->opaque ? 1 : (uint64_t)d->type->size * d->vec);
}

static bool read_u64(struct ptx *x, uint64_t *ret)
{
	struct lit l;

	if (!parse_lit(x, &l) || l.kind != LIT_INT)
		return false;
	*ret = l.bits;
	next(x);
	return true;
}

/*
 * Reads the modifiers, type, name and array dimensions of a declaration;
 * the current token is the first one after the state space. Leaves the
 * current token after the dimensions.
 */
static CUresult parse_declarator(struct ptx *x, struct decl *d)
{
	memset(d, 0, sizeof(*d));
	d->vec = 1;
	d->count = 1;
	while (x->t == T_DIR) {
		uint64_t v;

		if (is(x, ".align")) {
			next(x);
			if (!read_u64(x, &v) || v == 0 || (v & (v - 1)) || v > 4096)
				return fail(x, "bad .align");
			if (!d->ptr)
				d->align = v;
			continue;
		}
		if (is(x, ".ptr")) {
			d->ptr = true;
		} else if (d->ptr && (is(x, ".global") || is(x, ".const") || is(x, ".local") ||
				      is(x, ".shared"))) {
			/* the pointee's state space */
		} else if (is(x, ".v2") || is(x, ".v4") || is(x, ".v8")) {
			d->vec = (unsigned)(x->s[2] - '0');
		} else if (is(x, ".attribute")) {
			next(x);
			if (!punct(x, '('))
				return fail(x, "bad .attribute");
			while (!punct(x, ')')) {
				if (x->t == T_EOF || x->t == T_BAD)
					return fail(x, "bad .attribute");
				next(x);
			}
		} else if (is(x, ".texref") || is(x, ".samplerref") || is(x, ".surfref")) {
			d->opaque = true;
			d->opaque_kind = is(x, ".texref") ? 't' : is(x, ".surfref") ? 's' : 'm';
		} else {
			const struct ptype *t = NULL;

			for (size_t i = 0; i < sizeof(ptypes) / sizeof(ptypes[0]); i++)
				if (is(x, ptypes[i].name))
					t = &ptypes[i];
			if (!t)
				return fail(x, "unknown type or modifier");
			d->type = t;
		}
		next(x);
	}
	if (!d->type && !d->opaque)
		return fail(x, "declaration without a type");
	if (x->t != T_ID)
		return fail(x, "expected a name");
	d->name = x->s;
	d->name_len = x->n;
	next(x);
	while (punct(x, '[')) {
		uint64_t dim;

		next(x);
		if (punct(x, ']') && d->count == 1 && !d->unsized) {
			d->unsized = true;
			next(x);
			continue;
		}
		if (!read_u64(x, &dim) || dim > SIM_IMAGE_MAX_VAR_BYTES ||
		    (dim && d->count > SIM_IMAGE_MAX_VAR_BYTES / dim))
			return fail(x, "bad array dimension");
		d->count *= dim;
		if (!punct(x, ']'))
			return fail(x, "expected ']'");
		next(x);
	}
	if (decl_size(d) > SIM_IMAGE_MAX_VAR_BYTES)
		return fail(x, "variable too large");
	return CUDA_SUCCESS;
}

/* Initial values being collected, one element at a time. */
struct init {
	unsigned char *buf;
	uint64_t n, cap, max;		/* elements stored, allocated, allowed */
	unsigned size;			/* bytes per element */
	char cls;
};

static CUresult init_store(struct ptx *x, struct init *in, const struct lit *l, bool neg)
{
	if (in->n >= in->max)
		return fail(x, "too many initializers");
	if (in->n == in->cap) {
		uint64_t cap = in->cap ? in->cap * 2 : 64;
		unsigned char *nb;

		if (cap > in->max)
			cap = in->max;
		nb = realloc(in->buf, cap * in->size);
		if (!nb)
			return CUDA_ERROR_OUT_OF_MEMORY;
		in->buf = nb;
		in->cap = cap;
	}
	store_lit(in->buf + in->n * in->size, in->size, in->cls, l, neg);
	in->n++;
	return CUDA_SUCCESS;
}

static CUresult init_value(struct ptx *x, struct init *in, int depth)
{
	struct lit zero = {.kind = LIT_INT};
	bool neg = false;
	CUresult r;

	if (punct(x, '{')) {
		if (depth > 8)
			return fail(x, "initializer nested too deeply");
		next(x);
		if (punct(x, '}')) {
			next(x);
			return CUDA_SUCCESS;
		}
		for (;;) {
			r = init_value(x, in, depth + 1);
			if (r)
				return r;
			if (punct(x, ',')) {
				next(x);
				continue;
			}
			if (!punct(x, '}'))
				return fail(x, "expected ',' or '}' in initializer");
			next(x);
			return CUDA_SUCCESS;
		}
	}
	if (punct(x, '-') || punct(x, '+')) {
		neg = punct(x, '-');
		next(x);
	}
	if (x->t == T_NUM) {
		struct lit l;

		if (!parse_lit(x, &l))
			return fail(x, "bad numeric literal");
		next(x);
		return init_store(x, in, &l, neg);
	}
	if (x->t == T_ID && !neg) {
		/*
		 * An address: var, generic(var), var+N. Each variable lives in its
		 * own allocation, so it is not relocated; it reads as 0.
		 */
		bool generic = is(x, "generic");

		next(x);
		if (generic) {
			if (!punct(x, '('))
				return fail(x, "expected '(' after generic");
			next(x);
			if (x->t != T_ID)
				return fail(x, "expected a variable");
			next(x);
			if (!punct(x, ')'))
				return fail(x, "expected ')'");
			next(x);
		}
		if (punct(x, '+')) {
			uint64_t v;

			next(x);
			if (!read_u64(x, &v))
				return fail(x, "bad address offset");
		}
		return init_store(x, in, &zero, false);
	}
	return fail(x, "bad initializer");
}

/* A .global or .const variable at module scope; the current token is the state space. */
static CUresult parse_var(struct ptx *x, bool is_const, bool ext)
{
	struct sim_image_global *g;
	struct init in = {0};
	struct decl d;
	uint64_t size;
	CUresult r;

	next(x);
	r = parse_declarator(x, &d);
	if (r)
		return r;
	if (punct(x, '=')) {
		if (d.opaque)
			return fail(x, "initialized texture reference");
		in.size = d.type->size;
		in.cls = d.type->cls;
		in.max = d.unsized ? SIM_IMAGE_MAX_BYTES / in.size : d.count * d.vec;
		next(x);
		r = init_value(x, &in, 0);
		if (r)
			goto out;
		if (d.unsized) {
			uint64_t row = d.count * d.vec;	/* elements per index of the first dimension */

			d.count = row ? d.count * ((in.n + row - 1) / row) : 0;
		}
	} else if (d.unsized) {
		d.count = 0;
	}
	if (!punct(x, ';')) {
		r = fail(x, "expected ';' after a variable");
		goto out;
	}
	next(x);
	size = decl_size(&d);
	if (!ext && d.opaque && d.opaque_kind != 'm') {
		/* A texture or surface reference (cuModuleGetTexRef / GetSurfRef). */
		r = sim_image_add_ref(x->img, d.name, d.name_len, d.opaque_kind == 's');
		goto out;
	}
	if (ext || size == 0)
		goto out;	/* a declaration, a sampler, or nothing to allocate */
	for (uint32_t i = 0; i < x->img->nglobals; i++) {
		if (strlen(x->img->globals[i].name) == d.name_len &&
		    memcmp(x->img->globals[i].name, d.name, d.name_len) == 0) {
			r = fail(x, "variable defined twice");
			goto out;
		}
	}
	r = sim_image_add_global(x->img, &g);
	if (r)
		goto out;
	g->size = size;
	g->name = strndup(d.name, d.name_len);
	if (!g->name) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if (in.n) {
		/* The initial bytes are held in host memory: a corrupt-image bound applies. */
		if (size > SIM_IMAGE_MAX_BYTES) {
			r = fail(x, "initialized variable too large");
			goto out;
		}
		g->init = calloc(1, size);
		if (!g->init) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		memcpy(g->init, in.buf, in.n * in.size);
	}
	if (is_const)
		x->const_bytes = sim_align_up(x->const_bytes, decl_align(&d)) + size;
out:
	free(in.buf);
	return r;
}

/* ---- kernels ---- */

/*
 * Scans a function body from its '{' to the matching '}', adding the sizes
 * of its .shared and .local declarations. Braces only open a scope at the
 * start of a statement; elsewhere they are vector operands ({%r1, %r2}).
 */
static CUresult parse_body(struct ptx *x, uint64_t *smem, uint64_t *local)
{
	int depth = 1;
	bool start = true, label = false;

	next(x);
	for (;;) {
		bool was_label = label;

		label = false;
		if (x->t == T_EOF || x->t == T_BAD)
			return fail(x, "unterminated function body");
		if (x->t == T_PUNCT) {
			char c = x->s[0];

			if (c == '{' && start) {
				depth++;
			} else if (c == '}' && start) {
				if (--depth == 0) {
					next(x);
					return CUDA_SUCCESS;
				}
			} else if (c == ';' || (c == ':' && was_label)) {
				start = true;
			} else {
				start = false;
			}
			next(x);
			continue;
		}
		if (start && x->t == T_DIR && (is(x, ".shared") || is(x, ".local"))) {
			uint64_t *acc = is(x, ".shared") ? smem : local;
			struct decl d;
			CUresult r;

			next(x);
			r = parse_declarator(x, &d);
			if (r)
				return r;
			if (!punct(x, ';'))
				return fail(x, "expected ';' after a declaration");
			*acc = sim_align_up(*acc, decl_align(&d)) + decl_size(&d);
			if (*acc > SIM_IMAGE_MAX_BYTES)
				return fail(x, "declarations too large");
			continue;	/* the ';' starts the next statement */
		}
		if (start && (is(x, ".loc") || is(x, ".file"))) {
			skip_line(x);
			continue;
		}
		label = start && x->t == T_ID;
		start = false;
		next(x);
	}
}

/* Reads up to three comma-separated dimensions (.maxntid 256, 1, 1). */
static CUresult read_dims(struct ptx *x, int dims[3], uint64_t *prod)
{
	next(x);
	*prod = 1;
	for (int i = 0; i < 3; i++) {
		uint64_t v;

		if (!read_u64(x, &v) || v == 0 || v > 65536)
			return fail(x, "bad dimension");
		dims[i] = (int)v;
		*prod *= v;
		if (!punct(x, ','))
			break;
		next(x);
	}
	for (int i = 0; i < 3; i++)
		if (!dims[i])
			dims[i] = 1;
	return CUDA_SUCCESS;
}

static CUresult parse_params(struct ptx *x, struct sim_image_func *f)
{
	uint64_t total = 0;

	next(x);
	if (punct(x, ')')) {
		next(x);
		return CUDA_SUCCESS;
	}
	for (;;) {
		struct sim_image_param *np;
		struct decl d;
		uint64_t size, off;
		CUresult r;

		if (!is(x, ".param"))
			return fail(x, "expected .param");
		next(x);
		r = parse_declarator(x, &d);
		if (r)
			return r;
		size = decl_size(&d);
		if (size == 0 || d.unsized)
			return fail(x, "parameter without a size");
		off = sim_align_up(total, decl_align(&d));
		total = off + size;
		if (total > SIM_IMAGE_MAX_PARAM_BYTES)
			return fail(x, "parameters exceed the parameter bank");
		np = realloc(f->params, (f->nparams + 1) * sizeof(*np));
		if (!np)
			return CUDA_ERROR_OUT_OF_MEMORY;
		f->params = np;
		np[f->nparams].offset = (uint32_t)off;
		np[f->nparams].size = (uint32_t)size;
		f->nparams++;
		f->param_bytes = (uint32_t)total;
		if (punct(x, ',')) {
			next(x);
			continue;
		}
		if (!punct(x, ')'))
			return fail(x, "expected ',' or ')' in parameter list");
		next(x);
		return CUDA_SUCCESS;
	}
}

/* An .entry at module scope; the current token is .entry. */
static CUresult parse_entry(struct ptx *x)
{
	struct sim_image_func tmp = {0}, *f;
	uint64_t smem = 0, local = 0, prod;
	int maxnreg = 0, dims[3];
	CUresult r = CUDA_SUCCESS;

	next(x);
	if (x->t != T_ID)
		return fail(x, "expected a kernel name");
	tmp.name = strndup(x->s, x->n);
	if (!tmp.name)
		return CUDA_ERROR_OUT_OF_MEMORY;
	next(x);
	if (punct(x, '(')) {
		r = parse_params(x, &tmp);
		if (r)
			goto out;
	}
	while (x->t == T_DIR && r == CUDA_SUCCESS) {
		uint64_t v = 0;

		memset(dims, 0, sizeof(dims));
		if (is(x, ".maxntid") || is(x, ".reqntid")) {
			bool req = is(x, ".reqntid");

			r = read_dims(x, dims, &prod);
			if (r == CUDA_SUCCESS && (!tmp.max_threads || prod < (uint64_t)tmp.max_threads))
				tmp.max_threads = prod > 1024 ? 1024 : (int)prod;
			if (r == CUDA_SUCCESS && req)
				memcpy(tmp.reqntid, dims, sizeof(dims));
		} else if (is(x, ".reqnctapercluster")) {
			r = read_dims(x, dims, &prod);
			memcpy(tmp.cluster, dims, sizeof(dims));
		} else if (is(x, ".explicitcluster")) {
			tmp.cluster_must_be_set = true;
			next(x);
		} else if (is(x, ".maxnreg")) {
			next(x);
			if (!read_u64(x, &v) || v == 0 || v > 255)
				r = fail(x, "bad .maxnreg");
			maxnreg = (int)v;
		} else if (is(x, ".pragma")) {
			r = skip_stmt(x);
		} else {
			/* .minnctapersm N, .maxclusterrank N, .noreturn, newer directives. */
			next(x);
			while (x->t == T_NUM || punct(x, ','))
				next(x);
		}
	}
	if (r)
		goto out;
	if (punct(x, ';')) {
		next(x);	/* a prototype */
		goto out;
	}
	if (!punct(x, '{')) {
		r = fail(x, "expected a kernel body");
		goto out;
	}
	r = parse_body(x, &smem, &local);
	if (r)
		goto out;
	if (sim_image_find_func(x->img, tmp.name)) {
		r = fail(x, "kernel defined twice");
		goto out;
	}
	r = sim_image_add_func(x->img, &f);
	if (r)
		goto out;
	tmp.static_smem = smem > INT32_MAX ? INT32_MAX : (int)smem;
	tmp.local_bytes = local > INT32_MAX ? INT32_MAX : (int)local;
	tmp.num_regs = SIM_IMAGE_PTX_DEFAULT_REGS;
	if (maxnreg && maxnreg < tmp.num_regs)
		tmp.num_regs = maxnreg;
	*f = tmp;
	return CUDA_SUCCESS;
out:
	free(tmp.name);
	free(tmp.params);
	return r;
}

/* A .func: prototype or definition, skipped. */
static CUresult skip_func(struct ptx *x)
{
	int paren = 0;

	next(x);
	for (;;) {
		if (x->t == T_EOF || x->t == T_BAD)
			return fail(x, "unterminated .func");
		if (punct(x, '('))
			paren++;
		else if (punct(x, ')'))
			paren--;
		else if (paren == 0 && punct(x, ';'))
			break;
		else if (paren == 0 && punct(x, '{')) {
			uint64_t a = 0, b = 0;

			return parse_body(x, &a, &b);
		}
		next(x);
	}
	next(x);
	return CUDA_SUCCESS;
}

static CUresult parse_version(struct ptx *x)
{
	const char *s, *dot;
	int major = 0, minor = 0;

	next(x);
	s = x->s;
	dot = x->t == T_NUM ? memchr(s, '.', x->n) : NULL;
	if (!dot || dot == s || (size_t)(dot - s) > 3 || x->n - (size_t)(dot - s) != 2 ||
	    !is_digit(dot[1]))
		return fail(x, "bad .version");
	for (const char *p = s; p < dot; p++) {
		if (!is_digit(*p))
			return fail(x, "bad .version");
		major = major * 10 + (*p - '0');
	}
	minor = dot[1] - '0';
	if (major * 10 + minor > SIM_IMAGE_PTX_ISA_MAX) {
		sim_image_set_err(x->err, x->errlen, "PTX ISA %d.%d is newer than this driver's %d.%d",
				  major, minor, SIM_IMAGE_PTX_ISA_MAX / 10, SIM_IMAGE_PTX_ISA_MAX % 10);
		return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
	}
	next(x);
	return CUDA_SUCCESS;
}

static CUresult parse_target(struct ptx *x)
{
	do {
		next(x);
		if (x->t != T_ID)
			return fail(x, "bad .target");
		if (x->n > 3 && memcmp(x->s, "sm_", 3) == 0) {
			size_t i = 3;
			int arch = 0;

			for (; i < x->n && is_digit(x->s[i]) && arch < 10000; i++)
				arch = arch * 10 + (x->s[i] - '0');
			if (i == 3 || (i < x->n && !(i + 1 == x->n && strchr("af", x->s[i]))))
				return fail(x, "bad .target");
			x->target = arch;
			x->specific = i < x->n && x->s[i] == 'a';
		}
		next(x);
	} while (punct(x, ','));
	return CUDA_SUCCESS;
}

CUresult sim_image_parse_ptx(const char *text, size_t len, int cc, struct sim_image *img,
			     char *err, size_t errlen)
{
	const char *nul = memchr(text, 0, len);
	struct ptx x = {
		.p = text,
		.end = nul ? nul : text + len,
		.line = 1,
		.img = img,
		.cc = cc,
		.err = err,
		.errlen = errlen,
	};
	bool ext = false;
	CUresult r = CUDA_SUCCESS;

	next(&x);
	if (!is(&x, ".version"))
		return fail(&x, "PTX must begin with .version");
	while (r == CUDA_SUCCESS && x.t != T_EOF) {
		bool was_ext = ext;

		ext = false;
		if (x.t == T_BAD)
			r = fail(&x, "unexpected character");
		else if (punct(&x, ';'))
			next(&x);
		else if (x.t != T_DIR)
			r = fail(&x, "unexpected token at module scope");
		else if (is(&x, ".version"))
			r = parse_version(&x);
		else if (is(&x, ".target"))
			r = parse_target(&x);
		else if (is(&x, ".address_size")) {
			uint64_t v;

			next(&x);
			if (!read_u64(&x, &v) || v != 64)
				r = fail(&x, "only .address_size 64 is supported");
		} else if (is(&x, ".visible") || is(&x, ".weak") || is(&x, ".common")) {
			ext = was_ext;
			next(&x);
		} else if (is(&x, ".extern")) {
			ext = true;
			next(&x);
		} else if (is(&x, ".entry"))
			r = parse_entry(&x);
		else if (is(&x, ".func"))
			r = skip_func(&x);
		else if (is(&x, ".global") || is(&x, ".const"))
			r = parse_var(&x, is(&x, ".const"), was_ext);
		else if (is(&x, ".file") || is(&x, ".loc"))
			skip_line(&x);
		else if (is(&x, ".section")) {
			next(&x);
			if (x.t == T_DIR)
				next(&x);
			r = punct(&x, '{') ? skip_braced(&x) : fail(&x, "bad .section");
		} else
			r = skip_stmt(&x);	/* .shared/.tex at module scope, .alias, .pragma... */
	}
	if (r)
		return r;
	if (!x.target)
		return fail(&x, "no .target sm_NN");
	if (x.target > cc || (x.specific && x.target != cc)) {
		sim_image_set_err(err, errlen, "PTX .target sm_%d%s is newer than the device (%d.%d)",
				  x.target, x.specific ? "a" : "", cc / 10, cc % 10);
		return CUDA_ERROR_INVALID_PTX;
	}
	img->arch = x.target;
	for (uint32_t i = 0; i < img->nfuncs; i++) {
		img->funcs[i].ptx_version = x.target;
		img->funcs[i].binary_version = cc;
		img->funcs[i].const_bytes =
			x.const_bytes > INT32_MAX ? INT32_MAX : (int)x.const_bytes;
	}
	return CUDA_SUCCESS;
}
