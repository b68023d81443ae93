/*
 * The command table, the manual pages, and the handling of the options and
 * usage errors every command shares.
 *
 * Every command's manual lives in its entry of `commands` below, so
 * `cuslice --help` (all commands) and `cuslice COMMAND --help` (one) print
 * the same text and cannot drift apart.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define OPT_O                                                                                      \
	"       -o, --output table|wide|json|yaml\n"                                               \
	"              Print a table (default), a table with more columns (wide), or the\n"        \
	"              daemon's reply as indented JSON or as YAML.\n"                              \
	"       --no-headers\n"                                                                    \
	"              Print tables without their headings line.\n"

static const struct cli_command commands[] = {
    {
	.name = "run",
	.run = cli_cmd_run,
	.synopsis = "cuslice run [--mem SIZE] [--cores PCT] [--gpu LIST] [--group NAME]\n"
		    "                   [--burst] [--oversubscribe]\n"
		    "                   [--priority high|normal|best-effort] [--] CMD [ARGS...]",
	.summary = "run a command (and its children) as a group with GPU limits",
	.description =
	    "       Runs CMD with libcuslice preloaded, so CMD and every process it starts\n"
	    "       share one group: one memory quota and one share of compute per GPU.\n"
	    "       cuslice sets up the environment, then replaces itself with CMD (exec):\n"
	    "       CMD keeps cuslice's PID, receives signals directly, and its exit status\n"
	    "       is cuslice's.\n"
	    "\n"
	    "       Environment given to CMD: CUSLICE_GROUP (--group, default \"run-PID\"),\n"
	    "       CUSLICE_MEM_LIMIT (--mem), CUSLICE_CORE_LIMIT (--cores),\n"
	    "       CUSLICE_CORE_MODE=burst (--burst), CUSLICE_MEM_MODE=oversubscribe\n"
	    "       (--oversubscribe), CUDA_VISIBLE_DEVICES (--gpu),\n"
	    "       CUSLICE_SOCKET (--socket), and LD_PRELOAD with libcuslice.so first (an\n"
	    "       existing LD_PRELOAD is kept after it). Variables for options not given\n"
	    "       pass through unchanged: an exported CUSLICE_MEM_LIMIT applies when --mem\n"
	    "       is not given. libcuslice.so is found at $CUSLICE_PRELOAD, else next to\n"
	    "       the installed cuslice (../lib), else in the build tree.\n"
	    "\n"
	    "       With --group NAME and cusliced running, an administrator's run first\n"
	    "       stores the limits given as NAME's policy in the daemon (as `cuslice\n"
	    "       set` does, on the admin socket: fields not given keep their stored\n"
	    "       values), so the daemon manages the group; the policy stays after CMD\n"
	    "       ends, for the next run of NAME (`cuslice delete NAME` removes it).\n"
	    "       Anyone else's run stores nothing: cuslice asks the daemon (GET\n"
	    "       /v1/self, on the registration socket) where the command's processes\n"
	    "       will run and says so — NAME's policy when it is a managed group they\n"
	    "       may join, the limits given as an unmanaged group when it has no\n"
	    "       policy — and stops (exit 1) when the daemon would refuse them. A run\n"
	    "       without --group stores no policy (its name is good for one run\n"
	    "       only); the daemon still tracks it while it runs. Without the daemon\n"
	    "       (no socket) the group runs standalone on its environment limits; a\n"
	    "       socket nobody listens on means the daemon is away: the command's\n"
	    "       processes wait for it (CUSLICE_DAEMON_WAIT) and fail closed.\n",
	.options =
	    "       --mem SIZE\n"
	    "              Memory limit per GPU: a size (8GiB, 512MiB, 1.5G, 4096; KiB..TiB\n"
	    "              and K..T are binary, KB..TB decimal) or a percentage of each\n"
	    "              GPU's memory (50%).\n"
	    "       --cores PCT\n"
	    "              Share of each GPU's compute time, 1 to 100 percent, up to 4\n"
	    "              decimals (30, 12.5%).\n"
	    "       --gpu LIST\n"
	    "              Comma list of GPU ordinals or UUIDs (0,1 or GPU-1a2b...) the\n"
	    "              command may use (CUDA_VISIBLE_DEVICES); the limits apply to each.\n"
	    "       --group NAME\n"
	    "              Group name: 1 to 63 characters of A-Z a-z 0-9 . _ -, not starting\n"
	    "              with . or -. Processes with the same name share the quota.\n"
	    "       --burst\n"
	    "              Let the group use idle compute time above --cores.\n"
	    "       --oversubscribe\n"
	    "              cuMemAlloc becomes unified memory, paged to host RAM when the\n"
	    "              GPU is full: --mem may pass the GPU (a size, or up to 1000%).\n"
	    "       --priority high|normal|best-effort\n"
	    "              With --group, stored in NAME's policy: a best-effort group's\n"
	    "              launches wait while a high-priority group on the same GPU has\n"
	    "              work queued or a request due. Needs cusliced and an\n"
	    "              administrator (otherwise a warning says it is not applied).\n",
	.examples = "       cuslice run --mem 4GiB --cores 30 -- python train.py --epochs 3\n"
		    "       cuslice run --oversubscribe --mem 150% -- jupyter lab\n"
		    "       cuslice run --gpu 0,1 --mem 50% --group team-a ./serve\n"
		    "       cuslice run --group serve --priority high -- ./serve\n",
    },
    {
	.name = "self",
	.run = cli_cmd_self,
	.synopsis = "cuslice self [--group NAME] [-o table|wide|json|yaml] [--no-headers]",
	.summary = "show your own group, limits and usage (no administrator needed)",
	.description =
	    "       Asks cusliced, on the registration socket every user under libcuslice\n"
	    "       reaches, what it makes of the caller: uid, cgroup and pod as the kernel\n"
	    "       tells them, the group a process of yours is placed in when it asks for\n"
	    "       NAME (--group, like CUSLICE_GROUP; none: no group), how (member of a\n"
	    "       managed group, placed there by identity, an open group, an unmanaged\n"
	    "       group, a group of its own, or refused), and that group's limits and\n"
	    "       usage per GPU (GPUs by UUID). With -o json: GET /v1/self.\n",
	.options = "       --group NAME\n"
		   "              The group your processes ask for (CUSLICE_GROUP).\n" OPT_O,
	.examples = "       cuslice self\n       cuslice self --group team-a -o json\n",
    },
    {
	.name = "ps",
	.run = cli_cmd_ps,
	.synopsis = "cuslice ps [-o table|wide|json|yaml] [--no-headers]",
	.summary = "list GPU processes with their group's limits",
	.description =
	    "       One line per process and GPU: GROUP, PID (as the daemon sees it), NAME\n"
	    "       (its /proc/PID/comm), GPU (NVML index), MEM-USED (the process's memory\n"
	    "       on that GPU), MEM-LIMIT\n"
	    "       (its group's limit there), CORES (the group's share of that GPU's time\n"
	    "       in the last second), CORE-LIMIT and STATE (running or stopped; a\n"
	    "       process using a GPU without libcuslice shows group \"-\" and state\n"
	    "       \",unregistered\" appended). \"-\" means none. When a group oversubscribes\n"
	    "       unified memory, RESIDENT follows MEM-LIMIT: of the group's managed memory\n"
	    "       on that GPU, how much is resident there (the rest is in host RAM). -o wide\n"
	    "       adds UID, the GPU's UUID, CGROUP and the group's LABELS. With -o json: the\n"
	    "       reply of GET /v1/processes.\n",
	.options = OPT_O,
	.examples = "       cuslice ps\n       cuslice ps -o json | jq '.processes[].pid'\n",
    },
    {
	.name = "gpus",
	.run = cli_cmd_gpus,
	.synopsis = "cuslice gpus [-o table|wide|json|yaml] [--no-headers]",
	.summary = "list the node's GPUs",
	.description = "       INDEX, NAME, MEM-USED, MEM-TOTAL and UTIL (busy percent in\n"
		       "       the last second) of every GPU; -o wide adds the UUID. With -o\n"
		       "       json: GET /v1/gpus.\n",
	.options = OPT_O,
	.examples = "       cuslice gpus\n",
    },
    {
	.name = "groups",
	.run = cli_cmd_groups,
	.synopsis = "cuslice groups [-o table|wide|json|yaml] [--no-headers] [NAME]",
	.summary = "list groups (or one group) with their policy and usage",
	.description =
	    "       One line per group and GPU: GROUP, MANAGED (yes when the daemon holds\n"
	    "       a policy for it), PROCS, GPU, MEM-USED, MEM-LIMIT, CORES, CORE-LIMIT,\n"
	    "       MODE (hard or burst), OOM (allocations refused by the quota) and\n"
	    "       THROTTLED (seconds launches waited); -o wide adds PRIORITY (the\n"
	    "       policy's: high, normal, best-effort) and UUID. With -o json: GET\n"
	    "       /v1/groups or GET /v1/groups/NAME. An unknown NAME is an error (exit\n"
	    "       status 1).\n",
	.options = OPT_O,
	.examples = "       cuslice groups\n       cuslice groups team-a -o json\n",
    },
    {
	.name = "set",
	.run = cli_cmd_set,
	.synopsis = "cuslice set GROUP [--mem SIZE|none] [--cores PCT|none] [--burst|--hard]\n"
		    "                   [--required|--optional] [--oversubscribe|--no-oversubscribe]\n"
		    "                   [--oom-wait DURATION|none] [--priority high|normal|best-effort]\n"
		    "                   [-o table|wide|json|yaml] [--no-headers]",
	.summary = "create or change a group's policy",
	.description =
	    "       Changes the policy cusliced keeps for GROUP (creating it: the group\n"
	    "       becomes managed). Only the fields given change; the daemon keeps the\n"
	    "       rest of the stored policy (members, on_violation included). Running\n"
	    "       processes of the group see the change within 100 ms; the daemon keeps\n"
	    "       the policy across restarts. Prints the group as `cuslice groups GROUP`\n"
	    "       does. At least one option is required.\n",
	.options =
	    "       --mem SIZE|none\n"
	    "              Memory limit per GPU (a size, or a percentage like 50%), or none.\n"
	    "       --cores PCT|none\n"
	    "              Share of each GPU's compute time, 1 to 100 percent, or none.\n"
	    "       --burst, --hard\n"
	    "              May the group use idle compute time above its share (burst), or\n"
	    "              never (hard, the default).\n"
	    "       --required, --optional\n"
	    "              Whether the group's processes must reach cusliced: required means\n"
	    "              they refuse GPU memory when the daemon is unreachable.\n"
	    "       --oversubscribe, --no-oversubscribe\n"
	    "              memory_mode: the group's cuMemAlloc becomes unified memory and --mem\n"
	    "              may pass the GPU (up to 1000%), or device memory (hard). Processes\n"
	    "              read it when they start.\n"
	    "       --oom-wait DURATION|none\n"
	    "              oom_wait: an allocation of the group's processes that finds no\n"
	    "              memory waits up to DURATION (at most 1h) for some to free instead\n"
	    "              of failing at once; none: it fails at once. Applies to running\n"
	    "              processes.\n"
	    "       --priority high|normal|best-effort\n"
	    "              priority: a best-effort group's launches wait while a high-priority\n"
	    "              group on the same GPU has work queued or a request due, so that\n"
	    "              the latency of its requests stays near running alone. Processes\n"
	    "              read it when they register.\n" OPT_O,
	.examples = "       cuslice set team-a --mem 16GiB --cores 40 --burst\n"
		    "       cuslice set notebooks --oversubscribe --mem 150%\n"
		    "       cuslice set batch --oom-wait 10m\n"
		    "       cuslice set inference --priority high\n"
		    "       cuslice set training --priority best-effort\n"
		    "       cuslice set team-a --mem none\n",
    },
    {
	.name = "delete",
	.run = cli_cmd_delete,
	.synopsis = "cuslice delete GROUP",
	.summary = "delete a group's policy (the group becomes unmanaged)",
	.description = "       Removes GROUP's policy from cusliced. Running processes keep their\n"
		       "       current limits; the daemon no longer enforces or persists them. An\n"
		       "       unknown GROUP is an error (exit status 1).\n",
	.options = "",
	.examples = "       cuslice delete run-4242\n",
    },
    {
	.name = "top",
	.run = cli_cmd_top,
	.synopsis = "cuslice top [-o table|wide|json|yaml] [--no-headers]",
	.summary = "live view of GPUs and groups, refreshed every second",
	.description =
	    "       Shows every GPU (memory and utilization) and, per group and GPU, bars\n"
	    "       for memory (against the limit, or the GPU's memory when none) and for\n"
	    "       compute (against the share, or 100%). Processes that hold GPU memory\n"
	    "       without registering with cusliced (bypassing libcuslice) show as a\n"
	    "       \"(bypassing)\" row per GPU: the memory no group accounts for.\n"
	    "       Refreshes every second in the terminal's alternate screen, in colour\n"
	    "       (bars green, yellow from 75%, red from 90%; bypassers red) unless\n"
	    "       NO_COLOR is set or TERM is dumb; q, Q, Ctrl-C, Ctrl-D, SIGINT, SIGTERM\n"
	    "       or SIGHUP exits and restores the terminal. When standard output is not\n"
	    "       a terminal, prints one frame without colour, every line cut to\n"
	    "       $COLUMNS (default 100), and exits; with -o json or yaml, prints one\n"
	    "       {\"status\", \"gpus\", \"groups\", \"processes\"} document and exits.\n",
	.options = OPT_O,
	.examples = "       cuslice top\n       COLUMNS=80 cuslice top | cat\n",
    },
    {
	.name = "status",
	.run = cli_cmd_status,
	.synopsis = "cuslice status [-o table|wide|json|yaml] [--no-headers]",
	.summary = "show the daemon's state",
	.description = "       Version, PID, uptime, socket, directories, metrics address and the\n"
		       "       numbers of groups, processes and GPUs. With -o json: GET\n"
		       "       /v1/status.\n",
	.options = OPT_O,
	.examples = "       cuslice status\n       CUSLICE_ADMIN_SOCKET=/tmp/cs/admin.sock cuslice "
		    "status\n",
    },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const char global_options[] =
    "       --admin-socket PATH\n"
    "              cusliced's admin socket, where every command but run and self goes\n"
    "              (default: $CUSLICE_ADMIN_SOCKET, else " CLI_DEFAULT_ADMIN_SOCKET ");\n"
    "              for root and the administrators cusliced names.\n"
    "       --socket PATH\n"
    "              cusliced's registration socket, for run (its command's processes\n"
    "              register there) and self (default: $CUSLICE_SOCKET, else\n"
    "              " CLI_DEFAULT_SOCKET ").\n" OPT_O "       -h, --help\n"
    "              Print this manual (or the command's, after a command).\n"
    "       -V, --version\n"
    "              Print cuslice's version (before a command).\n"
    "       The options --admin-socket, --socket, -o and --help are also accepted\n"
    "       after the command.\n";

static const char environment[] =
    "       CUSLICE_ADMIN_SOCKET  the admin socket when --admin-socket is not given.\n"
    "       CUSLICE_SOCKET   the registration socket when --socket is not given.\n"
    "       CUSLICE_TOKEN    shared token, sent as \"Authorization: Bearer\" when the\n"
    "                        daemon requires one (and passed on by run).\n"
    "       CUSLICE_PRELOAD  libcuslice.so to use for run.\n";

static const char exit_status[] =
    "       0   success\n"
    "       1   the daemon refused the request (its message is printed),\n"
    "           unknown group, permission denied on the socket (not an\n"
    "           administrator), or another failure\n"
    "       2   usage error: unknown command or option, bad size, percentage,\n"
    "           GPU list or group name\n"
    "       3   cusliced is not running (no socket, or nobody listening)\n"
    "       run: CMD's exit status once CMD started (127: CMD not found,\n"
    "           126: CMD not executable, or built for musl)\n";

const struct cli_command *cli_command_find(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

void cli_print_command_help(const struct cli_command *cmd, FILE *f)
{
	fprintf(f, "NAME\n       cuslice %s - %s\n\n", cmd->name, cmd->summary);
	fprintf(f, "SYNOPSIS\n       %s\n\n", cmd->synopsis);
	fprintf(f, "DESCRIPTION\n%s\n", cmd->description);
	if (cmd->options[0])
		fprintf(f, "OPTIONS\n%s\n", cmd->options);
	fprintf(f, "GLOBAL OPTIONS\n%s\n", global_options);
	fprintf(f, "ENVIRONMENT\n%s\n", environment);
	fprintf(f, "EXAMPLES\n%s\n", cmd->examples);
	fprintf(f, "EXIT STATUS\n%s", exit_status);
}

void cli_print_help(FILE *f)
{
	fputs("NAME\n"
	      "       cuslice - run GPU workloads in groups with memory and compute limits, and\n"
	      "       inspect and control them through cusliced\n"
	      "\n"
	      "SYNOPSIS\n"
	      "       cuslice [--admin-socket PATH] [--socket PATH] [-o table|wide|json|yaml] [--no-headers] COMMAND\n"
	      "               [OPTIONS] [ARGS]\n"
	      "       cuslice help [COMMAND]\n"
	      "\n"
	      "DESCRIPTION\n"
	      "       `run` works with or without the node daemon cusliced, and `self` for any\n"
	      "       user; the other commands administer it over its admin socket (HTTP/JSON\n"
	      "       API, see docs/cli.md), which is for root and the administrators\n"
	      "       cusliced names. Sizes print in binary units (1.00 GiB); \"-\" in a table\n"
	      "       means none.\n"
	      "\n"
	      "COMMANDS\n",
	      f);
	for (size_t i = 0; i < N_COMMANDS; i++) {
		const struct cli_command *cmd = &commands[i];

		fprintf(f, "   %s - %s\n       %s\n", cmd->name, cmd->summary, cmd->synopsis);
		fprintf(f, "%s", cmd->description);
		if (cmd->options[0])
			fprintf(f, "\n%s", cmd->options);
		fputs("       Examples:\n", f);
		/* The examples one step further in, under their heading. */
		for (const char *l = cmd->examples; *l;) {
			size_t n = strcspn(l, "\n");

			fprintf(f, "    %.*s\n", (int)n, l);
			l += n + (l[n] ? 1 : 0);
		}
		fputc('\n', f);
	}
	fprintf(f, "GLOBAL OPTIONS\n%s\n", global_options);
	fprintf(f, "ENVIRONMENT\n%s\n", environment);
	fprintf(f, "EXIT STATUS\n%s\n", exit_status);
	fputs("SEE ALSO\n       cusliced(8), docs/cli.md, docs/libcuslice.md\n", f);
}

