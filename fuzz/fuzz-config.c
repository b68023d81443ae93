/*
 * libFuzzer target: cd_config_parse_ini (src/daemon/cd-config.c), cusliced's
 * INI configuration file ([daemon] section), on arbitrary text.
 *
 * Checks, besides ASan/UBSan:
 *   - the result is 0 or -EINVAL, and the same text parses the same way twice;
 *   - failure: a non-empty one-line message, and the configuration passed in
 *     is left exactly as it was (a bad file applies nothing, not half);
 *   - success: every field within its documented bounds, strings terminated,
 *     paths absolute.
 * A token_file the text names is read when it is a regular file (the
 * parser's contract); run with stdin on /dev/null (fuzz/run.sh does).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cusliced.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const char *text, const char *err)
{
	fprintf(stderr, "fuzz-config: %s (message: \"%s\") on:\n%s\n", what, err, text);
	abort();
}

/* field[0..size) holds a NUL, and the string is empty or an absolute path. */
static bool path_ok(const char *field, size_t size, bool may_be_empty)
{
	if (!memchr(field, '\0', size))
		return false;
	return field[0] == '/' || (may_be_empty && field[0] == '\0');
}

static void check_config(const struct cd_config *c, const char *text)
{
	if (!path_ok(c->socket, sizeof(c->socket), false) ||
	    !path_ok(c->state_dir, sizeof(c->state_dir), false) ||
	    !path_ok(c->shm_dir, sizeof(c->shm_dir), false) ||
	    !path_ok(c->token_file, sizeof(c->token_file), true))
		broken("a path field is unterminated or relative", text, "");
	if (!memchr(c->socket_group, '\0', sizeof(c->socket_group)) ||
	    !memchr(c->metrics_listen, '\0', sizeof(c->metrics_listen)) ||
	    !memchr(c->token, '\0', sizeof(c->token)) || !c->metrics_listen[0])
		broken("a text field is unterminated or empty", text, "");
	if (c->n_allow_uids > 32 || c->n_allow_gids > 32)
		broken("more than 32 allowed ids", text, "");
	if (c->backstop_interval_ms < 100 || c->backstop_interval_ms > 3600000)
		broken("backstop_interval outside 100 ms .. 1 h", text, "");
	if (c->session_ttl_s > 86400)
		broken("session_ttl over 24 h", text, "");
	if (c->on_bypass < CS_POLICY_ACTION_REPORT || c->on_bypass > CS_POLICY_ACTION_KILL)
		broken("on_bypass not an action", text, "");
	if (c->log_level < 0 || c->log_level > 3)
		broken("log_level out of range", text, "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cd_config c, before, again;
	char err[512], err2[512];
	/* Exactly size + 1 bytes, so ASan sees any read past the NUL. */
	char *text = malloc(size + 1);
	int r, r2;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	cd_config_defaults(&c);
	before = c;
	again = c;
	r = cd_config_parse_ini(&c, text, err, sizeof(err));
	if (r != 0 && r != -EINVAL)
		broken("result neither 0 nor -EINVAL", text, err);
	r2 = cd_config_parse_ini(&again, text, err2, sizeof(err2));
	if (r2 != r || memcmp(&again, &c, sizeof(c)) != 0 || (r && strcmp(err, err2) != 0))
		broken("the same text parsed differently twice", text, err);
	if (r != 0) {
		if (!memchr(err, '\0', sizeof(err)) || !err[0] || strchr(err, '\n'))
			broken("message empty or not one line", text, err);
		if (memcmp(&c, &before, sizeof(c)) != 0)
			broken("a refused file changed the configuration", text, err);
		/* A tiny message buffer is safe and changes nothing about the answer. */
		if (cd_config_parse_ini(&again, text, err2, 8) != r || !memchr(err2, '\0', 8))
			broken("result depends on the message buffer", text, err);
	} else {
		check_config(&c, text);
	}
	free(text);
	return 0;
}
