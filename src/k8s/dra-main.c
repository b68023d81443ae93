/*
 * cuslice-dra-driver: the command line, start-up (checkpoint, cusliced, the
 * node), registration through the kubelet's plugin registry, and the main
 * loop: the node's ResourceSlice kept equal to the GPUs cusliced reports,
 * shared claims refreshed, sockets served again if removed.
 *
 * Exit status: 0 stopped (SIGTERM/SIGINT), 1 could not run (an unreadable
 * checkpoint, a socket that cannot be served), 2 usage or configuration
 * error.
 */
#include "dra-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"
#include "cs-size.h"
#include "k8s-util.h"

#define PROG "cuslice-dra-driver"

static const char usage_head[] =
    "usage: " PROG " [OPTION]...\n"
    "Kubernetes DRA driver of cuslice (resource.k8s.io/v1): publishes the node's GPUs\n"
    "as devices that several claims share, each consuming memory and a share of\n"
    "the GPU's time, and makes what a claim consumed an exact cusliced group for\n"
    "the pods it is reserved for, handed to their containers by a CDI spec.\n"
    "\n"
    "Driver:\n"
    "      --driver-name NAME     DRA driver name (default gpu.cuslice.io)\n"
    "      --plugin-dir DIR       its socket, checkpoint and ld.so.preload (default\n"
    "                             /var/lib/kubelet/plugins/gpu.cuslice.io)\n"
    "      --registry-dir DIR     the kubelet's plugins_registry directory (default\n"
    "                             /var/lib/kubelet/plugins_registry)\n"
    "      --cdi-dir DIR          where CDI specs go (default /var/run/cdi)\n"
    "      --memory-step SIZE     memory is requested in multiples of it, at least one\n"
    "                             (default 256MiB)\n"
    "      --cores-default PCT    the share of a GPU's time a claim that asks none\n"
    "                             consumes, 0-100; 0 = no cap (default 0)\n"
    "      --claim-refresh D      how often shared claims are read again for new pods,\n"
    "                             100ms-1m (default 2s)\n"
    "      --slice-check D        how often the published ResourceSlice is checked (it is\n"
    "                             also written at once when the GPUs change), 1s-1h\n"
    "                             (default 1m)\n";

enum {
	OPT_DRIVER = 256,
	OPT_PLUGIN_DIR,
	OPT_REGISTRY_DIR,
	OPT_CDI_DIR,
	OPT_MEMORY_STEP,
	OPT_CORES_DEFAULT,
	OPT_CLAIM_REFRESH,
	OPT_SLICE_CHECK,
};

static const struct option longopts[] = {
    {"driver-name", required_argument, NULL, OPT_DRIVER},
    {"plugin-dir", required_argument, NULL, OPT_PLUGIN_DIR},
    {"registry-dir", required_argument, NULL, OPT_REGISTRY_DIR},
    {"cdi-dir", required_argument, NULL, OPT_CDI_DIR},
    {"memory-step", required_argument, NULL, OPT_MEMORY_STEP},
    {"cores-default", required_argument, NULL, OPT_CORES_DEFAULT},
    {"claim-refresh", required_argument, NULL, OPT_CLAIM_REFRESH},
    {"slice-check", required_argument, NULL, OPT_SLICE_CHECK},
    K8S_COMMON_LONGOPTS_END,
};

#define usage_error(...) k8s_usage_error(PROG, __VA_ARGS__)

static void defaults(struct dra_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->driver, sizeof(c->driver), "gpu.cuslice.io");
	snprintf(c->registry_dir, sizeof(c->registry_dir), "/var/lib/kubelet/plugins_registry");
	snprintf(c->cdi_dir, sizeof(c->cdi_dir), "/var/run/cdi");
	c->memory_step = 256ull << 20;
	c->claim_refresh_ms = 2000;
	c->slice_check_ms = 60000;
	k8s_common_defaults(&c->common);
}

