/*
 * siege-bench: cusliced under a siege of connections (issue 10), measured
 * against the real daemon.
 *
 * For each daemon binary named on the command line (or CS_CUSLICED), in a
 * private directory on a private cusim instance (tests/ipc/ipc-harness.c),
 * started with --socket-group nogroup --allow-uids 1001 (when run as root):
 *
 *   API latency, idle        GET /v1/status on a new connection to the admin
 *                            socket, N_API times: median, p99, worst (wall
 *                            time, as a client sees it).
 *   hold                     on the registration socket, 2,000 partial
 *                            requests (GET /v1/self's request line and
 *                            Host, no blank line) and 2,000 silent
 *                            connections from this process (root: the
 *                            largest bounds), plus, as root, 5,000 silent
 *                            connections from uid 1001: what the daemon
 *                            holds (its socket descriptors,
 *                            /proc/PID/fd), its RSS.
 *   API latency, besieged    the same GETs while all of that is held.
 *   registration, besieged   REGISTER round trips on new connections.
 *   SIGTERM                  kill to exit, with everything held.
 *
 * A request that fails or a daemon that outlives SIGTERM by 2 s fails the
 * benchmark (exit 1); the figures themselves are informational.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-host.h"
#include "ipc-harness.h"

#define N_API 200u
#define N_REG 200u
#define N_PARTIAL 2000u
#define N_SILENT 2000u
#define N_OTHER_UID 5000u
#define OTHER_UID 1001
#define NOBODY_GID 65534
#define STOP_LIMIT_MS 2000.0

/* A tenant's request on the registration socket (GET /v1/self), cut short: held in the door. */
static const char partial[] = "GET /v1/self HTTP/1.1\r\nHost: x\r\n";
static const char get_status[] = "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n";

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One GET /v1/status on a new connection; true on 200. */
static bool api_get(const char *sock)
{
	char buf[4096];
	size_t have = 0;
	int fd = ipc_connect(sock, 10000);

	if (fd < 0)
		return false;
	if (ipc_send_all(fd, get_status, sizeof(get_status) - 1) != 0) {
		close(fd);
		return false;
	}
	for (;;) {
		ssize_t n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);

		if (n <= 0 || (have += (size_t)n) == sizeof(buf) - 1)
			break;
	}
	close(fd);
	buf[have] = '\0';
	return strncmp(buf, "HTTP/1.1 200 ", 13) == 0;
}

/* N_API GETs: median, p99, worst into out[3]. */
static bool api_latency(const char *sock, double out[3])
{
	static double t[N_API];

	for (unsigned i = 0; i < N_API; i++) {
		double t0 = now_ms();

		if (!api_get(sock)) {
			fprintf(stderr, "siege-bench: GET /v1/status failed\n");
			return false;
		}
		t[i] = now_ms() - t0;
	}
	qsort(t, N_API, sizeof(t[0]), cmp_double);
	out[0] = t[N_API / 2];
	out[1] = t[N_API * 99 / 100];
	out[2] = t[N_API - 1];
	return true;
}

/* N_REG registrations on new connections: median round trip. */
static bool reg_latency(const char *sock, double *median)
{
	static double t[N_REG];

	for (unsigned i = 0; i < N_REG; i++) {
		struct cs_ipc_msg m;
		double t0 = now_ms();
		int fd = ipc_connect(sock, 10000);

		if (fd < 0 || ipc_register(fd, "siege", NULL, &m) != 0 ||
		    m.h.type != CS_IPC_REGISTERED) {
			fprintf(stderr, "siege-bench: registration failed\n");
			if (fd >= 0)
				close(fd);
			return false;
		}
		t[i] = now_ms() - t0;
		close(fd);
	}
	qsort(t, N_REG, sizeof(t[0]), cmp_double);
	*median = t[N_REG / 2];
	return true;
}

/* n connections sending `bytes` (NULL: nothing), kept in fds; returns how many opened. */
static unsigned hold(const char *sock, int *fds, unsigned n, const char *bytes)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		int fd = ipc_connect(sock, 5000);

		if (fd < 0)
			break;
		if (bytes)
			(void)send(fd, bytes, strlen(bytes), MSG_NOSIGNAL | MSG_DONTWAIT);
		fds[k++] = fd;
	}
	return k;
}

