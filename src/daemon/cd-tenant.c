/*
 * Tenants: who a peer counts as for the connection bounds (cd-admit.c) and
 * the events' rate limit (cd-events.c). A uid names a user on the host; in
 * a cluster whose pods run as root, every pod's processes are uid 0, so
 * there the uid names nobody in particular and the pod (or, outside
 * Kubernetes, the container's cgroup) does. Pure.
 */
#include "cd-int.h"

#include <stdio.h>
#include <string.h>

bool cd_tenant_equal(const struct cd_tenant *a, const struct cd_tenant *b)
{
	return a->uid == b->uid && a->privileged == b->privileged && strcmp(a->key, b->key) == 0;
}

void cd_tenant_make(struct cd_tenant *t, uid_t uid, const char *cgroup, enum cd_pidns pidns,
		    bool admin)
{
	bool other_pidns = pidns != CD_PIDNS_DAEMON;
	char pod[CD_POD_UID_LEN + 1];

	memset(t, 0, sizeof(*t));
	t->uid = uid;
	if (!cgroup)
		cgroup = "";
	if (cgroup[0] && cd_cgroup_pod(cgroup, pod))
		snprintf(t->key, sizeof(t->key), "pod %s", pod);
	else if ((uid == 0 || other_pidns) && cgroup[0])
		snprintf(t->key, sizeof(t->key), "cgroup %s", cgroup);
	/*
	 * Root on the host runs the node's services (the Slurm plugin, the
	 * CLI, a batch system): trusted, with root's larger bounds. Root in a
	 * pod or a container is a tenant like any other. An administrator on
	 * the admin socket is trusted wherever it runs (the Kubernetes plugins
	 * run in a pod).
	 */
	t->privileged = admin || (uid == 0 && !other_pidns && strncmp(t->key, "pod ", 4) != 0);
}

const char *cd_tenant_name(const struct cd_tenant *t, char *buf, size_t len)
{
	if (t->key[0])
		snprintf(buf, len, "uid %u (%s)", (unsigned)t->uid, t->key);
	else
		snprintf(buf, len, "uid %u", (unsigned)t->uid);
	return buf;
}
