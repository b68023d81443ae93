/* Starting a private cusliced (cusliced-spawn.h). */
#include "cusliced-spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MAX_ARGS 48

/* In the child: the descriptors, the command line, exec. Never returns. */
static void exec_cusliced(const struct cusliced_spawn *s)
{
	const char *argv[MAX_ARGS];
	int n = 0, log, null;

	/* The daemon must not outlive the test program that started it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (s->prepare)
		s->prepare(s->prepare_arg);
	log = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (log < 0 || null < 0)
		_exit(126);
	dup2(null, STDIN_FILENO);
	dup2(log, STDOUT_FILENO);
	dup2(log, STDERR_FILENO);
	argv[n++] = s->path;
	argv[n++] = "--socket";
	argv[n++] = s->socket;
	argv[n++] = "--admin-socket";
	argv[n++] = s->admin_socket;
	argv[n++] = "--state-dir";
	argv[n++] = s->state_dir;
	argv[n++] = "--shm-dir";
	argv[n++] = s->shm_dir;
	argv[n++] = "--metrics-listen";
	argv[n++] = s->metrics_listen;
	if (s->config) {
		argv[n++] = "--config";
		argv[n++] = s->config;
	}
	for (const char *const *a = s->extra; a && *a && n < MAX_ARGS - 1; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	execv(s->path, (char *const *)argv);
	fprintf(stderr, "exec %s: %s\n", s->path, strerror(errno));
	_exit(127);
}

pid_t cusliced_spawn(const struct cusliced_spawn *s)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		exec_cusliced(s);
	return pid;
}
