/*
 * cuslice-device-plugin: the command line, start-up, registration with the
 * kubelet (again whenever the kubelet restarts), the health loop that keeps
 * the node's GPUs as cusliced sees them, and a clean stop.
 *
 * Exit status: 0 stopped (SIGTERM/SIGINT), 1 could not run (the kubelet
 * refused the registration, a socket could not be served), 2 usage or
 * configuration error.
 */
#include "dp-int.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"
#include "cs-size.h"
#include "k8s-common.h"
#include "k8s-util.h"

#define PROG "cuslice-device-plugin"
#define KUBELET_SOCK "kubelet.sock"
#define REGISTER_TIMEOUT_MS 10000
#define REGISTER_RETRY_MS 2000

static const char usage_head[] =
    "usage: " PROG " [OPTION]...\n"
    "Kubernetes device plugin of cuslice: advertises slices of the node's GPUs\n"
    "(as cusliced sees them) and gives each container that gets some its own\n"
    "cusliced group, with exact limits, bound to its pod.\n"
    "\n"
    "Resources (each GPU is several devices; a container's request lies on one GPU):\n"
    "      --resource-prefix P    resource name prefix (default cuslice.io)\n"
    "      --resources LIST       gpu (shares of memory and time), gpu-memory\n"
    "                             (memory units): comma list (default gpu,gpu-memory)\n"
    "      --shares N             devices of P/gpu per GPU, 1-1000 (default 10)\n"
    "      --memory-unit SIZE     bytes per device of P/gpu-memory, 1MiB-64GiB\n"
    "                             (default 1GiB)\n"
    "Kubelet:\n"
    "      --kubelet-dir DIR      device-plugins directory, where kubelet.sock is and\n"
    "                             the plugin's sockets go (default\n"
    "                             /var/lib/kubelet/device-plugins)\n"
    "      --registration HOW     classic (Register on kubelet.sock, again after every\n"
    "                             kubelet restart) or registry (plugin watcher)\n"
    "                             (default classic)\n"
    "      --registry-dir DIR     plugins_registry directory (default\n"
    "                             /var/lib/kubelet/plugins_registry)\n"
    "      --pod-resources SOCK   PodResources socket (default\n"
    "                             /var/lib/kubelet/pod-resources/kubelet.sock)\n"
    "      --state-dir DIR        host directory for the containers' ld.so.preload files\n"
    "                             (default /var/lib/cuslice/k8s)\n"
    "      --gc-interval D        how often groups whose containers ended are deleted,\n"
    "                             100ms-1h; 0 never (default 1m)\n";

enum {
	OPT_PREFIX = 256,
	OPT_RESOURCES,
	OPT_SHARES,
	OPT_MEMORY_UNIT,
	OPT_KUBELET_DIR,
	OPT_REGISTRATION,
	OPT_REGISTRY_DIR,
	OPT_POD_RESOURCES,
	OPT_STATE_DIR,
	OPT_GC_INTERVAL,
};

static const struct option longopts[] = {
    {"resource-prefix", required_argument, NULL, OPT_PREFIX},
    {"resources", required_argument, NULL, OPT_RESOURCES},
    {"shares", required_argument, NULL, OPT_SHARES},
    {"memory-unit", required_argument, NULL, OPT_MEMORY_UNIT},
    {"kubelet-dir", required_argument, NULL, OPT_KUBELET_DIR},
    {"registration", required_argument, NULL, OPT_REGISTRATION},
    {"registry-dir", required_argument, NULL, OPT_REGISTRY_DIR},
    {"pod-resources", required_argument, NULL, OPT_POD_RESOURCES},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"gc-interval", required_argument, NULL, OPT_GC_INTERVAL},
    K8S_COMMON_LONGOPTS_END,
};

