/*
 * The event ring: the last CD_EVENTS_MAX events, numbered from 1. Clients
 * page through it with "events after seq N"; one that falls behind by more
 * than the ring holds loses the oldest, which it can tell from the gap in
 * seq numbers.
 */
#include "cd-int.h"

#include <string.h>

void cd_ring_init(struct cd_ring *r)
{
	memset(r, 0, sizeof(*r));
	r->next = 1;
}

/* Copies src into a field of size n, truncated, always NUL-terminated. */
static void field(char *dst, size_t n, const char *src)
{
	size_t len = src ? strnlen(src, n - 1) : 0;

	if (len)
		memcpy(dst, src, len);
	dst[len] = '\0';
}

uint64_t cd_ring_push(struct cd_ring *r, double time, const char *kind, const char *group,
		      pid_t pid, const char *message)
{
	struct cd_event *e = &r->ev[r->next % CD_EVENTS_MAX];

	memset(e, 0, sizeof(*e));
	e->seq = r->next++;
	e->time = time;
	e->pid = pid;
	field(e->kind, sizeof(e->kind), kind);
	field(e->group, sizeof(e->group), group);
	field(e->message, sizeof(e->message), message);
	return e->seq;
}

unsigned cd_ring_since(const struct cd_ring *r, uint64_t since, struct cd_event *out, unsigned max)
{
	uint64_t oldest = r->next > CD_EVENTS_MAX ? r->next - CD_EVENTS_MAX : 1;
	uint64_t seq = since + 1 > oldest ? since + 1 : oldest;
	unsigned n = 0;

	/* since may be anything a client sent: UINT64_MAX must not wrap to 0. */
	if (since >= r->next)
		return 0;
	for (; seq < r->next && n < max; seq++)
		out[n++] = r->ev[seq % CD_EVENTS_MAX];
	return n;
}