static int path_opt(const char *opt, const char *v, char *out, size_t len)
{
	if (v[0] != '/' || strlen(v) >= len)
		return usage_error("--%s \"%s\": expected an absolute path shorter than %zu "
				   "characters",
				   opt, v, len);
	snprintf(out, len, "%s", v);
	return 0;
}

/* A DRA driver name: a lowercase DNS subdomain of up to 63 characters. */
static bool driver_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") != n)
		return false;
	for (const char *l = s; l; l = strchr(l, '.') ? strchr(l, '.') + 1 : NULL) {
		size_t k = strcspn(l, ".");

		if (k == 0 || l[0] == '-' || l[k - 1] == '-')
			return false;
	}
	return true;
}

static int own_option(void *cfg, int ch, const char *o, const char *arg)
{
	struct dra_config *c = cfg;
	char *end;
	unsigned long v;

	switch (ch) {
	case OPT_DRIVER:
		if (!driver_name(arg))
			return usage_error(
			    "--driver-name \"%s\": expected a lowercase DNS subdomain "
			    "of up to 63 characters (e.g. gpu.cuslice.io)",
			    arg);
		snprintf(c->driver, sizeof(c->driver), "%s", arg);
		return 0;
	case OPT_PLUGIN_DIR:
		return path_opt(o, arg, c->plugin_dir, sizeof(c->plugin_dir));
	case OPT_REGISTRY_DIR:
		return path_opt(o, arg, c->registry_dir, sizeof(c->registry_dir));
	case OPT_CDI_DIR:
		return path_opt(o, arg, c->cdi_dir, sizeof(c->cdi_dir));
	case OPT_MEMORY_STEP:
		if (cs_size_parse(arg, &c->memory_step) != 0 || c->memory_step < (1ull << 20) ||
		    c->memory_step > (64ull << 30))
			return usage_error(
			    "--memory-step \"%s\": expected a size from 1MiB to 64GiB: "
			    "%s",
			    arg, CS_SIZE_FORMS);
		return 0;
	case OPT_CORES_DEFAULT:
		v = strtoul(arg, &end, 10);
		if (*arg < '0' || *arg > '9' || *end || v > 100)
			return usage_error(
			    "--cores-default \"%s\": expected a whole percentage from "
			    "0 to 100",
			    arg);
		c->cores_default = (unsigned)v;
		return 0;
	case OPT_CLAIM_REFRESH:
		if (k8s_parse_duration(arg, 100, 60000, &c->claim_refresh_ms) != 0)
			return usage_error("--claim-refresh \"%s\": expected a duration from 100ms "
					   "to 1m (e.g. 500ms, 2s)",
					   arg);
		return 0;
	case OPT_SLICE_CHECK:
		if (k8s_parse_duration(arg, 1000, 3600000, &c->slice_check_ms) != 0)
			return usage_error(
			    "--slice-check \"%s\": expected a duration from 1s to 1h "
			    "(e.g. 30s, 5m)",
			    arg);
		return 0;
	}
	return 1;
}

static int parse_args(int argc, char **argv, struct dra_config *c)
{
	int e = k8s_parse_args(argc, argv, longopts, PROG, usage_head, &c->common, own_option, c);

	if (e)
		return e;
	if (!c->common.node_name[0])
		return usage_error(
		    "no node name: set --node-name or $NODE_NAME (the downward API's "
		    "spec.nodeName)");
	if (!c->plugin_dir[0] &&
	    snprintf(c->plugin_dir, sizeof(c->plugin_dir), "/var/lib/kubelet/plugins/%s",
		     c->driver) >= (int)sizeof(c->plugin_dir))
		return usage_error("--driver-name: too long");
	return 0;
}

/* ---- the loop ---- */

