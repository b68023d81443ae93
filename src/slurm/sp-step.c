/*
 * A step and its slice: the group a step becomes, the GPUs and shards Slurm
 * gave it, what its options ask, the limits it gets, the policy cusliced is
 * given and the variables its tasks see. Pure functions (cJSON only), tested
 * on their own under the sanitizers.
 *
 * Values reuse libcuslice's parser (cs-limits.h), so "8GiB", "25%" and
 * "12.5%" mean here exactly what they mean in CUSLICE_MEM_LIMIT and in a
 * cusliced policy.
 */
#include "sp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-limits.h"
#include "cs-size.h"

#define PPM_FULL 1000000u
#define GPU_INDEX_MAX 1023
#define SHARDS_MAX 1000000u

#define MEM_FORMS                                                                                  \
	"expected a size (" CS_SIZE_FORMS ") or a percentage of the GPU's memory up to 100%, "    \
	"up to 4 decimals (e.g. 25%)"
#define MEM_FORMS_OVER                                                                             \
	"expected a size (" CS_SIZE_FORMS ") or a percentage of the GPU's memory up to 100% "     \
	"(1000% with --gpu-oversubscribe), up to 4 decimals (e.g. 25%)"
#define CORES_FORMS                                                                                \
	"expected a percentage of the GPU's time above 0 and up to 100, up to 4 decimals, "        \
	"%% optional (e.g. 30 or 12.5%%)"

int sp_fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

