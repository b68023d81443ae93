/*
 * Connection admission: how many connections each tenant (struct
 * cd_tenant: a uid, and in a pod or a container its pod or cgroup) holds in
 * each class, against per-tenant and total bounds, so that no peer can take
 * the daemon's descriptors (or the HTTP server's connections) from the
 * others — nor one root pod another's.
 *
 * Three classes, bounded separately:
 *   IPC     libcuslice sessions, and connections whose protocol is not
 *           known yet (almost all become sessions);
 *   HTTP    API connections, from the front door until the HTTP server
 *           closes them;
 *   REFUSE  connections kept only to be refused politely in their own
 *           protocol (an unauthorized peer, or one over its IPC bound).
 * A tenant may hold per_uid[class]; a privileged one (root on the host, an
 * administrator) up to root[class]; all tenants together hold
 * total[class], of which reserve[class] only privileged tenants may use:
 * one tenant can never hold every connection, and root still gets in when
 * the others fill theirs. Pure: no I/O, no lock (the caller holds the
 * daemon's).
 */
#include "cd-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static unsigned min_u(unsigned a, unsigned b)
{
	return a < b ? a : b;
}

static unsigned at_least_1(unsigned v)
{
	return v ? v : 1;
}

void cd_admit_limits_for(struct cd_admit_limits *l, unsigned fds, unsigned ipc_per_uid,
			 unsigned http_per_uid)
{
	/* Descriptors for everything else: files, NVML, the HTTP server's own, the signal/timer. */
	unsigned budget = fds > 128 ? fds - 64 : 64;
	unsigned http = min_u(CD_HTTP_CONNECTIONS_MAX, at_least_1(budget / 8));
	unsigned refuse = min_u(CD_REFUSE_CONNECTIONS_MAX, at_least_1(budget / 16));
	/*
	 * A session costs up to three: its connection, once registered its
	 * process's pidfd, and its group's region (a memfd) when it is alone in
	 * its group (the default pid-<pid> groups).
	 */
	unsigned ipc = at_least_1((budget > http + refuse ? budget - http - refuse : 3) / 3);

	memset(l, 0, sizeof(*l));
	l->total[CD_CLASS_IPC] = ipc;
	l->per_uid[CD_CLASS_IPC] = min_u(at_least_1(ipc_per_uid), at_least_1(ipc / 4));
	l->root[CD_CLASS_IPC] = min_u(at_least_1(ipc_per_uid) * CD_ROOT_FACTOR, ipc);
	l->reserve[CD_CLASS_IPC] = ipc / 8;

	l->total[CD_CLASS_HTTP] = http;
	l->per_uid[CD_CLASS_HTTP] = min_u(at_least_1(http_per_uid), at_least_1(http / 4));
	l->root[CD_CLASS_HTTP] = min_u(at_least_1(http_per_uid) * CD_ROOT_FACTOR, http);
	l->reserve[CD_CLASS_HTTP] = http / 8;

	l->total[CD_CLASS_REFUSE] = refuse;
	l->per_uid[CD_CLASS_REFUSE] = min_u(CD_REFUSE_PER_UID, at_least_1(refuse / 4));
	l->root[CD_CLASS_REFUSE] = l->per_uid[CD_CLASS_REFUSE];
	l->reserve[CD_CLASS_REFUSE] = 0;
}

void cd_admit_init(struct cd_admit *a, const struct cd_admit_limits *l)
{
	memset(a, 0, sizeof(*a));
	a->lim = *l;
}

void cd_admit_free(struct cd_admit *a)
{
	free(a->holders);
	a->holders = NULL;
	a->nholders = a->cap = 0;
}

static struct cd_admit_holder *find(const struct cd_admit *a, const struct cd_tenant *t)
{
	for (unsigned i = 0; i < a->nholders; i++)
		if (cd_tenant_equal(&a->holders[i].t, t))
			return &a->holders[i];
	return NULL;
}

unsigned cd_admit_held(const struct cd_admit *a, const struct cd_tenant *t, enum cd_conn_class c)
{
	const struct cd_admit_holder *h = find(a, t);

	return h ? h->n[c] : 0;
}

unsigned cd_admit_limit(const struct cd_admit *a, const struct cd_tenant *t, enum cd_conn_class c)
{
	return t->privileged ? a->lim.root[c] : a->lim.per_uid[c];
}

int cd_admit_take(struct cd_admit *a, const struct cd_tenant *t, enum cd_conn_class c)
{
	struct cd_admit_holder *h = find(a, t);

	if (a->total[c] >= a->lim.total[c] || (h && h->n[c] >= cd_admit_limit(a, t, c)) ||
	    (!t->privileged && a->nonroot[c] >= a->lim.total[c] - a->lim.reserve[c]))
		return -EAGAIN;
	if (!h) {
		if (a->nholders == a->cap) {
			unsigned cap = a->cap ? a->cap * 2 : 16;
			struct cd_admit_holder *nh = realloc(a->holders, cap * sizeof(*nh));

			if (!nh)
				return -ENOMEM;
			a->holders = nh;
			a->cap = cap;
		}
		h = &a->holders[a->nholders++];
		memset(h, 0, sizeof(*h));
		h->t = *t;
	}
	h->n[c]++;
	a->total[c]++;
	if (!t->privileged)
		a->nonroot[c]++;
	return 0;
}

void cd_admit_put(struct cd_admit *a, const struct cd_tenant *t, enum cd_conn_class c)
{
	struct cd_admit_holder *h = find(a, t);
	bool empty = true;

	if (!h || h->n[c] == 0)
		return; /* never taken: a bug, but never an underflow */
	h->n[c]--;
	a->total[c]--;
	if (!t->privileged)
		a->nonroot[c]--;
	for (int k = 0; k < CD_CLASS_COUNT; k++)
		empty = empty && h->n[k] == 0;
	/* A tenant holding nothing is forgotten: the table stays as small as the set of holders. */
	if (empty)
		*h = a->holders[--a->nholders];
}
