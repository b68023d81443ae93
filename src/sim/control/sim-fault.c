/*
 * Fault injection (see sim-fault.h for the spec syntax).
 *
 * Two lists are consulted by sim_fault_hit(): the process-local one read
 * once from CUSIM_FAULTS, and the instance table in shared memory written by
 * `cusim-ctl fault add`. Both are walked only when something is armed; the
 * inline sim_fault() keeps the unarmed case to two relaxed loads.
 *
 * Each library (libcuda.so.1, libnvidia-ml.so.1) links its own copy of this
 * file with hidden visibility, so each has its own CUSIM_FAULTS list and call
 * counters; a fault carries the domain of its error and only counts and
 * fires for calls of that domain.
 */
#include "sim-fault.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

_Atomic int sim_fault_local_armed;
struct sim_shared *_Atomic sim_fault_shared;

#define ITEM_MAX 256

#define FAULT_FORM                                                                                 \
	"NAME[@N][xK]=ERROR, e.g. cuMemAlloc_v2@3x2=OUT_OF_MEMORY (NAME: an entry point or *; "    \
	"N: first failing call, from 1; K: number of failing calls, or * for every call from N "   \
	"on; ERROR: CUDA_ERROR_*, NVML_ERROR_*, the name without its prefix, or a number)"

struct error_name {
	const char *name;
	int value;
};

static const struct error_name cuda_errors[] = {
#define X(name, value, text) {#name, value},
#include "cuda-errors.h"
#undef X
};

/*
 * nvmlReturn_t as nvml.h defines it. Kept here rather than taken from an NVML
 * header so that sim-instance (and cusim-ctl) build without one.
 */
static const struct error_name nvml_errors[] = {
	{"NVML_SUCCESS", 0},
	{"NVML_ERROR_UNINITIALIZED", 1},
	{"NVML_ERROR_INVALID_ARGUMENT", 2},
	{"NVML_ERROR_NOT_SUPPORTED", 3},
	{"NVML_ERROR_NO_PERMISSION", 4},
	{"NVML_ERROR_ALREADY_INITIALIZED", 5},
	{"NVML_ERROR_NOT_FOUND", 6},
	{"NVML_ERROR_INSUFFICIENT_SIZE", 7},
	{"NVML_ERROR_INSUFFICIENT_POWER", 8},
	{"NVML_ERROR_DRIVER_NOT_LOADED", 9},
	{"NVML_ERROR_TIMEOUT", 10},
	{"NVML_ERROR_IRQ_ISSUE", 11},
	{"NVML_ERROR_LIBRARY_NOT_FOUND", 12},
	{"NVML_ERROR_FUNCTION_NOT_FOUND", 13},
	{"NVML_ERROR_CORRUPTED_INFOROM", 14},
	{"NVML_ERROR_GPU_IS_LOST", 15},
	{"NVML_ERROR_RESET_REQUIRED", 16},
	{"NVML_ERROR_OPERATING_SYSTEM", 17},
	{"NVML_ERROR_LIB_RM_VERSION_MISMATCH", 18},
	{"NVML_ERROR_IN_USE", 19},
	{"NVML_ERROR_MEMORY", 20},
	{"NVML_ERROR_NO_DATA", 21},
	{"NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", 22},
	{"NVML_ERROR_INSUFFICIENT_RESOURCES", 23},
	{"NVML_ERROR_FREQ_NOT_SUPPORTED", 24},
	{"NVML_ERROR_ARGUMENT_VERSION_MISMATCH", 25},
	{"NVML_ERROR_DEPRECATED", 26},
	{"NVML_ERROR_NOT_READY", 27},
	{"NVML_ERROR_GPU_NOT_FOUND", 28},
	{"NVML_ERROR_INVALID_STATE", 29},
	{"NVML_ERROR_UNKNOWN", 999},
};