static void defaults(struct dp_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->prefix, sizeof(c->prefix), "cuslice.io");
	c->serve[0] = c->serve[1] = true;
	c->shares = 10;
	c->memory_unit = 1ull << 30;
	snprintf(c->plugin_dir, sizeof(c->plugin_dir), "/var/lib/kubelet/device-plugins");
	snprintf(c->registry_dir, sizeof(c->registry_dir), "/var/lib/kubelet/plugins_registry");
	snprintf(c->pod_resources, sizeof(c->pod_resources),
		 "/var/lib/kubelet/pod-resources/kubelet.sock");
	snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/cuslice/k8s");
	c->gc_interval_ms = 60000;
	k8s_common_defaults(&c->common);
}

#define usage_error(...) k8s_usage_error(PROG, __VA_ARGS__)

/* Copies an absolute path option; -1 (usage error printed) when it is not one or too long. */
static int path_opt(const char *opt, const char *v, char *out, size_t len)
{
	if (v[0] != '/' || strlen(v) >= len) {
		usage_error("--%s \"%s\": expected an absolute path shorter than %zu characters",
			    opt, v, len);
		return -1;
	}
	snprintf(out, len, "%s", v);
	return 0;
}

/* A DNS subdomain (lowercase), as resource name prefixes are. */
static bool dns_subdomain(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 40 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n &&
	       s[0] != '.' && s[0] != '-' && s[n - 1] != '.' && s[n - 1] != '-';
}

/* --resources: a comma list of gpu, gpu-memory. */
static int parse_resources(struct dp_config *c, const char *arg)
{
	char buf[128], *save = NULL;

	c->serve[0] = c->serve[1] = false;
	snprintf(buf, sizeof(buf), "%s", arg);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "gpu") == 0)
			c->serve[0] = true;
		else if (strcmp(t, "gpu-memory") == 0)
			c->serve[1] = true;
		else
			return usage_error("--resources \"%s\": \"%s\" is not gpu or gpu-memory",
					   arg, t);
	}
	if (!c->serve[0] && !c->serve[1])
		return usage_error("--resources \"%s\": expected gpu, gpu-memory or both", arg);
	return 0;
}

/* One option of the plugin's own: 0, or 2 after a usage error. */
static int own_option(void *cfg, int ch, const char *o, const char *arg)
{
	struct dp_config *c = cfg;
	char *end;
	unsigned long v;

	switch (ch) {
	case OPT_PREFIX:
		if (!dns_subdomain(arg))
			return usage_error("--resource-prefix \"%s\": expected a DNS subdomain of "
					   "a-z 0-9 . - (e.g. cuslice.io)",
					   arg);
		snprintf(c->prefix, sizeof(c->prefix), "%s", arg);
		return 0;
	case OPT_RESOURCES:
		return parse_resources(c, arg);
	case OPT_SHARES:
		v = strtoul(arg, &end, 10);
		if (*arg < '1' || *arg > '9' || *end || v > 1000)
			return usage_error(
			    "--shares \"%s\": expected a whole number from 1 to 1000", arg);
		c->shares = (unsigned)v;
		return 0;
	case OPT_MEMORY_UNIT:
		if (cs_size_parse(arg, &c->memory_unit) != 0 || c->memory_unit < (1ull << 20) ||
		    c->memory_unit > (64ull << 30))
			return usage_error(
			    "--memory-unit \"%s\": expected a size from 1MiB to 64GiB: "
			    "%s",
			    arg, CS_SIZE_FORMS);
		return 0;
	case OPT_REGISTRATION:
		if (strcmp(arg, "classic") != 0 && strcmp(arg, "registry") != 0)
			return usage_error("--registration \"%s\": expected classic or registry",
					   arg);
		c->use_registry = strcmp(arg, "registry") == 0;
		return 0;
	case OPT_KUBELET_DIR:
		return path_opt(o, arg, c->plugin_dir, sizeof(c->plugin_dir)) ? 2 : 0;
	case OPT_REGISTRY_DIR:
		return path_opt(o, arg, c->registry_dir, sizeof(c->registry_dir)) ? 2 : 0;
	case OPT_POD_RESOURCES:
		return path_opt(o, arg, c->pod_resources, sizeof(c->pod_resources)) ? 2 : 0;
	case OPT_STATE_DIR:
		return path_opt(o, arg, c->state_dir, sizeof(c->state_dir)) ? 2 : 0;
	case OPT_GC_INTERVAL:
		if (strcmp(arg, "0") == 0) {
			c->gc_interval_ms = 0;
			return 0;
		}
		if (k8s_parse_duration(arg, 100, 3600000, &c->gc_interval_ms) != 0)
			return usage_error(
			    "--gc-interval \"%s\": expected a duration from 100ms to 1h "
			    "(e.g. 30s, 5m), or 0 for never",
			    arg);
		return 0;
	}
	return 1;
}

