/* The listing commands: status, gpus, ps, groups. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>

/*
 * Parses the options of a command that has only the common ones, and checks
 * that at most max_args operands follow. Returns CLI_CONTINUE with the
 * operands at argv[optind..argc), or an exit code.
 */
static int parse_plain(struct cli *c, int argc, char **argv, int max_args)
{
	static const struct option longopts[] = {CLI_COMMON_LONG, {0}};
	int opt, rc;

	while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT, longopts, NULL)) != -1) {
		rc = cli_common_option(c, opt, argv);
		if (rc != CLI_CONTINUE)
			return rc;
	}
	/* getopt permutes: options may also follow an operand ("groups NAME -o json"). */
	if (argc - optind > max_args) {
		if (max_args == 0)
			return cli_usage(c, "unexpected argument \"%s\"", argv[optind]);
		return cli_usage(c, "unexpected argument \"%s\"", argv[optind + max_args]);
	}
	return CLI_CONTINUE;
}

/* Prints a reply as JSON or through a renderer; the exit code. */
static int show(const char *path, int e)
{
	if (e == -ENOMEM)
		return cli_fail(CLI_EXIT_FAIL, "out of memory");
	if (e)
		return cli_fail(CLI_EXIT_FAIL,
				"cusliced's reply to GET %s lacks the fields the table needs "
				"(try -o json)",
				path);
	return CLI_EXIT_OK;
}

static int render_status(const cJSON *reply, const void *arg, const struct cli_view *v, FILE *f)
{
	(void)arg;
	return cli_render_status(reply, v, f);
}

static int render_gpus(const cJSON *reply, const void *arg, const struct cli_view *v, FILE *f)
{
	(void)arg;
	return cli_render_gpus(reply, v, f);
}

/* The other replies a table of processes or groups reads: /v1/groups, /v1/gpus. */
struct ps_extra {
	const cJSON *groups, *gpus;
};

static int render_ps(const cJSON *reply, const void *arg, const struct cli_view *v, FILE *f)
{
	const struct ps_extra *x = arg;

	return cli_render_ps(reply, x->groups, x->gpus, v, f);
}

static int render_groups(const cJSON *reply, const void *arg, const struct cli_view *v, FILE *f)
{
	const struct ps_extra *x = arg;

	return cli_render_groups(reply, x->gpus, v, f);
}

/* A table needs more than the reply: JSON and YAML print the reply alone. */
static bool tabular(const struct cli *c)
{
	return c->output == CLI_OUTPUT_TABLE || c->output == CLI_OUTPUT_WIDE;
}

int cli_cmd_status(struct cli *c, int argc, char **argv)
{
	cJSON *st;
	int rc = parse_plain(c, argc, argv, 0);

	if (rc != CLI_CONTINUE)
		return rc;
	rc = cli_get_json(c, cs_api_path(CS_API_STATUS), &st);
	if (rc)
		return rc;
	rc = cli_output_reply(c, st, render_status, NULL);
	cJSON_Delete(st);
	return show(cs_api_path(CS_API_STATUS), rc);
}

int cli_cmd_gpus(struct cli *c, int argc, char **argv)
{
	cJSON *g;
	int rc = parse_plain(c, argc, argv, 0);

	if (rc != CLI_CONTINUE)
		return rc;
	rc = cli_get_json(c, cs_api_path(CS_API_GPUS), &g);
	if (rc)
		return rc;
	rc = cli_output_reply(c, g, render_gpus, NULL);
	/*
	 * An empty table with exit 0 would say "this node has no GPU": while
	 * NVML is down the daemon cannot tell, and says so (exit 1).
	 */
	if (rc == 0 && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(
			   cJSON_GetObjectItemCaseSensitive(g, cs_key_nvml), cs_key_up))) {
		char why[320];

		rc = cli_fail(CLI_EXIT_FAIL,
			      "cusliced does not see the GPUs: NVML is %s; until it comes up the list "
			      "is empty and the backstop is off (cuslice status)",
			      cli_fmt_nvml(g, why, sizeof(why)));
		cJSON_Delete(g);
		return rc;
	}
	cJSON_Delete(g);
	return show(cs_api_path(CS_API_GPUS), rc);
}

int cli_cmd_ps(struct cli *c, int argc, char **argv)
{
	cJSON *procs = NULL, *groups = NULL, *gpus = NULL;
	int rc = parse_plain(c, argc, argv, 0);

	if (rc != CLI_CONTINUE)
		return rc;
	rc = cli_get_json(c, cs_api_path(CS_API_PROCESSES), &procs);
	if (rc)
		return rc;
	/* The limits and core shares are the groups'; GPU indices come from /v1/gpus. */
	if (tabular(c))
		rc = cli_get_json(c, cs_api_path(CS_API_GROUPS), &groups);
	if (!rc && tabular(c))
		rc = cli_get_json(c, cs_api_path(CS_API_GPUS), &gpus);
	if (!rc) {
		struct ps_extra x = {groups, gpus};

		rc = show(cs_api_path(CS_API_PROCESSES),
			  cli_output_reply(c, procs, render_ps, &x));
	}
	cJSON_Delete(procs);
	cJSON_Delete(groups);
	cJSON_Delete(gpus);
	return rc;
}

int cli_cmd_groups(struct cli *c, int argc, char **argv)
{
	cJSON *groups = NULL, *gpus = NULL;
	char path[128], err[256];
	int rc = parse_plain(c, argc, argv, 1);

	if (rc != CLI_CONTINUE)
		return rc;
	if (optind < argc) {
		if (cli_parse_group("group", argv[optind], err, sizeof(err)) < 0)
			return cli_usage(c, "%s", err);
		snprintf(path, sizeof(path), "%s%s", cs_api_path(CS_API_GROUP), argv[optind]);
	} else {
		snprintf(path, sizeof(path), "%s", cs_api_path(CS_API_GROUPS));
	}
	rc = cli_get_json(c, path, &groups);
	if (rc)
		return rc;
	if (tabular(c))
		rc = cli_get_json(c, cs_api_path(CS_API_GPUS), &gpus);
	if (!rc) {
		struct ps_extra x = {NULL, gpus};

		rc = show(path, cli_output_reply(c, groups, render_groups, &x));
	}
	cJSON_Delete(groups);
	cJSON_Delete(gpus);
	return rc;
}