struct domain_info {
	const char *label;		/* for messages, with its article */
	const char *prefix;		/* of its error names */
	const struct error_name *errors;
	size_t nerrors;
};

static const struct domain_info domains[] = {
	[SIM_FAULT_CUDA] = {"a CUDA driver", "CUDA_ERROR_", cuda_errors,
			    sizeof(cuda_errors) / sizeof(cuda_errors[0])},
	[SIM_FAULT_NVML] = {"an NVML", "NVML_ERROR_", nvml_errors,
			    sizeof(nvml_errors) / sizeof(nvml_errors[0])},
};

static const struct domain_info *domain_of(enum sim_fault_domain d)
{
	return &domains[d == SIM_FAULT_NVML ? SIM_FAULT_NVML : SIM_FAULT_CUDA];
}

const char *sim_fault_error_name(enum sim_fault_domain domain, int value)
{
	const struct domain_info *di = domain_of(domain);

	for (size_t i = 0; i < di->nerrors; i++)
		if (di->errors[i].value == value)
			return di->errors[i].name;
	return NULL;
}

/* Looks a full error name up (case-insensitively); -1 when unknown. */
static int error_value(const struct domain_info *di, const char *name)
{
	for (size_t i = 0; i < di->nerrors; i++)
		if (strcasecmp(di->errors[i].name, name) == 0)
			return di->errors[i].value;
	return -1;
}

/*
 * Parses a decimal uint32 at *s (digits only, no sign or blanks) and advances
 * *s past it. Returns false when there is no digit or the value overflows.
 */
static bool parse_u32(const char **s, uint32_t *ret)
{
	const char *p = *s;
	uint64_t v = 0;

	if (!isdigit((unsigned char)*p))
		return false;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			return false;
	}
	*ret = (uint32_t)v;
	*s = p;
	return true;
}

/* "x*" or "x<digits>" with nothing after it: the count suffix. */
static bool is_count_suffix(const char *p)
{
	if (*p != 'x')
		return false;
	p++;
	if (p[0] == '*')
		return p[1] == '\0';
	if (!*p)
		return false;
	return strspn(p, "0123456789") == strlen(p);
}

/* Parses "xK" / "x*" at p (the whole rest of the string). */
static bool parse_count(const char *p, uint32_t *ret)
{
	if (*p++ != 'x')
		return false;
	if (strcmp(p, "*") == 0) {
		*ret = 0;
		return true;
	}
	return parse_u32(&p, ret) && *p == '\0' && *ret > 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static bool valid_name(const char *name)
{
	if (strcmp(name, "*") == 0)
		return true;
	if (!isalpha((unsigned char)name[0]) && name[0] != '_')
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return true;
}

/*
 * The domain an entry point name belongs to: nvml* names are NVML calls,
 * cu* names driver calls. Returns -1 for "*" (any call of the list's domain).
 */
static int name_domain(const char *name)
{
	if (strncmp(name, "nvml", 4) == 0)
		return SIM_FAULT_NVML;
	if (strncmp(name, "cu", 2) == 0)
		return SIM_FAULT_CUDA;
	return -1;
}

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, const char *item,
						      const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (err && errlen)
		snprintf(err, errlen, "invalid fault \"%s\": %s; expected %s", item, what,
			 FAULT_FORM);
	return -EINVAL;
}

/*
 * Resolves ERROR text. An explicit CUDA_ERROR_/NVML_ERROR_ prefix decides the
 * domain; otherwise `dom` does (the name's domain, or the caller's default).
 */
static int parse_error(const char *text, enum sim_fault_domain dom, int32_t *ret_value,
		       enum sim_fault_domain *ret_dom, const char *item, char *err, size_t errlen)
{
	const struct domain_info *di;
	char full[ITEM_MAX + 16];
	int v;