static int parse_args(int argc, char **argv, struct dp_config *c)
{
	int e = k8s_parse_args(argc, argv, longopts, PROG, usage_head, &c->common, own_option, c);

	if (e)
		return e;
	c->policy.burst = c->common.burst;
	c->policy.on_violation = c->common.on_violation;
	return 0;
}

/* ---- the node's GPUs ---- */

static bool gpus_equal(const struct k8s_gpu *a, unsigned na, const struct k8s_gpu *b, unsigned nb)
{
	if (na != nb)
		return false;
	for (unsigned i = 0; i < na; i++)
		if (a[i].index != b[i].index || strcmp(a[i].uuid, b[i].uuid) != 0 ||
		    a[i].memory_total != b[i].memory_total || a[i].healthy != b[i].healthy)
			return false;
	return true;
}

/*
 * Asks cusliced about the GPUs. Unreachable: the GPUs known stay listed,
 * Unhealthy (the kubelet keeps allocations of unhealthy devices but places
 * no new ones); a GPU that vanished stays listed, unhealthy, too.
 */
static void poll_gpus(struct dp_state *st)
{
	struct k8s_gpu now[K8S_GPUS_MAX], merged[K8S_GPUS_MAX];
	unsigned n = 0, m = 0;
	char err[512];
	int e = k8s_cusliced_gpus(st->cs, now, &n, err, sizeof(err));

	pthread_mutex_lock(&st->lock);
	if (e) {
		if (st->daemon_ok)
			cs_log(CS_LOG_WARN, DP_LOG, "%s: devices marked Unhealthy", err);
		if (st->daemon_ok)
			st->generation++;
		st->daemon_ok = false;
		pthread_mutex_unlock(&st->lock);
		return;
	}
	memcpy(merged, now, n * sizeof(*now));
	m = n;
	for (unsigned i = 0; i < st->ngpus && m < K8S_GPUS_MAX; i++) {
		bool still = false;

		for (unsigned j = 0; j < n && !still; j++)
			still = strcmp(now[j].uuid, st->gpus[i].uuid) == 0;
		if (!still) {
			merged[m] = st->gpus[i];
			merged[m++].healthy = false;
		}
	}
	if (!st->daemon_ok || !gpus_equal(merged, m, st->gpus, st->ngpus)) {
		if (!st->daemon_ok)
			cs_log(CS_LOG_INFO, DP_LOG, "cusliced at %s answers: %u GPU(s)",
			       st->cfg->common.cusliced, n);
		memcpy(st->gpus, merged, m * sizeof(*merged));
		st->ngpus = m;
		st->daemon_ok = true;
		st->generation++;
	}
	pthread_mutex_unlock(&st->lock);
}

/* ---- endpoints and registration ---- */

static void endpoint_init(struct dp_endpoint *ep, struct dp_state *st, int which)
{
	const struct dp_config *c = st->cfg;

	memset(ep, 0, sizeof(*ep));
	ep->st = st;
	ep->res.kind = which == 0 ? DP_SHARES : DP_MEMORY;
	snprintf(ep->res.name, sizeof(ep->res.name), "%s/%s", c->prefix,
		 which == 0 ? "gpu" : "gpu-memory");
	snprintf(ep->res.short_name, sizeof(ep->res.short_name), "%s", which == 0 ? "gpu" : "mem");
	ep->res.shares = c->shares;
	ep->res.unit = c->memory_unit;
	/* Too long for a socket address: k8s_grpc_server_start says so when it is used. */
	if (snprintf(ep->socket, sizeof(ep->socket), "%s/cuslice-%s.sock", c->plugin_dir,
		     ep->res.short_name) >= (int)sizeof(ep->socket))
		ep->socket[0] = '\0';
	dp_plugin_methods(ep);
}

