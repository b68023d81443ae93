/*
 * Policy changes: `cuslice set`, `cuslice delete`, and the policy `run`
 * stores.
 *
 * A change is sent as a partial policy: cusliced's PATCH merges the fields
 * given into the stored policy (cd_policy_put, src/daemon/cd-policy-store.c),
 * so `set team --cores 30` keeps team's memory limit, members and on_violation,
 * and two concurrent `set`s of different fields both take effect. "none" is
 * sent as JSON null, the API's "no limit".
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "cs-size.h"

enum {
	OPT_MEM = 0x200,
	OPT_CORES,
	OPT_BURST,
	OPT_HARD,
	OPT_REQUIRED,
	OPT_OPTIONAL,
	OPT_OVERSUB,
	OPT_NO_OVERSUB,
	OPT_OOM_WAIT,
	OPT_PRIORITY,
};

/* Replaces (or adds) member `key` of o with v, which o then owns. false on failure. */
static bool put_member(cJSON *o, const char *key, cJSON *v)
{
	if (!v)
		return false;
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	if (!cJSON_AddItemToObject(o, key, v)) {
		cJSON_Delete(v);
		return false;
	}
	return true;
}

static cJSON *mem_value(const struct cli_policy_change *ch)
{
	char buf[64];

	if (ch->mem_none)
		return cJSON_CreateNull();
	if (ch->mem_is_percent)
		return cJSON_CreateString(cli_fmt_percent(ch->mem_percent, buf, sizeof(buf)));
	/* A double holds byte counts exactly up to 2^53 (8 PiB); beyond, the daemon parses text. */
	if (ch->mem_bytes > (1ull << 53)) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)ch->mem_bytes);
		return cJSON_CreateString(buf);
	}
	return cJSON_CreateNumber((double)ch->mem_bytes);
}

cJSON *cli_policy_body(const struct cli_policy_change *ch)
{
	cJSON *p = cJSON_CreateObject();
	bool ok = p != NULL;

	if (ok && ch->mem_set)
		ok = put_member(p, cs_key_memory_limit, mem_value(ch));
	if (ok && ch->cores_set)
		ok = put_member(p, cs_key_core_limit,
				ch->cores_none ? cJSON_CreateNull()
					       : cJSON_CreateNumber(ch->cores_percent));
	if (ok && ch->mode)
		ok = put_member(p, cs_key_mode,
				cJSON_CreateString(cs_policy_mode_name(
				    ch->mode == 2 ? CS_POLICY_MODE_BURST : CS_POLICY_MODE_HARD)));
	if (ok && ch->mem_mode)
		ok = put_member(p, cs_key_memory_mode,
				cJSON_CreateString(cs_policy_memory_mode_name(
				    ch->mem_mode == 2 ? CS_POLICY_MEMORY_OVERSUBSCRIBE
						      : CS_POLICY_MEMORY_HARD)));
	if (ok && ch->required)
		ok = put_member(p, cs_key_daemon_required, cJSON_CreateBool(ch->required == 1));
	if (ok && ch->oom_wait)
		ok = put_member(p, cs_key_oom_wait,
				strcmp(ch->oom_wait, "none") == 0 ? cJSON_CreateNull()
								  : cJSON_CreateString(ch->oom_wait));
	if (ok && ch->priority)
		ok = put_member(p, cs_key_priority, cJSON_CreateString(cs_priority_name(
							(enum cs_priority)(ch->priority - 1))));
	if (!ok) {
		cJSON_Delete(p);
		return NULL;
	}
	return p;
}

int cli_policy_apply(const struct cli *c, const char *group, const struct cli_policy_change *ch,
		     bool quiet_unreachable, cJSON **ret_group)
{
	cJSON *policy = cli_policy_body(ch);
	char path[128], *body = policy ? cJSON_PrintUnformatted(policy) : NULL;
	struct cli_reply r = {0};
	int e, rc;

	cJSON_Delete(policy);
	if (!body)
		return cli_fail(CLI_EXIT_FAIL, "out of memory");
	snprintf(path, sizeof(path), "%s%s", cs_api_path(CS_API_GROUP), group);
	e = cli_http(c, "PATCH", path, body, &r);
	cJSON_free(body);
	if (quiet_unreachable && (e || cli_http_not_admin(e, &r))) {
		cli_reply_free(&r);
		return e ? e : -EACCES;
	}
	if (e || r.status >= 300) {
		rc = cli_report(c, e, &r, "PATCH", path);
	} else {
		rc = CLI_EXIT_OK;
		if (ret_group) {
			*ret_group = r.json;
			r.json = NULL;
		}
	}
	cli_reply_free(&r);
	return rc;
}

/* Applies --mem / --cores values of set ("none" allowed). CLI_CONTINUE or CLI_EXIT_USAGE. */
static int set_value(struct cli *c, int opt, const char *arg, struct cli_policy_change *ch)
{
	char err[512];

	if (opt == OPT_MEM) {
		ch->mem_set = true;
		ch->mem_none = strcmp(arg, "none") == 0;
		/* Past 100% only for a group that oversubscribes: the daemon says which. */
		if (!ch->mem_none && cli_parse_mem_upto("--mem", arg, 1000, &ch->mem_bytes,
							&ch->mem_percent, err, sizeof(err)) < 0)
			return cli_usage(c, "%s", err);
		ch->mem_is_percent = !ch->mem_none && ch->mem_percent >= 0;
	} else {
		ch->cores_set = true;
		ch->cores_none = strcmp(arg, "none") == 0;
		if (!ch->cores_none &&
		    cli_parse_cores("--cores", arg, &ch->cores_percent, err, sizeof(err)) < 0)
			return cli_usage(c, "%s", err);
	}
	return CLI_CONTINUE;
}

