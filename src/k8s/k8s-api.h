/*
 * A minimal client of the Kubernetes API server: JSON over HTTPS with the
 * pod's service-account token (libcurl + cJSON). In a pod the defaults are
 * the in-cluster ones: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
 * the CA and token under /var/run/secrets/kubernetes.io/serviceaccount/.
 *
 * The token file is read again whenever it changes (the kubelet rotates
 * projected tokens), never cached past that. One connection per client,
 * shared under a mutex.
 */
#ifndef K8S_API_H
#define K8S_API_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct k8s_api_config {
	char server[256];     /* "https://HOST:PORT"; "" = in-cluster */
	char ca_file[256];    /* "" = K8S_SA_DIR/ca.crt */
	char token_file[256]; /* "" = K8S_SA_DIR/token */
};

struct k8s_api;

/*
 * A client for cfg. Fails (-EINVAL with a message) when there is no server
 * to talk to (not in a pod and no server given), or the CA or token file
 * cannot be read.
 */
int k8s_api_open(const struct k8s_api_config *cfg, struct k8s_api **ret, char *err, size_t errlen);
void k8s_api_close(struct k8s_api *a);

/*
 * method path (e.g. "GET", "/api/v1/namespaces/ns/pods/name") with an
 * optional JSON body. Returns the HTTP status (> 0) with the reply parsed
 * into *reply (NULL when the body is not JSON), or -errno with a message
 * (server unreachable, TLS refused, token unreadable).
 */
long k8s_api_request(struct k8s_api *a, const char *method, const char *path, const char *body,
		     cJSON **reply, char *err, size_t errlen);

/* The message of a Status reply (or of anything else the server sent), one line. */
void k8s_api_status_text(const cJSON *reply, long status, char *out, size_t len);

#endif