	if (!*text)
		return fail(err, errlen, item, "ERROR is empty");
	if (isdigit((unsigned char)text[0])) {
		const char *p = text;
		uint32_t u;

		if (!parse_u32(&p, &u) || *p || u > INT32_MAX)
			return fail(err, errlen, item, "ERROR \"%s\" is not a valid number", text);
		if (u == 0)
			return fail(err, errlen, item, "ERROR 0 is success, not a failure");
		*ret_value = (int32_t)u;
		*ret_dom = dom;
		return 0;
	}
	if (strncasecmp(text, "CUDA_", 5) == 0)
		dom = SIM_FAULT_CUDA;
	else if (strncasecmp(text, "NVML_", 5) == 0)
		dom = SIM_FAULT_NVML;
	di = domain_of(dom);
	if (strncasecmp(text, "CUDA_", 5) == 0 || strncasecmp(text, "NVML_", 5) == 0)
		snprintf(full, sizeof(full), "%s", text);
	else
		snprintf(full, sizeof(full), "%s%s", di->prefix, text);
	v = error_value(di, full);
	if (v < 0)
		return fail(err, errlen, item, "ERROR \"%s\" is not %s error name", text,
			    di->label);
	if (v == 0)
		return fail(err, errlen, item, "ERROR \"%s\" is success, not a failure", text);
	*ret_value = v;
	*ret_dom = dom;
	return 0;
}

int sim_fault_parse_one(const char *item, enum sim_fault_domain domain, struct sim_fault *ret,
			char *err, size_t errlen)
{
	char buf[ITEM_MAX], shown[ITEM_MAX];
	char *s, *eq, *left, *right, *at, *suffix = NULL;
	uint32_t nth = 1, count = 1;
	int32_t value = 0;
	enum sim_fault_domain dom = domain;
	int ndom, r;

	if (!item)
		item = "";
	if (strlen(item) >= sizeof(buf))
		return fail(err, errlen, "...", "the item is longer than %zu characters",
			    sizeof(buf) - 1);
	strcpy(buf, item);
	s = trim(buf);
	/* Messages quote the item as given, less surrounding blanks. */
	strcpy(shown, s);
	item = shown;
	eq = strchr(s, '=');
	if (!eq)
		return fail(err, errlen, item, "missing \"=ERROR\"");
	*eq = '\0';
	left = trim(s);
	right = trim(eq + 1);
	/* Names may end in 'x' (cuStreamGetCtx): only "x*"/"x<digits>" at the end is a count. */
	at = strchr(left, '@');
	if (at) {
		const char *p = at + 1;

		*at = '\0';
		if (!parse_u32(&p, &nth) || nth == 0)
			return fail(err, errlen, item, "@N must be a call number from 1 to %u",
				    UINT32_MAX);
		if (*p && !parse_count(p, &count))
			return fail(err, errlen, item,
				    "\"%s\" after @%u is not a count (xK with K >= 1, or x*)", p,
				    nth);
	} else {
		char *x = strrchr(left, 'x');

		if (x && x > left && is_count_suffix(x)) {
			suffix = x;
			if (!parse_count(suffix, &count))
				return fail(err, errlen, item,
					    "\"%s\" is not a count (xK with K from 1 to %u, or x*)",
					    suffix, UINT32_MAX);
			*suffix = '\0';
		}
	}
	if (!*left)
		return fail(err, errlen, item, "NAME is empty");
	if (strlen(left) >= SIM_FAULT_NAME_LEN)
		return fail(err, errlen, item, "NAME is longer than %d characters",
			    SIM_FAULT_NAME_LEN - 1);
	if (!valid_name(left))
		return fail(err, errlen, item,
			    "NAME \"%s\" is neither an entry point name nor \"*\"", left);
	ndom = name_domain(left);
	r = parse_error(right, ndom >= 0 ? (enum sim_fault_domain)ndom : domain, &value, &dom,
			item, err, errlen);
	if (r < 0)
		return r;
	if (ndom >= 0 && (enum sim_fault_domain)ndom != dom)
		return fail(err, errlen, item, "%s is %s call but %s is %s error", left,
			    domain_of((enum sim_fault_domain)ndom)->label, right,
			    domain_of(dom)->label);
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->name, sizeof(ret->name), "%s", left);
	ret->error = value;
	ret->domain = (uint32_t)dom;
	ret->nth = nth;
	ret->count = count;
	return 0;
}