/* Polls cusliced; true when the GPUs changed. Unreachable: the GPUs known stay as they are. */
static bool poll_gpus(struct dra_state *st)
{
	struct k8s_gpu g[K8S_GPUS_MAX];
	unsigned n;
	char err[512];
	bool changed = false;

	if (k8s_cusliced_gpus(st->cs, g, &n, err, sizeof(err)) != 0) {
		pthread_mutex_lock(&st->lock);
		if (st->daemon_ok)
			cs_log(CS_LOG_WARN, DRA_LOG, "%s", err);
		st->daemon_ok = false;
		pthread_mutex_unlock(&st->lock);
		return false;
	}
	pthread_mutex_lock(&st->lock);
	if (!st->daemon_ok || n != st->ngpus || memcmp(g, st->gpus, n * sizeof(g[0])) != 0) {
		changed = true;
		memcpy(st->gpus, g, n * sizeof(g[0]));
		st->ngpus = n;
	}
	st->daemon_ok = true;
	pthread_mutex_unlock(&st->lock);
	return changed;
}

/* The Node's UID, for the slice's owner reference; "" when it cannot be read. */
static void read_node_uid(struct dra_state *st)
{
	char path[300], err[512];
	cJSON *node = NULL;
	long code;

	snprintf(path, sizeof(path), "/api/v1/nodes/%s", st->cfg->common.node_name);
	code = k8s_api_request(st->api, "GET", path, NULL, &node, err, sizeof(err));
	if (code == 200 && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(
			       cJSON_GetObjectItemCaseSensitive(node, "metadata"), "uid")))
		snprintf(st->node_uid, sizeof(st->node_uid), "%s",
			 cJSON_GetObjectItemCaseSensitive(
			     cJSON_GetObjectItemCaseSensitive(node, "metadata"), "uid")
			     ->valuestring);
	else
		cs_log(CS_LOG_WARN, DRA_LOG,
		       "node %s: cannot read its UID (%s): the slice has no owner reference",
		       st->cfg->common.node_name, code > 0 ? "HTTP error" : err);
	cJSON_Delete(node);
}

struct servers {
	struct k8s_grpc_server *dra;
	struct k8s_reg *reg;
	char dra_sock[300], reg_sock[300];
};

static int serve(struct dra_state *st, struct servers *sv)
{
	const struct dra_config *cfg = st->cfg;
	const char *versions[] = {"v1.DRAPlugin"};
	struct k8s_reg_info info = {.type = "DRAPlugin",
				    .name = cfg->driver,
				    .endpoint = sv->dra_sock,
				    .versions = versions,
				    .nversions = 1};
	char err[512];
	int e;

	e = k8s_grpc_server_start(sv->dra_sock, st->methods, 2, &sv->dra, err, sizeof(err));
	if (!e)
		e = k8s_reg_start(sv->reg_sock, &info, &sv->reg, err, sizeof(err));
	if (e) {
		cs_log(CS_LOG_ERROR, DRA_LOG, "%s", err);
		return e;
	}
	cs_log(CS_LOG_INFO, DRA_LOG, "%s: serving %s, registration on %s", cfg->driver,
	       sv->dra_sock, sv->reg_sock);
	return 0;
}

static void unserve(struct servers *sv)
{
	k8s_reg_stop(sv->reg);
	sv->reg = NULL;
	k8s_grpc_server_stop(sv->dra);
	sv->dra = NULL;
}

