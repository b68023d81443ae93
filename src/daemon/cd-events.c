/*
 * The event history: what happened, numbered from 1 (seq numbers never
 * repeat, across restarts too: the files carry them), in three retention
 * classes that each keep their last CD_EVENTS_MAX events, so that no flood
 * of one kind can push another's out:
 *
 *   enforcement  bypass, over_quota, stopped, killed, policy... (and kinds
 *                this daemon does not know: new kinds are kept, not lost)
 *   refusal      denied
 *   ordinary     registered, unregistered, reclaimed
 * (the kinds and their classes: CS_EVENT_KINDS, include/cuslice/api.h)
 *
 * Every event is charged to a tenant (struct cd_tenant: the peer or
 * process it is about, the API peer who caused it; none for the daemon's
 * own) in a token bucket per tenant and class: CD_EVENTS_BURST at once,
 * CD_EVENTS_RATE per second after (privileged tenants, root on the host:
 * CD_ROOT_FACTOR times that). A tenant is a uid, and in a pod or a
 * container its pod or cgroup: where every pod runs as root, one pod's
 * flood fills its own bucket, never another pod's. Past that, events are
 * counted, not recorded, and a "suppressed" event of the same class sums
 * them up (per kind) every CD_EVENTS_SUMMARY_MS while the flood lasts and
 * once when it stops. So 5,000 registrations of one tenant leave 32
 * "registered" events and one summary, and everybody else's events stay.
 *
 * Recorded events are also queued as lines for their class's file
 * (cd-events-file.c writes them outside the daemon's lock). Pure apart from
 * that queue: no I/O, no lock (the caller holds the daemon's).
 */
#include "cd-int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const class_names[CD_EVCLASS_COUNT] = {
    [CD_EVCLASS_ENFORCEMENT] = "enforcement",
    [CD_EVCLASS_REFUSAL] = "refusal",
    [CD_EVCLASS_ORDINARY] = "ordinary",
};

const char *cd_event_class_name(enum cd_event_class c)
{
	return (unsigned)c < CD_EVCLASS_COUNT ? class_names[c] : "?";
}

enum cd_event_class cd_event_class_of(const char *kind)
{
	static const enum cd_event_class classes[] = {
#define X(id, name, cls) [id] = CD_EVCLASS_##cls,
	    CS_EVENT_KINDS(X)
#undef X
	};
	int k = cs_event_kind_parse(kind);

	return k < 0 ? CD_EVCLASS_ENFORCEMENT : classes[k];
}

void cd_events_init(struct cd_events *e)
{
	memset(e, 0, sizeof(*e));
	e->next = 1;
}

void cd_events_free(struct cd_events *e)
{
	free(e->buckets);
	for (int c = 0; c < CD_EVCLASS_COUNT; c++)
		free(e->pending[c].buf);
	memset(e, 0, sizeof(*e));
}

/* Copies src into a field of size n, truncated, always NUL-terminated. */
static void field(char *dst, size_t n, const char *src)
{
	size_t len = src ? strnlen(src, n - 1) : 0;

	if (len)
		memcpy(dst, src, len);
	dst[len] = '\0';
}

static void ring_put(struct cd_ring *r, const struct cd_event *ev)
{
	if (r->n == CD_EVENTS_MAX) {
		r->ev[r->first] = *ev;
		r->first = (r->first + 1) % CD_EVENTS_MAX;
	} else {
		r->ev[(r->first + r->n) % CD_EVENTS_MAX] = *ev;
		r->n++;
	}
}

/* Queues ev's line for its class's file; a full queue drops it (counted). */
static void queue_line(struct cd_events *e, enum cd_event_class c, const struct cd_event *ev)
{
	struct cd_ev_pending *p = &e->pending[c];
	char *line;
	size_t n;

	if (!e->persist)
		return;
	line = cd_event_line(ev);
	n = line ? strlen(line) : 0;
	if (!line || p->len + n > CD_EVENTS_PENDING_MAX) {
		e->unpersisted++;
		free(line);
		return;
	}
	if (p->len + n > p->cap) {
		size_t cap = p->cap ? p->cap : 4096;
		char *nb;

		while (cap < p->len + n)
			cap *= 2;
		nb = realloc(p->buf, cap);
		if (!nb) {
			e->unpersisted++;
			free(line);
			return;
		}
		p->buf = nb;
		p->cap = cap;
	}
	memcpy(p->buf + p->len, line, n);
	p->len += n;
	free(line);
}