const char *sp_shown(const char *s, char out[SP_SHOWN_MAX])
{
	size_t o = 0;

	for (size_t i = 0; s[i] && i < 64 && o + 5 < SP_SHOWN_MAX; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, SP_SHOWN_MAX - o, "\\x%02x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = '\0';
	return out;
}

/* One bare value (no per-GPU key) parsed with libcuslice's rules. */
static bool one_value(const char *s, unsigned flags, struct cs_limit_rule *ret)
{
	struct cs_limits l;

	if (!s || !*s || strchr(s, ',') || strchr(s, '='))
		return false;
	if (cs_limits_parse("option", s, flags, &l, NULL, 0) != 0 || l.n != 1 ||
	    l.rule[0].key != CS_LIMIT_KEY_ALL)
		return false;
	*ret = l.rule[0];
	return true;
}

int sp_opt_mem(const char *opt, const char *s, bool over, struct sp_amount *ret, char *err,
	       size_t errlen)
{
	struct cs_limit_rule r;
	char v[SP_SHOWN_MAX];

	if (!one_value(s, CS_LIMIT_SIZES | CS_LIMIT_PERCENT | (over ? CS_LIMIT_OVER : 0), &r))
		return sp_fail(err, errlen, "%s=%s: %s", opt, sp_shown(s ? s : "", v),
			       over ? MEM_FORMS_OVER : MEM_FORMS);
	*ret =
	    (struct sp_amount){.set = true, .percent = r.percent, .bytes = r.bytes, .ppm = r.ppm};
	if (r.percent)
		ret->bytes = 0;
	return 0;
}

int sp_opt_cores(const char *opt, const char *s, struct sp_amount *ret, char *err, size_t errlen)
{
	struct cs_limit_rule r;
	char v[SP_SHOWN_MAX];

	/* 0% would block every launch of the step for good. */
	if (!one_value(s, CS_LIMIT_PERCENT, &r) || r.ppm == 0)
		return sp_fail(err, errlen, "%s=%s: " CORES_FORMS, opt, sp_shown(s ? s : "", v));
	*ret = (struct sp_amount){.set = true, .percent = true, .ppm = r.ppm};
	return 0;
}

int sp_opt_priority(const char *opt, const char *s, int *ret, char *err, size_t errlen)
{
	char v[SP_SHOWN_MAX];
	int p = s ? cs_priority_parse(s) : -1;

	if (p < 0)
		return sp_fail(err, errlen,
			       "%s=%s: expected high (best-effort groups yield to it), normal or "
			       "best-effort (yields to high-priority groups on its GPUs)",
			       opt, sp_shown(s ? s : "", v));
	*ret = p;
	return 0;
}

/* Priorities in order: best-effort below normal below high. */
static int priority_rank(int p)
{
	return p == CS_PRIORITY_BEST_EFFORT ? 0 : p == CS_PRIORITY_HIGH ? 2 : 1;
}

void sp_step_init(struct sp_step *s, uint32_t job, uint32_t step)
{
	memset(s, 0, sizeof(*s));
	s->job = job;
	s->step = step;
	switch (step) {
	case SP_STEPID_BATCH:
		s->kind = SP_STEP_BATCH;
		snprintf(s->step_text, sizeof(s->step_text), "batch");
		break;
	case SP_STEPID_INTERACTIVE:
		s->kind = SP_STEP_INTERACTIVE;
		snprintf(s->step_text, sizeof(s->step_text), "interactive");
		break;
	case SP_STEPID_EXTERN:
		s->kind = SP_STEP_EXTERN;
		snprintf(s->step_text, sizeof(s->step_text), "extern");
		break;
	default:
		/* The other special ids (pending, and any later ones) are at the top of the range.
		 */
		if (step >= 0xfffffff0u) {
			s->kind = SP_STEP_OTHER;
			snprintf(s->step_text, sizeof(s->step_text), "x%08" PRIx32, step);
		} else {
			s->kind = SP_STEP_NORMAL;
			snprintf(s->step_text, sizeof(s->step_text), "%" PRIu32, step);
		}
	}
	snprintf(s->name, sizeof(s->name), SP_GROUP_PREFIX "%" PRIu32 ".%s", job, s->step_text);
}

/* A decimal number without sign or blanks, at most max. */
static bool decimal(const char *p, size_t n, unsigned long max, unsigned long *ret)
{
	unsigned long v = 0;

	if (n == 0 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(p[i] - '0');
	}
	if (v > max)
		return false;
	*ret = v;
	return true;
}

int sp_step_resources(struct sp_step *s, const char *gpus_var, const char *gpus, const char *shards,
		      char *err, size_t errlen)
{
	unsigned long v;
	char shown_v[SP_SHOWN_MAX];

	s->ngpus = 0;
	s->shards = 0;
	for (const char *p = gpus; p && *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (!decimal(p, n, GPU_INDEX_MAX, &v) || s->ngpus == SP_MAX_GPUS)
			return sp_fail(
			    err, errlen,
			    "%s=%s: expected a comma list of at most %d GPU indices from 0 "
			    "to %d",
			    gpus_var, sp_shown(gpus, shown_v), SP_MAX_GPUS, GPU_INDEX_MAX);
		for (unsigned i = 0; i < s->ngpus; i++)
			if (s->gpu[i] == (int)v)
				return sp_fail(err, errlen, "%s=%s: GPU %lu is listed twice",
					       gpus_var, sp_shown(gpus, shown_v), v);
		s->gpu[s->ngpus++] = (int)v;
		p = end ? end + 1 : p + n;
		if (end && !*p)
			return sp_fail(err, errlen, "%s=%s: ends with a comma", gpus_var,
				       sp_shown(gpus, shown_v));
	}
	if (shards && *shards) {
		if (!decimal(shards, strlen(shards), SHARDS_MAX, &v))
			return sp_fail(
			    err, errlen,
			    "SLURM_SHARDS_ON_NODE=%s: expected a number of shards from 0 "
			    "to %u",
			    sp_shown(shards, shown_v), SHARDS_MAX);
		s->shards = (unsigned)v;
	}
	return 0;
}

void sp_amount_text(const struct sp_amount *a, char *buf, size_t len)
{
	int n;

	if (!a->set) {
		snprintf(buf, len, "none");
		return;
	}
	if (!a->percent) {
		snprintf(buf, len, "%" PRIu64, a->bytes);
		return;
	}
	n = snprintf(buf, len, "%" PRIu32 ".%04" PRIu32, a->ppm / 10000, a->ppm % 10000);
	if (n < 0 || (size_t)n >= len)
		return;
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
	if ((size_t)n + 1 < len) {
		buf[n] = '%';
		buf[n + 1] = '\0';
	}
}

/* "5 of 20 shards" or "a whole GPU": where a step's share comes from, for messages. */
static void share_source(const struct sp_config *c, const struct sp_step *s, char *buf, size_t len)
{
	if (s->shards)
		snprintf(buf, len, "%u shard%s of the %u of %s GPU", s->shards,
			 s->shards == 1 ? "" : "s", c->shards_per_gpu * s->ngpus,
			 s->ngpus == 1 ? "its" : "each of its");
	else
		snprintf(buf, len, "a whole GPU");
}

int sp_slice_decide(const struct sp_config *c, const struct sp_step *s, const struct sp_request *r,
		    struct sp_slice *ret, char *err, size_t errlen)
{
	bool asked = r->mem.set || r->cores.set;
	struct sp_slice sl = {.burst = r->burst || c->burst,
			      .oversub = r->oversub,
			      .priority = r->priority_set ? r->priority : c->priority};
	struct sp_amount share;
	char a[40], b[40], src[96];
	uint64_t ppm;

	/* A priority holds others' work back: a user may ask up to what the cluster allows. */
	if (r->priority_set && priority_rank(r->priority) > priority_rank(c->priority_max))
		return sp_fail(err, errlen,
			       "--gpu-priority=%s: above what this cluster lets a step ask "
			       "(priority_max=%s in plugstack.conf)",
			       cs_priority_name((enum cs_priority)r->priority),
			       cs_priority_name((enum cs_priority)c->priority_max));
	/* Memory past the share is host RAM and the scheduler's time: the site decides. */
	if (r->oversub && !c->oversub_allowed)
		return sp_fail(err, errlen,
			       "--gpu-oversubscribe: this cluster does not let steps oversubscribe "
			       "GPU memory (oversubscribe=allow in plugstack.conf)");

	if (s->ngpus == 0) {
		if (asked)
			return sp_fail(
			    err, errlen,
			    "--gpu-mem and --gpu-cores ask for a slice of a GPU, but step %s "
			    "has no GPU on this node: ask for one with --gres=shard:N or "
			    "--gres=gpu:N",
			    s->name);
		return 0;
	}
	if (s->shards) {
		if (!c->shards_per_gpu)
			return sp_fail(err, errlen,
				       "step %s has %u shards, but plugstack.conf does not say how "
				       "many shards a GPU has: add shards_per_gpu=N to the "
				       "cuslice_spank.so line (N: gres.conf's shard count per GPU)",
				       s->name, s->shards);
		ppm = (uint64_t)s->shards * PPM_FULL / ((uint64_t)c->shards_per_gpu * s->ngpus);
		if (ppm > PPM_FULL)
			return sp_fail(err, errlen,
				       "step %s has %u shards on %u GPU(s), more than "
				       "shards_per_gpu=%u in plugstack.conf allows: make it match "
				       "gres.conf",
				       s->name, s->shards, s->ngpus, c->shards_per_gpu);
		sl.share_ppm = (uint32_t)ppm;
	} else {
		sl.share_ppm = PPM_FULL;
	}
	share = (struct sp_amount){.set = true, .percent = true, .ppm = sl.share_ppm};
	sp_amount_text(&share, b, sizeof(b));
	share_source(c, s, src, sizeof(src));

	if (r->mem.set) {
		if (r->mem.percent && r->mem.ppm > sl.share_ppm && !sl.oversub) {
			sp_amount_text(&r->mem, a, sizeof(a));
			return sp_fail(
			    err, errlen,
			    "--gpu-mem=%s is more than step %s's share of its GPU's memory "
			    "(%s: %s)%s",
			    a, s->name, b, src,
			    c->oversub_allowed ? "; --gpu-oversubscribe lets it pass the share "
						 "as unified memory"
					       : "");
		}
		sl.mem = r->mem; /* bytes: sp_slice_check_bytes, once the GPU's size is known */
	} else {
		sl.mem = s->shards ? share : c->default_mem;
	}
	if (r->cores.set) {
		if (r->cores.ppm > sl.share_ppm) {
			sp_amount_text(&r->cores, a, sizeof(a));
			return sp_fail(
			    err, errlen,
			    "--gpu-cores=%s is more than step %s's share of its GPU's time "
			    "(%s: %s)",
			    a, s->name, b, src);
		}
		sl.cores = r->cores;
	} else {
		sl.cores = s->shards ? share : c->default_cores;
	}
	*ret = sl;
	return 1;
}

int sp_step_bind(struct sp_step *s, const struct sp_gpu *gpus, unsigned n, char *err, size_t errlen)
{
	for (unsigned i = 0; i < s->ngpus; i++) {
		unsigned k = 0;

		while (k < n && gpus[k].index != s->gpu[i])
			k++;
		if (k == n || !gpus[k].uuid[0]) {
			s->bound = false;
			sp_fail(err, errlen,
				"step %s was given GPU %d, which cusliced does not see: gres.conf "
				"must list the GPUs in NVML's order (docs/slurm.md)",
				s->name, s->gpu[i]);
			return -ENODEV;
		}
		snprintf(s->uuid[i], sizeof(s->uuid[i]), "%s", gpus[k].uuid);
		s->total[i] = gpus[k].total;
	}
	s->bound = true;
	return 0;
}

int sp_slice_check_bytes(const struct sp_slice *sl, const struct sp_step *s, char *err,
			 size_t errlen)
{
	char want[40], cap_text[40], share[40];
	uint32_t ppm = sl->oversub ? CS_LIMIT_OVER_PPM_MAX : sl->share_ppm;
	struct sp_amount sa = {.set = true, .percent = true, .ppm = ppm};

	if (!sl->mem.set || sl->mem.percent)
		return 0;
	for (unsigned i = 0; i < s->ngpus && s->bound; i++) {
		/* floor(total * ppm / 10^6), split so that no product overflows. */
		uint64_t t = s->total[i];
		uint64_t cap = t / PPM_FULL * ppm + t % PPM_FULL * ppm / PPM_FULL;

		if (sl->mem.bytes <= cap)
			continue;
		cs_size_format(sl->mem.bytes, want, sizeof(want));
		cs_size_format(cap, cap_text, sizeof(cap_text));
		sp_amount_text(&sa, share, sizeof(share));
		if (sl->oversub)
			return sp_fail(err, errlen,
				       "--gpu-mem=%s is more than a step may oversubscribe GPU %d "
				       "(%s of its memory: %s)",
				       want, s->gpu[i], share, cap_text);
		return sp_fail(err, errlen,
			       "--gpu-mem=%s is more than step %s's share of GPU %d (%s of "
			       "its memory: %s)",
			       want, s->name, s->gpu[i], share, cap_text);
	}
	return 0;
}

/* The JSON value of an amount: a byte count, or "25%" (memory) / 25 (cores). */
static cJSON *amount_json(const struct sp_amount *a, bool core)
{
	char text[40];

	if (core)
		return cJSON_CreateNumber((double)a->ppm / 1e4);
	if (!a->percent)
		return cJSON_CreateNumber((double)a->bytes); /* exact below 2^53: 8 PiB */
	sp_amount_text(a, text, sizeof(text));
	return cJSON_CreateString(text);
}

static bool add(cJSON *o, const char *k, cJSON *v)
{
	if (!v)
		return false;
	if (!cJSON_AddItemToObject(o, k, v)) {
		cJSON_Delete(v);
		return false;
	}
	return true;
}

/*
 * A limit for the policy. With other GPUs denied, an object: the step's
 * GPUs by UUID, and "default": 0 (memory) for every other GPU, so a task
 * that resets CUDA_VISIBLE_DEVICES reaches no other GPU's memory.
 */
static cJSON *limit_json(const struct sp_config *c, const struct sp_step *s,
			 const struct sp_amount *a, bool core)
{
	/* "none" on the step's own GPUs, while others are at 0: the whole GPU. */
	static const struct sp_amount whole = {.set = true, .percent = true, .ppm = PPM_FULL};
	const struct sp_amount *v = a->set ? a : &whole;
	cJSON *o;

	if (c->other_gpus_allowed || (core && !a->set))
		return a->set ? amount_json(a, core) : cJSON_CreateNull();
	if (!s->bound)
		return NULL;
	o = cJSON_CreateObject();
	if (!o)
		return NULL;
	if (!core && !add(o, cs_key_default, cJSON_CreateNumber(0)))
		goto fail;
	for (unsigned i = 0; i < s->ngpus; i++)
		if (!add(o, s->uuid[i], amount_json(v, core)))
			goto fail;
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

/*
 * An oversubscribing step's device memory: its shards' share of each of its
 * GPUs (memory that cannot be paged out stays within what the step was
 * given; the rest of the GPU is other steps'). NULL when out of memory.
 */
static cJSON *device_limit_json(const struct sp_config *c, const struct sp_step *s,
				const struct sp_slice *sl)
{
	struct sp_amount share = {.set = true, .percent = true, .ppm = sl->share_ppm};
	cJSON *o;

	/* Every GPU: the share, as the other limits do (other GPUs have memory_limit 0 else). */
	if (c->other_gpus_allowed)
		return amount_json(&share, false);
	o = cJSON_CreateObject();
	for (unsigned i = 0; o && i < s->ngpus; i++)
		if (!add(o, s->uuid[i], amount_json(&share, false))) {
			cJSON_Delete(o);
			return NULL;
		}
	return o;
}

char *sp_policy_json(const struct sp_config *c, const struct sp_step *s, const struct sp_slice *sl,
		     const struct sp_members *m)
{
	cJSON *o = cJSON_CreateObject(), *mem = NULL, *rule = NULL, *lb = NULL;
	char *text = NULL, job[16];
	bool ok;

	/* Every item is owned by its parent once added: one delete frees all. */
	ok = o && add(o, cs_key_memory_limit, limit_json(c, s, &sl->mem, false)) &&
	     add(o, cs_key_core_limit, limit_json(c, s, &sl->cores, true)) &&
	     add(o, cs_key_mode,
		 cJSON_CreateString(cs_policy_mode_name(sl->burst ? CS_POLICY_MODE_BURST
								  : CS_POLICY_MODE_HARD))) &&
	     add(o, cs_key_daemon_required, cJSON_CreateBool(c->daemon_required)) &&
	     add(o, cs_key_on_violation,
		 cJSON_CreateString(cs_policy_action_name(c->on_violation))) &&
	     (mem = cJSON_AddObjectToObject(o, cs_key_members)) != NULL;
	if (ok && m->cgroup) {
		ok = (rule = cJSON_AddArrayToObject(mem, cs_key_cgroups)) != NULL &&
		     cJSON_AddItemToArray(rule, cJSON_CreateString(m->cgroup));
	} else if (ok) {
		ok = (rule = cJSON_AddArrayToObject(mem, cs_key_uids)) != NULL &&
		     cJSON_AddItemToArray(rule, cJSON_CreateNumber((double)m->uid));
	}
	snprintf(job, sizeof(job), "%" PRIu32, s->job);
	ok = ok && (lb = cJSON_AddObjectToObject(o, cs_key_labels)) != NULL &&
	     add(lb, cs_label_slurm_job, cJSON_CreateString(job)) &&
	     add(lb, cs_label_slurm_step, cJSON_CreateString(s->step_text)) &&
	     (!s->user[0] || add(lb, cs_label_slurm_user, cJSON_CreateString(s->user)));
	/*
	 * A step is its user's work (often one process per GPU): any of its
	 * processes may hold the whole slice, not only the GPU's size. Its
	 * device memory stays within its shards' share.
	 */
	if (ok && sl->oversub)
		ok = add(o, cs_key_memory_mode,
			 cJSON_CreateString(
			     cs_policy_memory_mode_name(CS_POLICY_MEMORY_OVERSUBSCRIBE))) &&
		     add(o, cs_key_oversubscribe_single, cJSON_CreateBool(true));
	if (ok && sl->oversub && sl->share_ppm < PPM_FULL)
		ok = (c->other_gpus_allowed || s->bound) &&
		     add(o, cs_key_device_memory_limit, device_limit_json(c, s, sl));
	if (ok && sl->priority != CS_PRIORITY_NORMAL)
		ok = add(o, cs_key_priority,
			 cJSON_CreateString(cs_priority_name((enum cs_priority)sl->priority)));
	if (ok)
		text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return text;
}

int sp_preload_value(const char *library, const char *current, char *buf, size_t len)
{
	size_t n = strlen(library), pos;

	if (n + 1 > len)
		return -ENAMETOOLONG;
	memcpy(buf, library, n + 1);
	pos = n;
	/* ld.so separates LD_PRELOAD entries by colons or blanks. */
	for (const char *p = current; p && *p;) {
		size_t k = strcspn(p, ": \t");

		if (k && !(k == n && memcmp(p, library, n) == 0)) {
			if (pos + 1 + k + 1 > len)
				return -ENAMETOOLONG;
			buf[pos++] = ':';
			memcpy(buf + pos, p, k);
			pos += k;
			buf[pos] = '\0';
		}
		p += k;
		p += strspn(p, ": \t");
	}
	return 0;
}

bool sp_group_of_job(const char *name, uint32_t job)
{
	char prefix[32];
	int n = snprintf(prefix, sizeof(prefix), SP_GROUP_PREFIX "%" PRIu32 ".", job);

	return name && strncmp(name, prefix, (size_t)n) == 0 && name[n];
}
