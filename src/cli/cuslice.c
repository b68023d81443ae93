/* cuslice: main. Global options, then the command (cli-commands.c holds the table). */
#include "cli.h"

#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static int run_command(struct cli *c, const struct cli_command *cmd, int argc, char **argv)
{
	int rc;

	c->command = cmd->name;
	/* The command parses from its own name on, with a fresh getopt. */
	optind = 0;
	rc = cmd->run(c, argc, argv);
	fflush(stdout);
	if (ferror(stdout))
		return cli_fail(CLI_EXIT_FAIL, "cannot write the output: %s", strerror(errno));
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    CLI_COMMON_LONG,
	    {"version", no_argument, NULL, 'V'},
	    {0},
	};
	const char *env_socket = cs_env_get(CS_ENV_SOCKET);
	const char *env_admin = cs_env_get(CS_ENV_ADMIN_SOCKET);
	struct cli c = {
	    .socket = env_socket && *env_socket ? env_socket : CLI_DEFAULT_SOCKET,
	    .admin_socket = env_admin && *env_admin ? env_admin : CLI_DEFAULT_ADMIN_SOCKET,
	    .token = cs_env_get(CS_ENV_TOKEN),
	};
	const struct cli_command *cmd;
	int opt, rc;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+" CLI_COMMON_SHORT "V", longopts, NULL)) != -1) {
		if (opt == 'V') {
			printf("cuslice %s\n", CS_VERSION);
			return CLI_EXIT_OK;
		}
		rc = cli_common_option(&c, opt, argv);
		if (rc != CLI_CONTINUE)
			return rc;
	}
	if (optind >= argc)
		return cli_usage(&c, "missing command (one of: run, self, ps, gpus, groups, set, "
				     "delete, top, status)");
	if (strcmp(argv[optind], "help") == 0) {
		if (optind + 1 >= argc) {
			cli_print_help(stdout);
			return CLI_EXIT_OK;
		}
		cmd = cli_command_find(argv[optind + 1]);
		if (!cmd)
			return cli_usage(&c, "help: unknown command \"%s\"", argv[optind + 1]);
		cli_print_command_help(cmd, stdout);
		return CLI_EXIT_OK;
	}
	cmd = cli_command_find(argv[optind]);
	if (!cmd)
		return cli_usage(
		    &c,
		    "unknown command \"%s\" (one of: run, self, ps, gpus, groups, set, "
		    "delete, top, status)",
		    argv[optind]);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return cli_fail(CLI_EXIT_FAIL, "cannot initialize libcurl");
	rc = run_command(&c, cmd, argc - optind, argv + optind);
	curl_global_cleanup();
	return rc;
}
