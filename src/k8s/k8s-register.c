/*
 * Registration with the kubelet (k8s-register.h): the plugin-registry
 * service, the classic Register call, and the inotify watch that notices a
 * restarted kubelet.
 */
#include "k8s-register.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "deviceplugin.pb-c.h"
#include "k8s-grpc.h"
#include "k8s-pb.h"
#include "pluginregistration.pb-c.h"

#define REG_VERSIONS_MAX 4

struct k8s_reg {
	struct k8s_grpc_server *srv;
	struct k8s_grpc_method methods[2];
	char type[32], name[256], endpoint[256];
	char versions[REG_VERSIONS_MAX][32];
	unsigned nversions;

	pthread_mutex_t lock;
	int status; /* 1 registered, 0 unknown, -1 refused */
	char error[512];
};

static int get_info(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		    char *msg, size_t msglen)
{
	struct k8s_reg *r = ctx;
	Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
	char *versions[REG_VERSIONS_MAX];

	(void)req;
	(void)len;
	info.type = r->type;
	info.name = r->name;
	info.endpoint = r->endpoint;
	for (unsigned i = 0; i < r->nversions; i++)
		versions[i] = r->versions[i];
	info.supported_versions = versions;
	info.n_supported_versions = r->nversions;
	if (k8s_pb_pack(&info.base, resp, resp_len) != 0) {
		snprintf(msg, msglen, "out of memory");
		return K8S_GRPC_RESOURCE_EXHAUSTED;
	}
	return K8S_GRPC_OK;
}

static int notify_status(void *ctx, const uint8_t *req, size_t len, uint8_t **resp,
			 size_t *resp_len, char *msg, size_t msglen)
{
	struct k8s_reg *r = ctx;
	Pluginregistration__RegistrationStatus *st =
	    pluginregistration__registration_status__unpack(NULL, len, req);

	*resp = NULL;
	*resp_len = 0;
	if (!st) {
		snprintf(msg, msglen, "RegistrationStatus: cannot decode the message");
		return K8S_GRPC_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(&r->lock);
	r->status = st->plugin_registered ? 1 : -1;
	snprintf(r->error, sizeof(r->error), "%s", st->error ? st->error : "");
	pthread_mutex_unlock(&r->lock);
	pluginregistration__registration_status__free_unpacked(st, NULL);
	return K8S_GRPC_OK;
}

int k8s_reg_start(const char *socket_path, const struct k8s_reg_info *info, struct k8s_reg **ret,
		  char *err, size_t errlen)
{
	struct k8s_reg *r = calloc(1, sizeof(*r));
	int e;

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	snprintf(r->type, sizeof(r->type), "%s", info->type);
	snprintf(r->name, sizeof(r->name), "%s", info->name);
	snprintf(r->endpoint, sizeof(r->endpoint), "%s", info->endpoint);
	for (unsigned i = 0; i < info->nversions && i < REG_VERSIONS_MAX; i++)
		snprintf(r->versions[r->nversions++], sizeof(r->versions[0]), "%s",
			 info->versions[i]);
	pthread_mutex_init(&r->lock, NULL);
	r->methods[0] = (struct k8s_grpc_method){
	    .path = "/pluginregistration.Registration/GetInfo", .unary = get_info, .ctx = r};
	r->methods[1] = (struct k8s_grpc_method){
	    .path = "/pluginregistration.Registration/NotifyRegistrationStatus",
	    .unary = notify_status,
	    .ctx = r};
	e = k8s_grpc_server_start(socket_path, r->methods, 2, &r->srv, err, errlen);
	if (e) {
		pthread_mutex_destroy(&r->lock);
		free(r);
		return e;
	}
	*ret = r;
	return 0;
}

void k8s_reg_stop(struct k8s_reg *r)
{
	if (!r)
		return;
	k8s_grpc_server_stop(r->srv);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

int k8s_reg_status(struct k8s_reg *r, char *msg, size_t len)
{
	int st;

	pthread_mutex_lock(&r->lock);
	st = r->status;
	snprintf(msg, len, "%s", r->error);
	pthread_mutex_unlock(&r->lock);
	return st;
}

int k8s_reg_device_plugin(const char *kubelet_socket, const char *endpoint, const char *resource,
			  bool pre_start_required, bool preferred_allocation, int timeout_ms,
			  char *err, size_t errlen)
{
	V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
	V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
	uint8_t *buf, *resp = NULL;
	size_t len, resp_len = 0;
	int e;

	opts.pre_start_required = pre_start_required;
	opts.get_preferred_allocation_available = preferred_allocation;
	req.version = (char *)"v1beta1";
	req.endpoint = (char *)endpoint;
	req.resource_name = (char *)resource;
	req.options = &opts;
	if (k8s_pb_pack(&req.base, &buf, &len) != 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	e = k8s_grpc_call(kubelet_socket, "/v1beta1.Registration/Register", buf, len, &resp,
			  &resp_len, timeout_ms, err, errlen);
	free(buf);
	free(resp);
	return e;
}

/* ---- the kubelet-restart watch ---- */

struct k8s_reg_watch {
	int fd, wd;
	char dir[PATH_MAX];
	char sock[NAME_MAX + 1];
};

static int add_watch(struct k8s_reg_watch *w)
{
	w->wd = inotify_add_watch(w->fd, w->dir,
				  IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF);
	return w->wd < 0 ? -errno : 0;
}

int k8s_reg_watch_open(const char *dir, const char *kubelet_sock, struct k8s_reg_watch **ret,
		       char *err, size_t errlen)
{
	struct k8s_reg_watch *w = calloc(1, sizeof(*w));
	int e;

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	snprintf(w->dir, sizeof(w->dir), "%s", dir);
	snprintf(w->sock, sizeof(w->sock), "%s", kubelet_sock);
	w->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (w->fd < 0 || (e = add_watch(w)) != 0) {
		e = -errno;
		snprintf(err, errlen, "watching %s: %s", dir, strerror(errno));
		if (w->fd >= 0)
			close(w->fd);
		free(w);
		return e;
	}
	*ret = w;
	return 0;
}

bool k8s_reg_watch_wait(struct k8s_reg_watch *w, int timeout_ms)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd p = {.fd = w->fd, .events = POLLIN};
	bool hit = false;
	ssize_t n;

	/* The directory went away: it is back when the kubelet recreates it. */
	if (w->wd < 0) {
		if (add_watch(w) == 0)
			return true;
		poll(NULL, 0, timeout_ms);
		return add_watch(w) == 0;
	}
	if (poll(&p, 1, timeout_ms) <= 0)
		return false;
	while ((n = read(w->fd, buf, sizeof(buf))) > 0) {
		for (char *q = buf; q < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)q;

			if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && ev->len &&
			    strcmp(ev->name, w->sock) == 0)
				hit = true;
			if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
				inotify_rm_watch(w->fd, w->wd);
				w->wd = -1;
			}
			q += sizeof(*ev) + ev->len;
		}
	}
	if (w->wd < 0 && add_watch(w) == 0)
		hit = true;
	return hit;
}

void k8s_reg_watch_close(struct k8s_reg_watch *w)
{
	if (!w)
		return;
	close(w->fd);
	free(w);
}