/* Numbers and records an event (no rate limit). */
static uint64_t record(struct cd_events *e, double time, uid_t uid, const char *kind,
		       const char *group, pid_t pid, const char *message)
{
	enum cd_event_class c = cd_event_class_of(kind);
	struct cd_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.seq = e->next++;
	ev.time = time;
	ev.pid = pid;
	ev.uid = uid;
	field(ev.kind, sizeof(ev.kind), kind);
	field(ev.group, sizeof(ev.group), group);
	field(ev.message, sizeof(ev.message), message);
	ring_put(&e->ring[c], &ev);
	queue_line(e, c, &ev);
	return ev.seq;
}

/* ---- the rate limit ---- */

/* The daemon's own events: not attributable to any peer. */
static const struct cd_tenant daemon_tenant = {.uid = CD_UID_NONE};

static struct cd_ev_bucket *bucket(struct cd_events *e, const struct cd_tenant *t,
				   enum cd_event_class c, uint64_t now_ms)
{
	struct cd_ev_bucket *b;

	for (unsigned i = 0; i < e->nbuckets; i++)
		if (e->buckets[i].cls == c && cd_tenant_equal(&e->buckets[i].t, t))
			return &e->buckets[i];
	if (e->nbuckets == e->bucket_cap) {
		unsigned cap = e->bucket_cap ? e->bucket_cap * 2 : 16;
		struct cd_ev_bucket *nb = realloc(e->buckets, cap * sizeof(*nb));

		if (!nb)
			return NULL;
		e->buckets = nb;
		e->bucket_cap = cap;
	}
	b = &e->buckets[e->nbuckets++];
	memset(b, 0, sizeof(*b));
	b->t = *t;
	b->cls = c;
	b->tokens = cd_events_burst(t->privileged);
	b->refill_ms = now_ms;
	return b;
}

unsigned cd_events_burst(bool privileged)
{
	return privileged ? CD_EVENTS_BURST * CD_ROOT_FACTOR : CD_EVENTS_BURST;
}

unsigned cd_events_rate(bool privileged)
{
	return privileged ? CD_EVENTS_RATE * CD_ROOT_FACTOR : CD_EVENTS_RATE;
}

static void refill(struct cd_ev_bucket *b, uint64_t now_ms)
{
	double cap = cd_events_burst(b->t.privileged);

	if (now_ms > b->refill_ms) {
		b->tokens +=
		    (double)(now_ms - b->refill_ms) * cd_events_rate(b->t.privileged) / 1000.0;
		if (b->tokens > cap)
			b->tokens = cap;
		b->refill_ms = now_ms;
	}
}

static void count_suppressed(struct cd_events *e, struct cd_ev_bucket *b, const char *kind,
			     uint64_t now_ms)
{
	unsigned i;

	if (b->suppressed++ == 0)
		b->first_suppressed_ms = now_ms;
	e->suppressed_total++;
	for (i = 0; i < CD_EVENTS_SUMMARY_KINDS && b->kinds[i].kind[0]; i++)
		if (strncmp(b->kinds[i].kind, kind, sizeof(b->kinds[i].kind) - 1) == 0)
			break;
	if (i < CD_EVENTS_SUMMARY_KINDS && !b->kinds[i].kind[0])
		field(b->kinds[i].kind, sizeof(b->kinds[i].kind), kind);
	b->kinds[i].n++;
}

