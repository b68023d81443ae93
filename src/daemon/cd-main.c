/*
 * cusliced: the command line, start-up and shutdown.
 *
 * Start: configuration (defaults, --config FILE, then command-line options),
 * the sockets (registration and admin), NVML, stored policies, the regions a previous daemon left
 * with running processes (cd-recover.c), the managed groups' regions, the
 * HTTP side, then "READY=1" to systemd when $NOTIFY_SOCKET is set, and the
 * event loop. SIGTERM / SIGINT stop it cleanly: the socket file stays (the
 * node stays managed: processes that start meanwhile wait for the daemon,
 * then fail closed), and so do the regions its members hold (running
 * processes keep their quotas without the daemon). Exit status: 0 clean
 * stop, 1 could not start or run, 2 usage or configuration error.
 */
#include "cd-int.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cs-log.h"

#define PROG "cusliced"
#define CONFIG_FILE_MAX (1024 * 1024)

static const char usage_text[] =
    "usage: " PROG " [OPTION]...\n"
    "The cuslice node daemon: owns the GPU groups' policies and shared regions,\n"
    "registers the processes that run under libcuslice, reclaims what dead ones\n"
    "leave, watches NVML for processes that bypass it, and serves an HTTP API on\n"
    "its socket and Prometheus metrics on TCP. Runs in the foreground; SIGTERM or\n"
    "SIGINT stop it.\n"
    "\n"
    "  -c, --config FILE        INI file with a [daemon] section whose keys are the\n"
    "                           long options below with '_' for '-'; options given\n"
    "                           on the command line override it\n"
    "      --socket PATH        the registration socket, the only one tenants get:\n"
    "                           processes register there and may read their own\n"
    "                           view (GET /healthz, /readyz, /v1/self); mode 0660\n"
    "                           (default " CS_DEFAULT_SOCKET ")\n"
    "      --socket-group GROUP group owning it: name or gid (default: the daemon's\n"
    "                           group)\n"
    "      --admin-socket PATH  the admin socket: the whole API (policies, listings,\n"
    "                           events), in a directory of its own made root-only\n"
    "                           (default " CS_DEFAULT_ADMIN_SOCKET ")\n"
    "      --admin-group GROUP  group that may reach the admin socket (its directory\n"
    "                           0750, the socket 0660; default: none, 0700/0600)\n"
    "      --state-dir DIR      where policies are stored, as policy.json\n"
    "                           (default " CS_DEFAULT_STATE_DIR ")\n"
    "      --shm-dir DIR        ignored (regions are sealed memory files the daemon\n"
    "                           hands to its members; kept for old configurations)\n"
    "      --metrics-listen ADDR  Prometheus metrics (/metrics), the probes\n"
    "                           (/healthz, /readyz) and the status page on\n"
    "                           HOST:PORT ([::1]:PORT for IPv6), or none\n"
    "                           (default " CS_DEFAULT_METRICS_LISTEN ")\n"
    "      --status-page yes|no the read-only status page at / on the metrics\n"
    "                           address (default yes)\n"
    "      --log-level LEVEL    error, warn, info (default) or debug\n"
    "      --token-file FILE    file holding a token that processes (CUSLICE_TOKEN)\n"
    "                           and API clients (Authorization: Bearer) must present\n"
    "                           (default: none)\n"
    "      --allow-uids LIST    users besides root and the daemon's own that may use\n"
    "                           it: comma list of names or uids (default: none)\n"
    "      --allow-gids LIST    groups whose members may use it: comma list of\n"
    "                           names or gids (default: none)\n"
    "      --admin-uids LIST    users besides root and the daemon's own that may\n"
    "                           administer it on the admin socket (default: none)\n"
    "      --admin-gids LIST    groups whose members may administer it (default:\n"
    "                           none)\n"
    "      --backstop-interval DURATION\n"
    "                           how often NVML is checked for processes bypassing\n"
    "                           libcuslice and groups over quota: 100ms to 1h\n"
    "                           (default 1s; units ms, s, m, h; none: seconds)\n"
    "      --session-ttl DURATION\n"
    "                           how long an unmanaged group stays listed after its\n"
    "                           last process: 0s to 24h (default 30s)\n"
    "      --on-bypass ACTION   what to do with a process using a GPU without\n"
    "                           libcuslice: report (default), stop (SIGSTOP), kill\n"
    "      --ipc-sessions-per-uid N\n"
    "                           IPC sessions (processes under libcuslice) one tenant\n"
    "                           (a uid; in a pod or container, its pod or cgroup)\n"
    "                           may hold at once: 1 to 1000000 (default 1024; root\n"
    "                           on the host 4 times as many)\n"
    "      --api-connections-per-uid N\n"
    "                           API connections one tenant may hold at once: 1 to\n"
    "                           512 (default 32; root on the host and administrators\n"
    "                           4 times as many)\n"
    "      --sched on|off       the GPU scheduler: serialize groups whose working\n"
    "                           sets do not fit together (default on)\n"
    "      --sched-headroom P   serialize above (100-P)% of a GPU, parallel again\n"
    "                           below (100-2P)% (default 5)\n"
    "      --sched-calm D       ... held that long first (default 2s)\n"
    "      --sched-quantum-factor F  quantum = F x switch time (default 20)\n"
    "      --sched-quantum-min D, --sched-quantum-max D  its bounds (500ms, 5m)\n"
    "      --sched-bandwidth B  migration bytes/s until measured (default 12GB)\n"
    "      --sched-idle D       a holder idle that long lets go (default 300ms)\n"
    "      --sched-grace D      a holder not drained by quantum + D is revoked\n"
    "                           (default 2s)\n"
    "      --sched-drain-quiet D  no device time that long = drained (default 50ms)\n"
    "      --sched-fair-lead D  a holder that far ahead of the least served waiting\n"
    "                           group ends its turn; 0 quantum only (default 1s)\n"
    "      --sched-prefetch M   prefetch a group's set at its grant: auto (where it\n"
    "                           measured faster than faults), on, off (default auto)\n"
    "      --sched-tick D       how often it measures and decides (default 10ms)\n"
    "  -h, --help               this text\n"
    "  -V, --version            the version\n"
    "\n"
    "Exit status: 0 stopped cleanly, 1 could not start or run, 2 bad usage or\n"
    "configuration. See docs/cusliced.md.\n";