/* Serves ep and registers it with the kubelet. 0, -EAGAIN (kubelet not there: retry), or -errno. */
static int endpoint_up(struct dp_endpoint *ep)
{
	const struct dp_config *c = ep->st->cfg;
	char err[512], kubelet[300], reg[300];
	const char *versions[] = {"v1beta1"};
	int e;

	if (!ep->srv) {
		e = k8s_grpc_server_start(ep->socket, ep->methods, 5, &ep->srv, err, sizeof(err));
		if (e) {
			cs_log(CS_LOG_ERROR, DP_LOG, "%s", err);
			return e;
		}
	}
	if (c->use_registry) {
		struct k8s_reg_info info = {.type = "DevicePlugin",
					    .name = ep->res.name,
					    .endpoint = ep->socket,
					    .versions = versions,
					    .nversions = 1};

		if (ep->reg)
			return 0;
		if (snprintf(reg, sizeof(reg), "%s/%s-%s.sock", c->registry_dir, c->prefix,
			     ep->res.short_name) >= (int)sizeof(reg))
			reg[0] = '\0';
		e = k8s_reg_start(reg, &info, &ep->reg, err, sizeof(err));
		if (e)
			cs_log(CS_LOG_ERROR, DP_LOG, "%s", err);
		else
			cs_log(CS_LOG_INFO, DP_LOG, "%s: serving %s, registration on %s",
			       ep->res.name, ep->socket, reg);
		return e;
	}
	snprintf(kubelet, sizeof(kubelet), "%s/" KUBELET_SOCK, c->plugin_dir);
	e = k8s_reg_device_plugin(kubelet, strrchr(ep->socket, '/') + 1, ep->res.name, true, true,
				  REGISTER_TIMEOUT_MS, err, sizeof(err));
	if (e == -EPROTO) {
		/* The kubelet answered and refused: the protocol says to stop. */
		cs_log(CS_LOG_ERROR, DP_LOG, "the kubelet refused %s: %s", ep->res.name, err);
		return e;
	}
	if (e) {
		cs_log(CS_LOG_WARN, DP_LOG, "registering %s: %s; retrying", ep->res.name, err);
		return -EAGAIN;
	}
	cs_log(CS_LOG_INFO, DP_LOG, "%s: registered with the kubelet, serving %s", ep->res.name,
	       ep->socket);
	return 0;
}

static void endpoint_down(struct dp_endpoint *ep)
{
	k8s_reg_stop(ep->reg);
	ep->reg = NULL;
	k8s_grpc_server_stop(ep->srv);
	ep->srv = NULL;
}