/* ---- CUSIM_FAULTS: this process's own list ---- */

static struct sim_fault local_faults[SIM_MAX_FAULTS];
static unsigned nlocal;
static _Atomic int env_domain = -1;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* A forked child is a new process: its calls are counted from 1 again. */
static void reset_local_counts(void)
{
	for (unsigned i = 0; i < nlocal; i++) {
		atomic_store_explicit(&local_faults[i].calls, 0, memory_order_relaxed);
		atomic_store_explicit(&local_faults[i].fired, 0, memory_order_relaxed);
	}
}

static void load_env_once(void)
{
	const char *spec = getenv("CUSIM_FAULTS");
	enum sim_fault_domain dom =
		atomic_load(&env_domain) == SIM_FAULT_NVML ? SIM_FAULT_NVML : SIM_FAULT_CUDA;
	char item[ITEM_MAX + 1];
	char err[1024];

	if (!spec)
		return;
	for (const char *p = spec; *p;) {
		size_t len = strcspn(p, ";");
		const char *next = p[len] ? p + len + 1 : p + len;
		struct sim_fault f;

		/* An over-long item is copied cut short: the parser then reports it. */
		snprintf(item, sizeof(item), "%.*s", (int)(len < ITEM_MAX ? len : ITEM_MAX), p);
		p = next;
		if (strspn(item, " \t\n") == strlen(item))
			continue; /* empty item, e.g. a trailing ';' */
		if (sim_fault_parse_one(item, dom, &f, err, sizeof(err)) < 0) {
			fprintf(stderr, "cusim: CUSIM_FAULTS: %s; this fault is ignored\n", err);
			continue;
		}
		if (nlocal == SIM_MAX_FAULTS) {
			fprintf(
			    stderr,
			    "cusim: CUSIM_FAULTS: more than %d faults; \"%s\" and the ones after "
			    "it are ignored\n",
			    SIM_MAX_FAULTS, item);
			break;
		}
		local_faults[nlocal++] = f;
	}
	if (nlocal) {
		pthread_atfork(NULL, NULL, reset_local_counts);
		/* Release: a thread that sees the flag sees the list. */
		atomic_store_explicit(&sim_fault_local_armed, 1, memory_order_release);
	}
}

void sim_fault_load_env(enum sim_fault_domain domain)
{
	/* Each library calls this with its own domain; the first call decides. */
	int unset = -1;

	atomic_compare_exchange_strong(&env_domain, &unset, (int)domain);
	pthread_once(&env_once, load_env_once);
}

/* ---- the instance table ---- */

void sim_fault_bind(struct sim_shared *sh)
{
	atomic_store_explicit(&sim_fault_shared, sh, memory_order_release);
}

static bool fault_matches(const struct sim_fault *f, const char *name, enum sim_fault_domain domain)
{
	if (f->domain != (uint32_t)domain)
		return false;
	if (f->name[0] == '*' && f->name[1] == '\0')
		return true;
	/* Bounded: a table entry in shared memory need not be terminated. */
	return strncmp(f->name, name, sizeof(f->name)) == 0;
}

/*
 * Counts one matching call of f and returns true when it is one that fails:
 * its 1-based index is in [nth, nth + count), or >= nth when count is 0.
 * The counter saturates rather than wrapping, so "x*" never stops firing.
 */