/* Reads a config file (a regular file of at most 1 MiB) into a malloc'd string. */
static char *read_config(const char *path, char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	size_t have = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0) {
		snprintf(err, errlen, "cannot open: %s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CONFIG_FILE_MAX) {
		snprintf(err, errlen, "expected a regular file of at most %d bytes",
			 CONFIG_FILE_MAX);
		close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	while (buf && have < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + have, (size_t)st.st_size - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	buf[have] = '\0';
	if (strlen(buf) != have) {
		snprintf(err, errlen, "holds a NUL byte: not a text file");
		free(buf);
		return NULL;
	}
	return buf;
}

/* Command-line options: the config keys, spelled with '-'. */
static const struct option longopts[] = {
    {"config", required_argument, NULL, 'c'},
    {"socket", required_argument, NULL, 0},
    {"socket-group", required_argument, NULL, 0},
    {"admin-socket", required_argument, NULL, 0},
    {"admin-group", required_argument, NULL, 0},
    {"state-dir", required_argument, NULL, 0},
    {"shm-dir", required_argument, NULL, 0},
    {"metrics-listen", required_argument, NULL, 0},
    {"log-level", required_argument, NULL, 0},
    {"token-file", required_argument, NULL, 0},
    {"allow-uids", required_argument, NULL, 0},
    {"allow-gids", required_argument, NULL, 0},
    {"admin-uids", required_argument, NULL, 0},
    {"admin-gids", required_argument, NULL, 0},
    {"backstop-interval", required_argument, NULL, 0},
    {"session-ttl", required_argument, NULL, 0},
    {"on-bypass", required_argument, NULL, 0},
    {"ipc-sessions-per-uid", required_argument, NULL, 0},
    {"api-connections-per-uid", required_argument, NULL, 0},
    {"sched", required_argument, NULL, 0},
    {"sched-tick", required_argument, NULL, 0},
    {"sched-headroom", required_argument, NULL, 0},
    {"sched-calm", required_argument, NULL, 0},
    {"sched-quantum-factor", required_argument, NULL, 0},
    {"sched-quantum-min", required_argument, NULL, 0},
    {"sched-quantum-max", required_argument, NULL, 0},
    {"sched-bandwidth", required_argument, NULL, 0},
    {"sched-idle", required_argument, NULL, 0},
    {"sched-grace", required_argument, NULL, 0},
    {"sched-drain-quiet", required_argument, NULL, 0},
    {"sched-fair-lead", required_argument, NULL, 0},
    {"sched-prefetch", required_argument, NULL, 0},
    {"status-page", required_argument, NULL, 0},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* Fills *c from the file and the command line; exits 0 (help) or 2 (error) itself. */
static void configure(int argc, char **argv, struct cd_config *c)
{
	struct override {
		const char *opt, *value;
	} *ov = calloc((size_t)argc, sizeof(*ov));
	const char *config = NULL;
	unsigned nov = 0;
	char err[1024];
	int ch, idx;

	if (!ov) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	cd_config_defaults(c);
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":c:hV", longopts, &idx)) != -1) {
		switch (ch) {
		case 'c':
			config = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case 'V':
			printf(PROG " " CS_VERSION "\n");
			exit(0);
		case 0:
			ov[nov].opt = longopts[idx].name;
			ov[nov].value = optarg;
			nov++;
			break;
		case ':':
			fprintf(stderr, PROG ": %s needs a value; see " PROG " --help\n",
				argv[optind - 1]);
			exit(2);
		default:
			fprintf(stderr, PROG ": unknown option %s; see " PROG " --help\n",
				argv[optind - 1]);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument \"%s\"; see " PROG " --help\n",
			argv[optind]);
		exit(2);
	}
	if (config) {
		char *text = read_config(config, err, sizeof(err));

		if (!text || cd_config_parse_ini(c, text, err, sizeof(err)) != 0) {
			cs_log(CS_LOG_ERROR, CD_LOG, "config %s: %s", config, err);
			exit(2);
		}
		free(text);
	}
	for (unsigned i = 0; i < nov; i++) {
		char key[32];

		snprintf(key, sizeof(key), "%s", ov[i].opt);
		for (char *p = key; *p; p++)
			if (*p == '-')
				*p = '_';
		if (cd_config_set(c, key, ov[i].value, err, sizeof(err)) != 0) {
			cs_log(CS_LOG_ERROR, CD_LOG, "--%s %s", ov[i].opt, err);
			exit(2);
		}
	}
	free(ov);
	if (cd_config_check(c, err, sizeof(err)) != 0) {
		cs_log(CS_LOG_ERROR, CD_LOG, "%s", err);
		exit(2);
	}
	if (cd_config_load_token(c, err, sizeof(err)) != 0) {
		cs_log(CS_LOG_ERROR, CD_LOG, "%s", err);
		exit(2);
	}
}

