/*
 * `cuslice self`: a user's own view, from the registration socket — the
 * one every user under libcuslice reaches (the admin socket is for
 * administrators): who cusliced says the caller is, which group its
 * processes run in when they ask for a group (--group, as CUSLICE_GROUP
 * does), and that group's limits and usage. `run` asks the same question
 * when it may not store a policy.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_GROUP = 0x200,
};

int cli_self_get(const struct cli *c, const char *group, cJSON **ret)
{
	struct cli_reply r;
	char path[160];
	int e;

	*ret = NULL;
	snprintf(path, sizeof(path), "%s%s%s", cs_api_path(CS_API_SELF), group ? "?group=" : "",
		 group ? group : "");
	e = cli_http_at(c, c->socket, "GET", path, NULL, &r);
	if (e)
		return e;
	if (r.status != 200 || !cJSON_IsObject(r.json)) {
		cli_reply_free(&r);
		return -EPROTO;
	}
	*ret = r.json;
	r.json = NULL;
	cli_reply_free(&r);
	return 0;
}

/* A string member, or "-" when absent or null. */
static const char *str_or_dash(const cJSON *o, const char *key)
{
	const char *s = cli_json_str(o, key);

	return s && *s ? s : "-";
}

int cli_render_self(const cJSON *self, FILE *f)
{
	const cJSON *peer = cJSON_GetObjectItemCaseSensitive(self, cs_key_peer);
	const cJSON *pl = cJSON_GetObjectItemCaseSensitive(self, cs_key_placement);
	const cJSON *group = cJSON_GetObjectItemCaseSensitive(self, cs_key_group);
	const char *how = cli_json_str(pl, cs_key_how);
	double uid, gid, pid;

	if (!cJSON_IsObject(peer) || !cJSON_IsObject(pl) || !how)
		return -EPROTO;
	if (!cli_json_num(peer, cs_key_uid, &uid) || !cli_json_num(peer, cs_key_gid, &gid) ||
	    !cli_json_num(peer, cs_key_pid, &pid))
		return -EPROTO;
	fprintf(f, "uid        %.0f (gid %.0f)\n", uid, gid);
	fprintf(f, "cgroup     %s\n", str_or_dash(peer, cs_key_cgroup));
	fprintf(f, "pod        %s\n", str_or_dash(peer, cs_key_pod));
	fprintf(f, "asked      %s\n", str_or_dash(pl, cs_key_asked));
	fprintf(f, "group      %s%s\n", str_or_dash(pl, cs_key_group),
		cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pl, cs_key_managed)) ? " (managed)"
										   : "");
	fprintf(f, "placement  %s: %s\n", how, str_or_dash(pl, cs_key_message));
	if (!cJSON_IsObject(group))
		return 0;
	fputc('\n', f);
	/* Its limits and usage; GPUs by UUID (their indices are the admin socket's to tell). */
	return cli_render_groups(group, NULL, NULL, f);
}

int cli_cmd_self(struct cli *c, int argc, char **argv)
{
	static const struct option longopts[] = {
	    CLI_COMMON_LONG,
	    {"group", required_argument, NULL, OPT_GROUP},
	    {0},
	};
	const char *group = NULL;
	cJSON *self;
	char err[256], path[160];
	int opt, rc;

	while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT, longopts, NULL)) != -1) {
		if (opt == OPT_GROUP) {
			if (cli_parse_group("--group", optarg, err, sizeof(err)) < 0)
				return cli_usage(c, "%s", err);
			group = optarg;
			continue;
		}
		rc = cli_common_option(c, opt, argv);
		if (rc != CLI_CONTINUE)
			return rc;
	}
	if (optind < argc)
		return cli_usage(c, "unexpected argument \"%s\"", argv[optind]);
	snprintf(path, sizeof(path), "%s%s%s", cs_api_path(CS_API_SELF), group ? "?group=" : "",
		 group ? group : "");
	rc = cli_get_json_registration(c, path, &self);
	if (rc)
		return rc;
	if (cli_output_document(c))
		rc = cli_print_document(c, self) ? cli_fail(CLI_EXIT_FAIL, "out of memory") : 0;
	else if (cli_render_self(self, stdout) < 0)
		rc = cli_fail(CLI_EXIT_FAIL,
			      "cusliced's reply to GET %s lacks the fields the table needs (try -o "
			      "json)",
			      path);
	else
		rc = CLI_EXIT_OK;
	cJSON_Delete(self);
	return rc;
}