int cli_cmd_set(struct cli *c, int argc, char **argv)
{
	static const struct option longopts[] = {
	    CLI_COMMON_LONG,
	    {"mem", required_argument, NULL, OPT_MEM},
	    {"cores", required_argument, NULL, OPT_CORES},
	    {"burst", no_argument, NULL, OPT_BURST},
	    {"hard", no_argument, NULL, OPT_HARD},
	    {"required", no_argument, NULL, OPT_REQUIRED},
	    {"optional", no_argument, NULL, OPT_OPTIONAL},
	    {"oversubscribe", no_argument, NULL, OPT_OVERSUB},
	    {"no-oversubscribe", no_argument, NULL, OPT_NO_OVERSUB},
	    {"oom-wait", required_argument, NULL, OPT_OOM_WAIT},
	    {"priority", required_argument, NULL, OPT_PRIORITY},
	    {0},
	};
	struct cli_policy_change ch = {0};
	cJSON *group = NULL, *gpus = NULL;
	char err[256];
	int opt, rc;

	while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_MEM:
		case OPT_CORES:
			rc = set_value(c, opt, optarg, &ch);
			break;
		case OPT_BURST:
		case OPT_HARD:
			if (ch.mode && ch.mode != (opt == OPT_BURST ? 2 : 1))
				return cli_usage(c, "--burst and --hard exclude each other");
			ch.mode = opt == OPT_BURST ? 2 : 1;
			rc = CLI_CONTINUE;
			break;
		case OPT_REQUIRED:
		case OPT_OPTIONAL:
			if (ch.required && ch.required != (opt == OPT_REQUIRED ? 1 : 2))
				return cli_usage(c, "--required and --optional exclude each other");
			ch.required = opt == OPT_REQUIRED ? 1 : 2;
			rc = CLI_CONTINUE;
			break;
		case OPT_OVERSUB:
		case OPT_NO_OVERSUB:
			if (ch.mem_mode && ch.mem_mode != (opt == OPT_OVERSUB ? 2 : 1))
				return cli_usage(
				    c, "--oversubscribe and --no-oversubscribe exclude each other");
			ch.mem_mode = opt == OPT_OVERSUB ? 2 : 1;
			rc = CLI_CONTINUE;
			break;
		case OPT_OOM_WAIT: {
			uint64_t ms;

			if (strcmp(optarg, "none") != 0 &&
			    (cs_duration_parse(optarg, &ms) != 0 || ms > CS_POLICY_OOM_WAIT_MAX_MS))
				return cli_usage(c,
						 "--oom-wait \"%.64s\": expected a duration up to 1h "
						 "(%s, e.g. 30s) or none",
						 optarg, CS_DURATION_FORMS);
			ch.oom_wait = optarg;
			rc = CLI_CONTINUE;
			break;
		}
		case OPT_PRIORITY:
			if (cli_parse_priority("--priority", optarg, &ch.priority, err,
					       sizeof(err)) < 0)
				return cli_usage(c, "%s", err);
			rc = CLI_CONTINUE;
			break;
		default:
			rc = cli_common_option(c, opt, argv);
			break;
		}
		if (rc != CLI_CONTINUE)
			return rc;
	}
	if (optind >= argc)
		return cli_usage(c, "missing GROUP");
	if (argc - optind > 1)
		return cli_usage(c, "unexpected argument \"%s\"", argv[optind + 1]);
	if (cli_parse_group("group", argv[optind], err, sizeof(err)) < 0)
		return cli_usage(c, "%s", err);
	if (!ch.mem_set && !ch.cores_set && !ch.mode && !ch.required && !ch.mem_mode &&
	    !ch.oom_wait && !ch.priority)
		return cli_usage(c, "nothing to change: give --mem, --cores, --burst or --hard, "
				    "--required or --optional, --oversubscribe or --no-oversubscribe, "
				    "--oom-wait, --priority");

	rc = cli_policy_apply(c, argv[optind], &ch, false, &group);
	if (rc || !group)
		goto out;
	if (cli_output_document(c)) {
		rc = cli_print_document(c, group) ? cli_fail(CLI_EXIT_FAIL, "out of memory") : 0;
	} else {
		struct cli_view v = cli_view_of(c);

		rc = cli_get_json(c, cs_api_path(CS_API_GPUS), &gpus);
		if (!rc && cli_render_groups(group, gpus, &v, stdout) < 0)
			rc = cli_fail(CLI_EXIT_FAIL,
				      "cusliced's reply to PATCH /v1/groups/%s lacks "
				      "the fields the table needs (try -o json)",
				      argv[optind]);
	}
out:
	cJSON_Delete(group);
	cJSON_Delete(gpus);
	return rc;
}

int cli_cmd_delete(struct cli *c, int argc, char **argv)
{
	static const struct option longopts[] = {CLI_COMMON_LONG, {0}};
	struct cli_reply r;
	char path[128], err[256];
	int opt, rc, e;

	while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT, longopts, NULL)) != -1) {
		rc = cli_common_option(c, opt, argv);
		if (rc != CLI_CONTINUE)
			return rc;
	}
	if (optind >= argc)
		return cli_usage(c, "missing GROUP");
	if (argc - optind > 1)
		return cli_usage(c, "unexpected argument \"%s\"", argv[optind + 1]);
	if (cli_parse_group("group", argv[optind], err, sizeof(err)) < 0)
		return cli_usage(c, "%s", err);
	snprintf(path, sizeof(path), "%s%s", cs_api_path(CS_API_GROUP), argv[optind]);
	e = cli_http(c, "DELETE", path, NULL, &r);
	rc = e || r.status >= 300 ? cli_report(c, e, &r, "DELETE", path) : CLI_EXIT_OK;
	cli_reply_free(&r);
	return rc;
}
