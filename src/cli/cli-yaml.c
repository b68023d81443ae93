/*
 * -o yaml, and cli_output_reply: the one place that prints a daemon reply as
 * -o asks (table, wide, json, yaml).
 *
 * YAML is written by hand from the cJSON tree, in block style: the replies
 * are plain trees of objects, arrays and scalars, and a YAML library would
 * be a dependency for forty lines. Every string is written double-quoted
 * with JSON's escapes, which YAML's double-quoted scalars accept as they
 * are, so no value (a tenant's label, "no", "1e3", "- x", ": ") can change
 * the document's shape or type.
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A key that needs no quotes: [A-Za-z_][A-Za-z0-9_.-]*, and not a YAML keyword. */
static bool plain_key(const char *k)
{
	static const char *const words[] = {"true", "false", "null", "yes", "no",
					    "on",   "off",   "y",    "n",   "~"};

	if (!k || !((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || *k == '_'))
		return false;
	for (const char *p = k; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
			return false;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasecmp(k, words[i]) == 0)
			return false;
	return true;
}

/* A scalar (or an empty container) as JSON writes it. */
static int scalar(const cJSON *j, FILE *f)
{
	char *s;

	if (cJSON_IsArray(j) || cJSON_IsObject(j)) {
		fputs(cJSON_IsArray(j) ? "[]" : "{}", f);
		return 0;
	}
	s = cJSON_PrintUnformatted(j);
	if (!s)
		return -ENOMEM;
	fputs(s, f);
	cJSON_free(s);
	return 0;
}

static int key(const char *k, FILE *f)
{
	cJSON *q;
	char *s;

	if (plain_key(k)) {
		fputs(k, f);
		return 0;
	}
	q = cJSON_CreateString(k ? k : "");
	s = q ? cJSON_PrintUnformatted(q) : NULL;
	cJSON_Delete(q);
	if (!s)
		return -ENOMEM;
	fputs(s, f);
	cJSON_free(s);
	return 0;
}

static bool is_block(const cJSON *j)
{
	return (cJSON_IsArray(j) || cJSON_IsObject(j)) && j->child;
}

/*
 * Writes the members (object) or items (array) of a non-empty container j
 * at `indent`. The first line's indent has been written by the caller when
 * `first_inline` (the "- " of an array item holding an object).
 */
static int block(const cJSON *j, int indent, bool first_inline, FILE *f)
{
	const cJSON *it;
	bool first = true;
	int e = 0;

	cJSON_ArrayForEach(it, j)
	{
		if (!(first && first_inline))
			fprintf(f, "%*s", indent, "");
		first = false;
		if (cJSON_IsArray(j)) {
			/* A sequence in a sequence starts on the next line; anything else on this one. */
			bool seq = is_block(it) && cJSON_IsArray(it);

			fputs(seq ? "-\n" : "- ", f);
			if (is_block(it))
				e = block(it, indent + 2, !seq, f);
			else if (!(e = scalar(it, f)))
				fputc('\n', f);
		} else {
			if ((e = key(it->string, f)))
				return e;
			fputc(':', f);
			if (is_block(it)) {
				fputc('\n', f);
				/* Sequences under a key at the key's indent, as kubectl writes them. */
				e = block(it, cJSON_IsArray(it) ? indent : indent + 2, false, f);
			} else {
				fputc(' ', f);
				if (!(e = scalar(it, f)))
					fputc('\n', f);
			}
		}
		if (e)
			return e;
	}
	return 0;
}

int cli_yaml_print(const cJSON *j, FILE *f)
{
	int e;

	if (!is_block(j)) {
		e = scalar(j, f);
		if (!e)
			fputc('\n', f);
		return e;
	}
	return block(j, 0, false, f);
}

struct cli_view cli_view_of(const struct cli *c)
{
	return (struct cli_view){.wide = c->output == CLI_OUTPUT_WIDE,
				 .no_headers = c->no_headers};
}

bool cli_output_document(const struct cli *c)
{
	return c->output == CLI_OUTPUT_JSON || c->output == CLI_OUTPUT_YAML;
}

int cli_print_document(const struct cli *c, const cJSON *j)
{
	return c->output == CLI_OUTPUT_YAML ? cli_yaml_print(j, stdout) : cli_json_print(j, stdout);
}

int cli_output_reply(const struct cli *c, const cJSON *reply,
		     int (*render)(const cJSON *reply, const void *arg, const struct cli_view *v,
				   FILE *f),
		     const void *render_arg)
{
	struct cli_view v = cli_view_of(c);

	if (cli_output_document(c))
		return cli_print_document(c, reply);
	return render(reply, render_arg, &v, stdout);
}