/* Records b's summary and starts counting anew. */
static void summarize(struct cd_events *e, struct cd_ev_bucket *b, double time, uint64_t now_ms)
{
	char msg[256], who[96];
	bool first = true;
	size_t n;

	if (b->t.uid == CD_UID_NONE)
		snprintf(who, sizeof(who), "the daemon");
	else
		cd_tenant_name(&b->t, who, sizeof(who));

	n = (size_t)snprintf(
	    msg, sizeof(msg), "%" PRIu64 " %s events of %s not recorded in %.1f s (", b->suppressed,
	    class_names[b->cls], who, (double)(now_ms - b->first_suppressed_ms) / 1000.0);
	for (unsigned i = 0; i <= CD_EVENTS_SUMMARY_KINDS && n < sizeof(msg); i++) {
		if (!b->kinds[i].n)
			continue;
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s%s %" PRIu64, first ? "" : ", ",
				      i == CD_EVENTS_SUMMARY_KINDS ? "other" : b->kinds[i].kind,
				      b->kinds[i].n);
		first = false;
	}
	if (n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - n, "): more than %u at once and %u per second",
			 cd_events_burst(b->t.privileged), cd_events_rate(b->t.privileged));
	/* The summary takes the suppressed events' class: cd_event_class_of("suppressed") would
	 * file every summary as enforcement. */
	{
		struct cd_event ev;

		memset(&ev, 0, sizeof(ev));
		ev.seq = e->next++;
		ev.time = time;
		ev.uid = b->t.uid;
		field(ev.kind, sizeof(ev.kind), cs_event_kind_name(CS_EVENT_SUPPRESSED));
		field(ev.message, sizeof(ev.message), msg);
		ring_put(&e->ring[b->cls], &ev);
		queue_line(e, b->cls, &ev);
	}
	b->suppressed = 0;
	memset(b->kinds, 0, sizeof(b->kinds));
}

uint64_t cd_events_add(struct cd_events *e, double time, uint64_t now_ms, const struct cd_tenant *t,
		       const char *kind, const char *group, pid_t pid, const char *message)
{
	enum cd_event_class c = cd_event_class_of(kind ? kind : "");
	struct cd_ev_bucket *b;
	uid_t uid;

	if (!t)
		t = &daemon_tenant;
	uid = t->uid;
	b = bucket(e, t, c, now_ms);

	/* Out of memory for a bucket: record (losing an event would be worse than a flood). */
	if (!b)
		return record(e, time, uid, kind, group, pid, message);
	refill(b, now_ms);
	b->last_ms = now_ms;
	if (b->tokens < 1.0) {
		count_suppressed(e, b, kind ? kind : "", now_ms);
		return 0;
	}
	b->tokens -= 1.0;
	return record(e, time, uid, kind, group, pid, message);
}

unsigned cd_events_tick(struct cd_events *e, double time, uint64_t now_ms)
{
	unsigned written = 0;

	for (unsigned i = 0; i < e->nbuckets;) {
		struct cd_ev_bucket *b = &e->buckets[i];

		refill(b, now_ms);
		if (b->suppressed && (now_ms - b->first_suppressed_ms >= CD_EVENTS_SUMMARY_MS ||
				      now_ms - b->last_ms >= 1000)) {
			summarize(e, b, time, now_ms);
			written++;
		}
		/* A full bucket with nothing to say is the same as none: forget it. */
		if (!b->suppressed && b->tokens >= cd_events_burst(b->t.privileged)) {
			*b = e->buckets[--e->nbuckets];
			continue;
		}
		i++;
	}
	return written;
}

bool cd_events_restore(struct cd_events *e, enum cd_event_class c, const struct cd_event *ev)
{
	struct cd_ring *r = &e->ring[c];

	if (r->n && r->ev[(r->first + r->n - 1) % CD_EVENTS_MAX].seq >= ev->seq)
		return false;
	ring_put(r, ev);
	if (ev->seq >= e->next)
		e->next = ev->seq + 1;
	return true;
}

unsigned cd_events_since(const struct cd_events *e, uint64_t since, struct cd_event *out,
			 unsigned max)
{
	unsigned pos[CD_EVCLASS_COUNT], n = 0;

	/* Each ring is in seq order: skip what is not newer, then merge. */
	for (int c = 0; c < CD_EVCLASS_COUNT; c++) {
		const struct cd_ring *r = &e->ring[c];

		pos[c] = 0;
		while (pos[c] < r->n && r->ev[(r->first + pos[c]) % CD_EVENTS_MAX].seq <= since)
			pos[c]++;
	}
	while (n < max) {
		const struct cd_event *best = NULL;
		int bc = -1;

		for (int c = 0; c < CD_EVCLASS_COUNT; c++) {
			const struct cd_ring *r = &e->ring[c];
			const struct cd_event *ev;

			if (pos[c] == r->n)
				continue;
			ev = &r->ev[(r->first + pos[c]) % CD_EVENTS_MAX];
			if (!best || ev->seq < best->seq) {
				best = ev;
				bc = c;
			}
		}
		if (!best)
			break;
		out[n++] = *best;
		pos[bc]++;
	}
	return n;
}

