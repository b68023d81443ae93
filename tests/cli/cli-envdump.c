/*
 * What `cuslice run` started, as seen from inside: prints its PID, its
 * arguments and the variables run sets, then exits with the code given by
 * "--exit N" or kills itself with "--signal N". Built without sanitizers:
 * it runs under LD_PRELOAD like a user's program.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const vars[] = {
    "CUSLICE_GROUP",	    "CUSLICE_MEM_LIMIT", "CUSLICE_CORE_LIMIT", "CUSLICE_CORE_MODE",
    "CUDA_VISIBLE_DEVICES", "CUSLICE_SOCKET",	 "LD_PRELOAD",
};

int main(int argc, char **argv)
{
	int code = 0;

	printf("pid=%ld\n", (long)getpid());
	for (int i = 1; i < argc; i++)
		printf("arg=%s\n", argv[i]);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);

		if (v)
			printf("%s=%s\n", vars[i], v);
	}
	fflush(stdout);
	for (int i = 1; i + 1 < argc; i++) {
		if (strcmp(argv[i], "--exit") == 0)
			code = atoi(argv[i + 1]);
		if (strcmp(argv[i], "--signal") == 0) {
			signal(atoi(argv[i + 1]), SIG_DFL);
			raise(atoi(argv[i + 1]));
		}
	}
	return code;
}