/* "READY=1" (and the like) to systemd's $NOTIFY_SOCKET, by hand: no libsystemd. */
static void notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	socklen_t len;
	int fd;

	if (!path || !*path || strlen(path) >= sizeof(a.sun_path))
		return;
	strcpy(a.sun_path, path);
	if (path[0] == '@')
		a.sun_path[0] = '\0'; /* an abstract socket */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&a, len) < 0)
		cs_log(CS_LOG_WARN, CD_LOG, "cannot notify systemd at %s: %s", path,
		       strerror(errno));
	close(fd);
}

/*
 * Every connection and pidfd is a descriptor: take what the hard limit
 * allows. Returns the soft limit now in force (the connection bounds derive
 * from it).
 */
static unsigned raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 256;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max > 1048576 ? 1048576 : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur > 1048576 ? 1048576u : (unsigned)rl.rlim_cur;
}

/* mkdir -p: parents 0755, the directory itself `mode`. */
static int mkdir_p(const char *dir, mode_t mode)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "%s", dir);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || !*p) {
			char saved = *p;

			*p = '\0';
			if (mkdir(buf, saved ? 0755 : mode) != 0 && errno != EEXIST)
				return -errno;
			*p = saved;
			if (!saved)
				break;
		}
	}
	return 0;
}