int cli_fail(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("cuslice: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int cli_usage(const struct cli *c, const char *fmt, ...)
{
	const char *cmd = c && c->command ? c->command : NULL;
	va_list ap;

	fprintf(stderr, "cuslice%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'cuslice%s%s --help' for more information.\n", cmd ? " " : "",
		cmd ? cmd : "");
	return CLI_EXIT_USAGE;
}

/* The option text getopt just refused, for messages: "--foo" or "-x". */
static const char *bad_option(char **argv, char *buf, size_t len)
{
	/* getopt has stepped past a refused long option (optopt is its value or 0, no help). */
	const char *arg = optind > 0 ? argv[optind - 1] : NULL;

	if (arg && strncmp(arg, "--", 2) == 0) {
		snprintf(buf, len, "%s", arg);
		buf[strcspn(buf, "=")] = '\0';
	} else {
		snprintf(buf, len, "-%c", optopt);
	}
	return buf;
}

int cli_common_option(struct cli *c, int opt, char **argv)
{
	char name[64];

	switch (opt) {
	case CLI_OPT_HELP:
		if (c->command)
			cli_print_command_help(cli_command_find(c->command), stdout);
		else
			cli_print_help(stdout);
		return CLI_EXIT_OK;
	case CLI_OPT_OUTPUT:
		if (strcmp(optarg, "table") == 0)
			c->output = CLI_OUTPUT_TABLE;
		else if (strcmp(optarg, "wide") == 0)
			c->output = CLI_OUTPUT_WIDE;
		else if (strcmp(optarg, "json") == 0)
			c->output = CLI_OUTPUT_JSON;
		else if (strcmp(optarg, "yaml") == 0)
			c->output = CLI_OUTPUT_YAML;
		else
			return cli_usage(c, "-o \"%s\": expected table, wide, json or yaml",
					 optarg);
		return CLI_CONTINUE;
	case CLI_OPT_NO_HEADERS:
		c->no_headers = true;
		return CLI_CONTINUE;
	case CLI_OPT_SOCKET:
		if (!optarg[0])
			return cli_usage(c, "--socket: expected a path, got an empty string");
		c->socket = optarg;
		c->socket_given = true;
		return CLI_CONTINUE;
	case CLI_OPT_ADMIN_SOCKET:
		if (!optarg[0])
			return cli_usage(c, "--admin-socket: expected a path, got an empty string");
		c->admin_socket = optarg;
		return CLI_CONTINUE;
	case ':':
		return cli_usage(c, "option %s needs a value",
				 bad_option(argv, name, sizeof(name)));
	default:
		return cli_usage(c, "unknown option %s", bad_option(argv, name, sizeof(name)));
	}
}
