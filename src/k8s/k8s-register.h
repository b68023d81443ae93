/*
 * Registering with the kubelet, for both plugins.
 *
 * The plugin registry (plugin watcher): a plugin serves
 * pluginregistration.Registration on a socket it creates in the kubelet's
 * plugins_registry directory; the kubelet finds the socket, asks GetInfo
 * (type, name, endpoint, versions), talks to the endpoint, then says how it
 * went with NotifyRegistrationStatus. The DRA driver registers this way
 * (type DRAPlugin); the device plugin may too (type DevicePlugin).
 *
 * The classic device-plugin path: Register on the kubelet's own socket
 * (device-plugins/kubelet.sock). The kubelet dials the plugin back before
 * it answers, so the plugin must already be serving. When the kubelet
 * restarts it wipes the device-plugins directory and creates kubelet.sock
 * anew; the plugin must then serve again and register again
 * (k8s_reg_watch tells when).
 */
#ifndef K8S_REGISTER_H
#define K8S_REGISTER_H

#include <stdbool.h>
#include <stddef.h>

struct k8s_reg_info {
	const char *type;     /* "DevicePlugin" or "DRAPlugin" */
	const char *name;     /* the resource name, or the DRA driver's name */
	const char *endpoint; /* absolute path of the socket serving the plugin's API */
	const char *const *versions;
	unsigned nversions;
};

struct k8s_reg;

/*
 * Serves pluginregistration.Registration for info on socket_path (in the
 * kubelet's plugins_registry directory). The strings of info are copied. 0
 * or -errno with a message.
 */
int k8s_reg_start(const char *socket_path, const struct k8s_reg_info *info, struct k8s_reg **ret,
		  char *err, size_t errlen);
/* Stops serving and removes the socket. NULL is a no-op. */
void k8s_reg_stop(struct k8s_reg *r);

/*
 * The kubelet's last NotifyRegistrationStatus: 1 registered, 0 nothing
 * heard yet, -1 refused (with the kubelet's error in msg).
 */
int k8s_reg_status(struct k8s_reg *r, char *msg, size_t len);

/*
 * Classic registration: v1beta1.Registration/Register on kubelet_socket
 * for a device plugin serving resource on endpoint (its socket's file name,
 * relative to the kubelet socket's directory). 0, or -errno with the
 * kubelet's message (a refusal means the plugin should not serve).
 */
int k8s_reg_device_plugin(const char *kubelet_socket, const char *endpoint, const char *resource,
			  bool pre_start_required, bool preferred_allocation, int timeout_ms,
			  char *err, size_t errlen);

struct k8s_reg_watch;

/* Watches dir (inotify) for the kubelet's socket (file name kubelet_sock) to be created. */
int k8s_reg_watch_open(const char *dir, const char *kubelet_sock, struct k8s_reg_watch **ret,
		       char *err, size_t errlen);
/*
 * Waits up to timeout_ms; true when the kubelet socket was created (the
 * kubelet restarted) since the last call, or the directory was removed and
 * is back. Events for other files are consumed and ignored.
 */
bool k8s_reg_watch_wait(struct k8s_reg_watch *w, int timeout_ms);
void k8s_reg_watch_close(struct k8s_reg_watch *w);

#endif