static int run(struct dra_state *st)
{
	const struct dra_config *cfg = st->cfg;
	struct servers sv = {0};
	uint64_t next_poll = 0, next_refresh = 0, next_check = 0;
	bool publish = true;
	char err[512], last[512] = "", msg[512];
	int rc = 0, status = 0;

	snprintf(sv.dra_sock, sizeof(sv.dra_sock), "%s/dra.sock", cfg->plugin_dir);
	if (snprintf(sv.reg_sock, sizeof(sv.reg_sock), "%s/%s-reg.sock", cfg->registry_dir,
		     cfg->driver) >= (int)sizeof(sv.reg_sock))
		sv.reg_sock[0] = '\0';
	if (serve(st, &sv) != 0)
		return 1;
	while (!k8s_stop_requested(100)) {
		uint64_t t = k8s_now_ms();
		struct k8s_gpu g[K8S_GPUS_MAX];
		unsigned n;
		int s;

		if (t >= next_poll) {
			publish |= poll_gpus(st);
			next_poll = t + cfg->common.health_interval_ms;
		}
		if (t >= next_check) {
			publish = true; /* someone may have deleted or changed it */
			next_check = t + cfg->slice_check_ms;
		}
		pthread_mutex_lock(&st->lock);
		memcpy(g, st->gpus, st->ngpus * sizeof(g[0]));
		n = st->ngpus;
		pthread_mutex_unlock(&st->lock);
		if (publish && n) {
			if (dra_slice_publish(st->api, cfg, st->node_uid, g, n, err, sizeof(err)) ==
			    0) {
				publish = false;
				last[0] = '\0';
			} else if (strcmp(err, last) != 0) {
				cs_log(CS_LOG_WARN, DRA_LOG, "%s; retrying", err);
				snprintf(last, sizeof(last), "%s", err);
			}
		}
		if (t >= next_refresh) {
			dra_refresh_shared(st);
			next_refresh = k8s_now_ms() + cfg->claim_refresh_ms;
		}
		/* The kubelet tells how registration went; a refusal is worth a line. */
		s = k8s_reg_status(sv.reg, msg, sizeof(msg));
		if (s != status) {
			if (s > 0)
				cs_log(CS_LOG_INFO, DRA_LOG, "registered with the kubelet");
			else if (s < 0)
				cs_log(CS_LOG_ERROR, DRA_LOG, "the kubelet refused the driver: %s",
				       msg);
			status = s;
		}
		if (!k8s_grpc_server_socket_ok(sv.dra)) {
			cs_log(CS_LOG_WARN, DRA_LOG, "%s was removed: serving again", sv.dra_sock);
			unserve(&sv);
			status = 0;
			if (serve(st, &sv) != 0) {
				rc = 1;
				break;
			}
		}
	}
	cs_log(CS_LOG_INFO, DRA_LOG, "stopping");
	unserve(&sv);
	return rc;
}

/* The ld.so.preload file the CDI specs mount: naming libcuslice as containers see it. */
static int write_preload(const struct dra_config *cfg)
{
	char path[300], line[300];
	int n;

	snprintf(path, sizeof(path), "%s/ld.so.preload", cfg->plugin_dir);
	n = snprintf(line, sizeof(line), "%s\n", cfg->common.lib_container);
	return k8s_write_file_atomic(path, line, (size_t)n, 0644);
}

int main(int argc, char **argv)
{
	struct dra_config cfg;
	struct dra_state st;
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
		fprintf(stderr, PROG ": API server: %s\n", err);
		return 2;
	}
	if ((e = k8s_mkdir_p(cfg.plugin_dir, 0750)) != 0 ||
	    (e = k8s_mkdir_p(cfg.cdi_dir, 0755)) != 0) {
		fprintf(stderr, PROG ": %s or %s: %s\n", cfg.plugin_dir, cfg.cdi_dir, strerror(-e));
		return 1;
	}
	if (cfg.common.preload && (e = write_preload(&cfg)) != 0) {
		fprintf(stderr, PROG ": %s/ld.so.preload: %s\n", cfg.plugin_dir, strerror(-e));
		return 1;
	}
	/* Refuse to run rather than forget what was prepared. */
	if (dra_checkpoint_load(cfg.plugin_dir, &st.cp, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": checkpoint %s\n", err);
		return 1;
	}
	st.cs = k8s_cusliced_open(cfg.common.cusliced,
				  cfg.common.cusliced_token[0] ? cfg.common.cusliced_token : NULL);
	explicit_bzero(cfg.common.cusliced_token, sizeof(cfg.common.cusliced_token));
	if (!st.cs) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	dra_plugin_methods(&st);
	k8s_signals_block();
	cs_log(CS_LOG_INFO, DRA_LOG, "starting: driver %s on node %s, %u claim(s) prepared before",
	       cfg.driver, cfg.common.node_name, st.cp.n);
	poll_gpus(&st);
	read_node_uid(&st);
	rc = run(&st);
	dra_checkpoint_free(&st.cp);
	k8s_cusliced_close(st.cs);
	k8s_api_close(st.api);
	pthread_mutex_destroy(&st.lock);
	return rc;
}