/*
 * state_dir holds policy.json (member uids, cgroups) and the event history
 * (who was refused, what was killed): root's only, 0700; one that others
 * can read or enter (made by hand, or by an older unit's StateDirectoryMode)
 * is tightened, with a warning.
 */
static int prepare_dirs(const struct cd_config *c)
{
	struct stat st;
	int e = mkdir_p(c->state_dir, 0700);

	if (e || stat(c->state_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		cs_log(CS_LOG_ERROR, CD_LOG, "state_dir %s: cannot create it: %s", c->state_dir,
			strerror(e ? -e : ENOTDIR));
		return -1;
	}
	if ((st.st_mode & 077) && st.st_uid == geteuid()) {
		if (chmod(c->state_dir, st.st_mode & 0700) == 0) {
			cs_log(CS_LOG_WARN, CD_LOG,
			       "state_dir %s was open to others (mode %04o): made %04o", c->state_dir,
			       (unsigned)(st.st_mode & 07777), (unsigned)(st.st_mode & 0700));
			st.st_mode &= ~(mode_t)077;
		} else
			cs_log(CS_LOG_WARN, CD_LOG,
			       "state_dir %s is open to others (mode %04o) and cannot be made 0700: %s",
			       c->state_dir, (unsigned)(st.st_mode & 07777), strerror(errno));
	}
	if (access(c->state_dir, W_OK) != 0)
		cs_log(CS_LOG_WARN, CD_LOG,
		       "state_dir %s is not writable: policy changes will fail", c->state_dir);
	if (st.st_uid != geteuid() || (st.st_mode & 022))
		cs_log(CS_LOG_WARN, CD_LOG,
		       "state_dir %s (owner uid %u, mode %04o) may be written by others: the "
		       "policies and the regions' identities there are trusted; expected a "
		       "directory of the daemon's own, mode 0700",
		       c->state_dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return 0;
}

int main(int argc, char **argv)
{
	static struct cd_config cfg;
	static struct cusliced d;
	char err[1024] = "";
	sigset_t set;
	int rc = 1;

	configure(argc, argv, &cfg);
	cs_log_threshold = cfg.log_level;
	/* Blocked before any thread starts, so every thread inherits it; the loop reads them. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (prepare_dirs(&cfg) != 0)
		return 1;
	if (cd_state_init(&d, &cfg) != 0) {
		cs_log(CS_LOG_ERROR, CD_LOG, "out of memory");
		return 1;
	}
	d.pid = getpid();
	d.uid = geteuid();
	{
		unsigned skipped = 0;

		if (cd_events_load(&d.events, &d.evfiles, cfg.state_dir, &skipped, err,
				   sizeof(err)) != 0)
			cs_log(CS_LOG_WARN, CD_LOG, "events: %s: the history lives in memory only",
			       err);
		else
			cs_log(CS_LOG_INFO, CD_LOG,
			       "events: %u enforcement, %u refusal, %u ordinary restored from %s "
			       "(next seq %llu%s)",
			       d.events.ring[CD_EVCLASS_ENFORCEMENT].n,
			       d.events.ring[CD_EVCLASS_REFUSAL].n,
			       d.events.ring[CD_EVCLASS_ORDINARY].n, cfg.state_dir,
			       (unsigned long long)d.events.next,
			       skipped ? ", some lines unreadable and skipped" : "");
		err[0] = '\0';
	}
	d.fd_limit = raise_fd_limit();
	{
		struct cd_admit_limits l;

		cd_admit_limits_for(&l, d.fd_limit, cfg.ipc_sessions_per_uid,
				    cfg.api_connections_per_uid);
		cd_admit_init(&d.admit, &l);
		cs_log(CS_LOG_INFO, CD_LOG,
		       "connection bounds (%u descriptors): IPC sessions %u in all, %u per tenant, "
		       "%u for root on the host; API connections %u in all, %u per tenant, %u for "
		       "root on the host and administrators",
		       d.fd_limit, l.total[CD_CLASS_IPC], l.per_uid[CD_CLASS_IPC],
		       l.root[CD_CLASS_IPC], l.total[CD_CLASS_HTTP], l.per_uid[CD_CLASS_HTTP],
		       l.root[CD_CLASS_HTTP]);
	}
	cs_pid_identity_self(&d.self);
	/*
	 * The socket first: a second daemon on the same path must stop before it
	 * touches any region or policy.
	 */
	if (cd_listen_open(&d, err, sizeof(err)) != 0) {
		cs_log(CS_LOG_ERROR, CD_LOG, "%s", err);
		goto out;
	}
	cd_nvml_start(&d);
	d.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d.epfd < 0) {
		cs_log(CS_LOG_ERROR, CD_LOG, "epoll: %s", strerror(errno));
		goto out;
	}

	/*
	 * The GPUs before any policy reaches a region: a limit keyed by GPU
	 * index resolves only against them (without, a recovered region would
	 * get the policy's "default" until the first backstop tick).
	 */
	cd_gpus_refresh(&d);
	pthread_mutex_lock(&d.lock);
	if (cd_groups_load_policies(&d, err, sizeof(err)) != 0) {
		pthread_mutex_unlock(&d.lock);
		cs_log(CS_LOG_ERROR, CD_LOG, "%s", err);
		goto out;
	}
	cd_regions_recover(&d);
	pthread_mutex_unlock(&d.lock);
	{
		int e = cd_prio_open(&d);

		if (e)
			cs_log(CS_LOG_WARN, CD_LOG,
			       "cannot create the priority board (%s): groups with a priority run "
			       "as \"normal\"",
			       strerror(-e));
	}
	/* GPUs first, then the policies again: every GPU gets its entry and limits. */
	cd_backstop_tick(&d);
	pthread_mutex_lock(&d.lock);
	cd_groups_tick(&d);
	pthread_mutex_unlock(&d.lock);

	d.http = cd_http_start(&d, &cfg, err, sizeof(err));
	if (!d.http) {
		cs_log(CS_LOG_ERROR, CD_LOG, "%s", err);
		goto out;
	}
	cs_log(CS_LOG_INFO, CD_LOG,
	       "cusliced " CS_VERSION " ready: registration on %s, administration on %s "
	       "(policies in %s, metrics %s%s)",
	       cfg.socket, cfg.admin_socket, cfg.state_dir, cfg.metrics_listen,
	       cfg.token[0] ? ", token required" : "");
	if (cd_sched_start(&d) != 0)
		goto out;
	notify("READY=1");
	if (cd_loop_run(&d, err, sizeof(err)) != 0)
		cs_log(CS_LOG_ERROR, CD_LOG, "%s", err);
	else
		rc = 0;
	notify("STOPPING=1");
out:
	cd_sched_stop(&d);
	if (d.http)
		cd_http_stop(d.http);
	/* The HTTP threads are gone: what they and the loop recorded goes to disk. */
	cd_events_flush(&d);
	cd_conns_free(&d);
	cd_listen_close(&d);
	if (d.epfd >= 0)
		close(d.epfd);
	if (d.sfd >= 0)
		close(d.sfd);
	if (d.tfd >= 0)
		close(d.tfd);
	cd_nvml_close(d.nvml);
	cd_state_free(&d);
	return rc;
}
