/* Child processes and time for the test harnesses (proc.h). */
#include "proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int th_exit_code(int wstatus)
{
	return WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
}

int th_wait(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return th_exit_code(status);
}

int th_stop(pid_t pid, unsigned timeout_ms)
{
	uint64_t deadline = th_now_ms() + timeout_ms;
	int status;
	pid_t r;

	if (pid <= 0)
		return 0;
	kill(pid, SIGTERM);
	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		if (th_now_ms() > deadline) {
			kill(pid, SIGKILL);
			return th_wait(pid);
		}
		th_sleep_ms(20);
	}
	if (r < 0)
		return errno == EINTR ? th_wait(pid) : -errno;
	return th_exit_code(status);
}

/* True when entry ("NAME=value" or "NAME") names the variable `var` ("NAME=..."). */
static bool same_name(const char *var, const char *entry)
{
	const char *eq = strchr(var, '=');
	size_t n = eq ? (size_t)(eq - var) : strlen(var);

	return strncmp(var, entry, n) == 0 && (entry[n] == '=' || entry[n] == '\0');
}

char **th_env_merge(char *const env[], const char *preload)
{
	static const char ld[] = "LD_PRELOAD=";
	size_t n = 0, extra = 0, k = 0, plen = preload ? strlen(preload) : 0;
	char **out;
	char *var;

	while (environ[n])
		n++;
	while (env && env[extra])
		extra++;
	/* The array and, after it, the LD_PRELOAD string: one block to free. */
	out = malloc((n + extra + 2) * sizeof(*out) + sizeof(ld) + plen);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool replaced = preload && same_name(environ[i], ld);

		for (size_t j = 0; !replaced && j < extra; j++)
			replaced = same_name(environ[i], env[j]);
		if (!replaced)
			out[k++] = environ[i];
	}
	for (size_t j = 0; j < extra; j++) {
		bool replaced = !strchr(env[j], '=') || (preload && same_name(env[j], ld));

		/* A later entry for the same name wins, as a later putenv would. */
		for (size_t l = j + 1; !replaced && l < extra; l++)
			replaced = same_name(env[j], env[l]);
		if (!replaced)
			out[k++] = env[j];
	}
	if (preload) {
		var = (char *)(out + n + extra + 2);
		memcpy(var, ld, sizeof(ld) - 1);
		memcpy(var + sizeof(ld) - 1, preload, plen + 1);
		out[k++] = var;
	}
	out[k] = NULL;
	return out;
}

void th_exec(char *const argv[], char *const envp[], bool search)
{
	if (search)
		execvpe(argv[0], argv, envp);
	else
		execve(argv[0], argv, envp);
	dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

pid_t th_spawn(const struct th_spawn *s)
{
	char **envp = th_env_merge(s->env, s->preload);
	pid_t pid;

	if (!envp)
		return -ENOMEM;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		if (s->setup)
			s->setup(s->arg);
		th_exec(s->argv, envp, s->search);
	}
	free(envp);
	return pid < 0 ? -errno : pid;
}

uint64_t th_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t th_now_ms(void)
{
	return th_now_ns() / 1000000u;
}

void th_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