/* ---- lines of the files ---- */

char *cd_event_line(const struct cd_event *ev)
{
	cJSON *o = cJSON_CreateObject();
	char num[32], *text = NULL, *line;
	bool ok;
	size_t n;

	if (!o)
		return NULL;
	snprintf(num, sizeof(num), "%" PRIu64, ev->seq);
	ok = cJSON_AddRawToObject(o, cs_key_seq, num) != NULL;
	snprintf(num, sizeof(num), "%.3f", ev->time);
	ok = ok && cJSON_AddRawToObject(o, cs_key_time, num) &&
	     cJSON_AddStringToObject(o, cs_key_kind, ev->kind) &&
	     cJSON_AddStringToObject(o, cs_key_group, ev->group) &&
	     cJSON_AddNumberToObject(o, cs_key_pid, ev->pid) &&
	     (ev->uid == CD_UID_NONE ? cJSON_AddNullToObject(o, cs_key_uid) != NULL
				     : cJSON_AddNumberToObject(o, cs_key_uid, ev->uid) != NULL) &&
	     cJSON_AddStringToObject(o, cs_key_message, ev->message);
	if (ok)
		text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!text)
		return NULL;
	n = strlen(text);
	line = malloc(n + 2);
	if (line) {
		memcpy(line, text, n);
		line[n] = '\n';
		line[n + 1] = '\0';
	}
	cJSON_free(text);
	return line;
}

/* A string member copied into a field; false when absent, not a string, or holding a NUL. */
static bool str_member(const cJSON *o, const char *k, char *dst, size_t n)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!cJSON_IsString(v))
		return false;
	field(dst, n, v->valuestring);
	return true;
}

int cd_event_parse_line(const char *line, size_t len, struct cd_event *ev)
{
	const cJSON *seq, *time, *pid, *uid;
	char err[64];
	cJSON *o;
	bool ok;

	memset(ev, 0, sizeof(ev[0]));
	/* Our own files, root's only; still: a NUL inside a string is never ours. */
	if (cd_json_check(line, len, err, sizeof(err)) != 0)
		return -EINVAL;
	o = cJSON_ParseWithLength(line, len);
	seq = cJSON_GetObjectItemCaseSensitive(o, cs_key_seq);
	time = cJSON_GetObjectItemCaseSensitive(o, cs_key_time);
	pid = cJSON_GetObjectItemCaseSensitive(o, cs_key_pid);
	uid = cJSON_GetObjectItemCaseSensitive(o, cs_key_uid);
	ok = cJSON_IsObject(o) && cJSON_IsNumber(seq) && seq->valuedouble >= 1 &&
	     seq->valuedouble < 9007199254740992.0 && seq->valuedouble == floor(seq->valuedouble) &&
	     cJSON_IsNumber(time) && isfinite(time->valuedouble) && cJSON_IsNumber(pid) &&
	     (cJSON_IsNull(uid) ||
	      (cJSON_IsNumber(uid) && uid->valuedouble >= 0 && uid->valuedouble < 4294967295.0)) &&
	     str_member(o, cs_key_kind, ev->kind, sizeof(ev->kind)) &&
	     str_member(o, cs_key_group, ev->group, sizeof(ev->group)) &&
	     str_member(o, cs_key_message, ev->message, sizeof(ev->message));
	if (ok) {
		ev->seq = (uint64_t)seq->valuedouble;
		ev->time = time->valuedouble;
		ev->pid = (pid_t)pid->valuedouble;
		ev->uid = cJSON_IsNull(uid) ? CD_UID_NONE : (uid_t)uid->valuedouble;
	}
	cJSON_Delete(o);
	return ok ? 0 : -EINVAL;
}

void cd_events_take_pending(struct cd_events *e, struct cd_ev_pending p[CD_EVCLASS_COUNT])
{
	for (int c = 0; c < CD_EVCLASS_COUNT; c++) {
		p[c] = e->pending[c];
		memset(&e->pending[c], 0, sizeof(e->pending[c]));
	}
}