static bool fault_count_call(struct sim_fault *f)
{
	uint32_t c = atomic_load_explicit(&f->calls, memory_order_relaxed);
	uint64_t n;

	do {
		if (c == UINT32_MAX)
			break;
	} while (!atomic_compare_exchange_weak_explicit(&f->calls, &c, c + 1, memory_order_relaxed,
							 memory_order_relaxed));
	n = (uint64_t)c + 1;
	if (n < f->nth || (f->count && n >= (uint64_t)f->nth + f->count))
		return false;
	atomic_fetch_add_explicit(&f->fired, 1, memory_order_relaxed);
	return true;
}

/*
 * The pid the instance knows this process by: /proc/self names the pid in the
 * namespace of the /proc mount, the host's for `unshare --pid --fork` without
 * its own /proc (the same rule as libcuda's process registration).
 */
static pid_t self_pid(void)
{
	char buf[32];
	ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);

	if (n > 0) {
		buf[n] = '\0';
		long v = strtol(buf, NULL, 10);
		if (v > 0)
			return (pid_t)v;
	}
	return getpid();
}

int sim_fault_hit(const char *name, enum sim_fault_domain domain)
{
	struct sim_shared *sh;
	int ret = 0;

	/*
	 * Every matching fault counts the call, in both lists, even when an
	 * earlier one already decided the result: each fault's @N refers to
	 * the calls it matches, whatever else is armed.
	 */
	if (atomic_load_explicit(&sim_fault_local_armed, memory_order_acquire)) {
		for (unsigned i = 0; i < nlocal; i++) {
			struct sim_fault *f = &local_faults[i];

			if (fault_matches(f, name, domain) && fault_count_call(f) && !ret)
				ret = f->error;
		}
	}
	sh = atomic_load_explicit(&sim_fault_shared, memory_order_acquire);
	if (sh && atomic_load_explicit(&sh->nfaults_armed, memory_order_relaxed)) {
		pid_t self = 0;

		for (unsigned i = 0; i < SIM_MAX_FAULTS; i++) {
			struct sim_fault *f = &sh->faults[i];

			/* Acquire: the fields were written before `active` became 2. */
			if (atomic_load_explicit(&f->active, memory_order_acquire) != 2 ||
			    !fault_matches(f, name, domain))
				continue;
			if (f->pid) {
				if (!self)
					self = self_pid();
				if (f->pid != (int32_t)self)
					continue;
			}
			if (fault_count_call(f) && !ret)
				ret = f->error;
		}
	}
	return ret;
}

int sim_fault_arm(struct sim_shared *sh, const struct sim_fault *f)
{
	for (unsigned i = 0; i < SIM_MAX_FAULTS; i++) {
		struct sim_fault *slot = &sh->faults[i];
		uint32_t expect = 0;

		/* 0 -> 1 claims the entry; no reader looks at it until it is 2. */
		if (!atomic_compare_exchange_strong(&slot->active, &expect, 1))
			continue;
		memset(slot->name, 0, sizeof(slot->name));
		snprintf(slot->name, sizeof(slot->name), "%s", f->name);
		slot->error = f->error;
		slot->pid = f->pid;
		slot->nth = f->nth ? f->nth : 1;
		slot->count = f->count;
		slot->domain = f->domain;
		atomic_store_explicit(&slot->calls, 0, memory_order_relaxed);
		atomic_store_explicit(&slot->fired, 0, memory_order_relaxed);
		/* Counted before it is visible, so the count never under-states the table. */
		atomic_fetch_add(&sh->nfaults_armed, 1);
		atomic_store_explicit(&slot->active, 2, memory_order_release);
		return 0;
	}
	return -ENOSPC;
}

void sim_fault_clear(struct sim_shared *sh)
{
	for (unsigned i = 0; i < SIM_MAX_FAULTS; i++) {
		uint32_t expect = 2;

		/*
		 * Entries still being written (1) belong to a concurrent arm,
		 * which finishes arming them: they are left alone.
		 */
		if (atomic_compare_exchange_strong(&sh->faults[i].active, &expect, 0))
			atomic_fetch_sub(&sh->nfaults_armed, 1);
	}
}