/* A child, as OTHER_UID, holding n silent connections until killed. */
static pid_t hold_as_other(const char *sock, unsigned n)
{
	int pfd[2];
	char c;
	pid_t pid;

	if (pipe(pfd) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int *fds = calloc(n, sizeof(*fds));

		if (!fds || setgroups(0, NULL) != 0 || setresgid(NOBODY_GID, NOBODY_GID, NOBODY_GID) ||
		    setresuid(OTHER_UID, OTHER_UID, OTHER_UID))
			_exit(2);
		hold(sock, fds, n, NULL);
		if (write(pfd[1], "r", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(pfd[1]);
	if (pid < 0 || read(pfd[0], &c, 1) != 1) {
		close(pfd[0]);
		return -1;
	}
	close(pfd[0]);
	return pid;
}

/* Socket descriptors the daemon holds, and its RSS in KiB. */
static void daemon_usage(pid_t pid, unsigned *sockets, long *rss)
{
	char path[64], link[64], line[256];
	struct dirent *e;
	DIR *d;
	FILE *f;

	*sockets = 0;
	*rss = -1;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		char fdpath[400];
		ssize_t n;

		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
		n = readlink(fdpath, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			*sockets += strncmp(link, "socket:", 7) == 0;
		}
	}
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", rss) == 1)
			break;
	if (f)
		fclose(f);
}

static bool run(const char *daemon)
{
	static int fds[N_PARTIAL + N_SILENT];
	static const char *const extra[] = {"--socket-group", "nogroup", "--allow-uids", "1001",
					    NULL};
	bool root = geteuid() == 0, ok = false;
	struct ipc_daemon d;
	double idle[3], besieged[3], reg_idle, reg_besieged, t0, stop_ms;
	unsigned sockets_idle, sockets, n = 0;
	long rss_idle, rss;
	pid_t other = 0;
	int status;

	if (ipc_daemon_start(&d, daemon, "siege", root ? extra : NULL) != 0)
		return false;
	/* uid 1001 reaches the socket through the (private, 0700) directory. */
	if (root)
		chmod(d.dir, 0755);
	if (!api_latency(d.admin_socket, idle) || !reg_latency(d.socket, &reg_idle))
		goto out;
	daemon_usage(d.pid, &sockets_idle, &rss_idle);
	n = hold(d.socket, fds, N_PARTIAL, partial);
	n += hold(d.socket, fds + n, N_SILENT, NULL);
	if (root)
		other = hold_as_other(d.socket, N_OTHER_UID);
	usleep(500000);
	daemon_usage(d.pid, &sockets, &rss);
	if (!api_latency(d.admin_socket, besieged) || !reg_latency(d.socket, &reg_besieged))
		goto out;
	t0 = now_ms();
	kill(d.pid, SIGTERM);
	while (waitpid(d.pid, &status, WNOHANG) != d.pid && now_ms() - t0 < 10000)
		usleep(1000);
	stop_ms = now_ms() - t0;
	d.pid = 0;
	printf("\n%s\n", daemon);
	printf("  %-44s %7.2f ms median, %6.2f p99, %6.2f worst\n", "GET /v1/status, idle", idle[0],
	       idle[1], idle[2]);
	printf("  %-44s %7.2f ms median\n", "REGISTER round trip, idle", reg_idle);
	printf("  held by this process (root)                   %u partial requests, %u silent\n",
	       N_PARTIAL, n - N_PARTIAL);
	if (other > 0)
		printf("  held by uid %d                              %u silent\n", OTHER_UID,
		       N_OTHER_UID);
	printf("  %-44s %7u (idle: %u)\n", "sockets the daemon holds", sockets, sockets_idle);
	printf("  %-44s %7ld KiB (idle: %ld KiB)\n", "daemon RSS", rss, rss_idle);
	printf("  %-44s %7.2f ms median, %6.2f p99, %6.2f worst\n", "GET /v1/status, besieged",
	       besieged[0], besieged[1], besieged[2]);
	printf("  %-44s %7.2f ms median\n", "REGISTER round trip, besieged", reg_besieged);
	printf("  %-44s %7.1f ms%s\n", "SIGTERM to exit, besieged", stop_ms,
	       stop_ms > STOP_LIMIT_MS ? "  (over 2 s: FAIL)" : "");
	ok = stop_ms <= STOP_LIMIT_MS;
out:
	if (other > 0) {
		kill(other, SIGKILL);
		waitpid(other, NULL, 0);
	}
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
	ipc_daemon_stop(&d);
	return ok;
}

int main(int argc, char **argv)
{
	char cpu[128], load[64];
	struct rlimit rl;
	bool ok = true;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);
	bench_cpu_model(cpu, sizeof(cpu));
	bench_load_average(load, sizeof(load));
	printf("siege-bench: %s, %ld CPUs, load %s, RLIMIT_NOFILE %llu\n", cpu,
	       sysconf(_SC_NPROCESSORS_ONLN), load, (unsigned long long)rl.rlim_cur);
	if (argc < 2 && getenv("CS_CUSLICED"))
		return run(getenv("CS_CUSLICED")) ? 0 : 1;
	for (int i = 1; i < argc; i++)
		ok = run(argv[i]) && ok;
	return ok ? 0 : 1;
}
