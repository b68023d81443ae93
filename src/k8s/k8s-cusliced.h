/*
 * The plugins' client of cusliced's HTTP/JSON API on its Unix socket
 * (docs/cusliced.md): GPUs, group policies. The plugins talk to the daemon
 * through nothing else, so a change of the API is a change of this file.
 *
 * One connection (a libcurl handle on the socket) per client, shared by the
 * plugins' threads under a mutex; requests are short.
 */
#ifndef K8S_CUSLICED_H
#define K8S_CUSLICED_H

#include "cuslice/api.h"
#include "cuslice/policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define K8S_UUID_LEN 96 /* room for any NVML UUID */

struct k8s_gpu {
	int index; /* NVML index */
	char uuid[K8S_UUID_LEN];
	char name[96];
	uint64_t memory_total; /* bytes */
	bool healthy;	       /* listed, and not marked unhealthy by the daemon */
};

#define K8S_GPUS_MAX 64

struct k8s_cusliced;

/*
 * A client of the daemon at socket (an absolute path). token: the
 * daemon's token_file contents (sent as a bearer token), or NULL. NULL when
 * out of memory.
 */
struct k8s_cusliced *k8s_cusliced_open(const char *socket, const char *token);
void k8s_cusliced_close(struct k8s_cusliced *c);

/*
 * GET /v1/gpus into out[0..K8S_GPUS_MAX), *n of them, in the daemon's
 * order. 0, or -errno with a one-line message (daemon unreachable: -ECONNREFUSED).
 */
int k8s_cusliced_gpus(struct k8s_cusliced *c, struct k8s_gpu *out, unsigned *n, char *err,
		      size_t errlen);

/*
 * PATCH /v1/groups/NAME with a policy object (JSON text): its fields over
 * the stored policy's, the others kept (a new group's from the defaults).
 * 0, or -EINVAL (the daemon refused the policy: its message in err), or
 * -errno.
 */
int k8s_cusliced_put_group(struct k8s_cusliced *c, const char *name, const char *policy, char *err,
			   size_t errlen);

/* DELETE /v1/groups/NAME. 0 when deleted or when it had no policy; -errno otherwise. */
int k8s_cusliced_delete_group(struct k8s_cusliced *c, const char *name, char *err, size_t errlen);

/*
 * GET /v1/groups/NAME: the stored policy as JSON text (malloc'd) in
 * *policy, NULL when the group is unmanaged. 0, -ENOENT (no such group), or
 * -errno.
 */
int k8s_cusliced_get_policy(struct k8s_cusliced *c, const char *name, char **policy, char *err,
			    size_t errlen);

/*
 * The names of the managed groups whose name starts with prefix
 * (malloc'd array of malloc'd strings; free with k8s_cusliced_free_names).
 */
int k8s_cusliced_group_names(struct k8s_cusliced *c, const char *prefix, char ***names, unsigned *n,
			     char *err, size_t errlen);
void k8s_cusliced_free_names(char **names, unsigned n);

/*
 * The message of an error body: {"error": "text"} (cusliced today) or
 * {"error": {"code": ..., "message": "text"}}; else the body itself, cut to
 * one line. Pure; exposed for the unit tests.
 */
void k8s_cusliced_error_text(const char *body, char *out, size_t len);

#endif