static int run(struct dp_state *st)
{
	const struct dp_config *c = st->cfg;
	struct dp_endpoint ep[DP_RESOURCES_MAX];
	struct k8s_reg_watch *watch = NULL;
	bool up[DP_RESOURCES_MAX] = {false, false};
	uint64_t next_poll = 0, next_try = 0, next_gc = k8s_now_ms() + c->gc_interval_ms;
	char err[512];
	int rc = 0, e;

	for (int i = 0; i < DP_RESOURCES_MAX; i++)
		endpoint_init(&ep[i], st, i);
	if (!c->use_registry &&
	    k8s_reg_watch_open(c->plugin_dir, KUBELET_SOCK, &watch, err, sizeof(err)) != 0) {
		cs_log(CS_LOG_ERROR, DP_LOG, "%s", err);
		return 1;
	}
	for (bool restart = false;;) {
		uint64_t t = k8s_now_ms();

		if (t >= next_poll) {
			poll_gpus(st);
			next_poll = t + c->common.health_interval_ms;
		}
		/*
		 * A group Allocate made within two intervals is left alone: the
		 * kubelet lists an allocation only once Allocate returned (and a
		 * pod whose admission then fails never holds it).
		 */
		if (c->gc_interval_ms && t >= next_gc) {
			dp_collect(st, ep, DP_RESOURCES_MAX, 2ull * c->gc_interval_ms);
			next_gc = k8s_now_ms() + c->gc_interval_ms;
		}
		if (restart) {
			cs_log(CS_LOG_INFO, DP_LOG, "the kubelet restarted: registering again");
			for (int i = 0; i < DP_RESOURCES_MAX; i++) {
				endpoint_down(&ep[i]);
				up[i] = false;
			}
			next_try = 0;
		}
		if (t >= next_try) {
			next_try = 0;
			for (int i = 0; i < DP_RESOURCES_MAX; i++) {
				if (!c->serve[i] || up[i])
					continue;
				e = endpoint_up(&ep[i]);
				if (e == -EAGAIN) {
					next_try = t + REGISTER_RETRY_MS;
				} else if (e) {
					rc = 1;
					goto out;
				} else {
					up[i] = true;
				}
			}
		}
		if (k8s_stop_requested(50))
			break;
		/*
		 * The kubelet restarted (kubelet.sock created anew), or a socket of
		 * ours went (the directory was wiped): serve again, register again.
		 */
		restart = watch ? k8s_reg_watch_wait(watch, 150) : k8s_stop_requested(150);
		if (!watch && restart)
			break;
		for (int i = 0; i < DP_RESOURCES_MAX; i++)
			if (up[i] && ep[i].srv && !k8s_grpc_server_socket_ok(ep[i].srv))
				restart = true;
	}
	cs_log(CS_LOG_INFO, DP_LOG, "stopping");
out:
	for (int i = 0; i < DP_RESOURCES_MAX; i++)
		endpoint_down(&ep[i]);
	k8s_reg_watch_close(watch);
	return rc;
}

int main(int argc, char **argv)
{
	struct dp_config cfg;
	struct dp_state st;
	char err[512];
	int rc, e;

	defaults(&cfg);
	rc = parse_args(argc, argv, &cfg);
	if (rc)
		return rc;
	cs_log_threshold = cfg.common.log_level;
	memset(&st, 0, sizeof(st));
	st.cfg = &cfg;
	pthread_mutex_init(&st.lock, NULL);
	e = k8s_api_open(&cfg.common.api, &st.api, err, sizeof(err));
	if (e) {
		/* Without the API server no group can be bound to its pod: nothing could run. */
		fprintf(stderr, PROG ": API server: %s\n", err);
		return 2;
	}
	if (cfg.common.preload && (e = k8s_mkdir_p(cfg.state_dir, 0755)) != 0) {
		fprintf(stderr, PROG ": --state-dir %s: %s\n", cfg.state_dir, strerror(-e));
		return 1;
	}
	st.cs = k8s_cusliced_open(cfg.common.cusliced,
				  cfg.common.cusliced_token[0] ? cfg.common.cusliced_token : NULL);
	explicit_bzero(cfg.common.cusliced_token, sizeof(cfg.common.cusliced_token));
	if (!st.cs) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	k8s_signals_block();
	cs_log(CS_LOG_INFO, DP_LOG,
	       "starting: %s/gpu %s, %s/gpu-memory %s, cusliced at %s, node %s", cfg.prefix,
	       cfg.serve[0] ? "on" : "off", cfg.prefix, cfg.serve[1] ? "on" : "off",
	       cfg.common.cusliced, cfg.common.node_name[0] ? cfg.common.node_name : "(any)");
	rc = run(&st);
	k8s_cusliced_close(st.cs);
	k8s_api_close(st.api);
	free(st.recent);
	pthread_mutex_destroy(&st.lock);
	return rc;
}
