/*
 * libFuzzer target: cd_policy_parse (src/daemon/cd-policy.c), the JSON
 * policy of a group as PUT /v1/groups/NAME receives it from any authorized
 * peer, and as policy.json holds it across restarts.
 *
 * Checks, besides ASan/UBSan:
 *   - the result is 0 or -EINVAL;
 *   - failure: a non-empty one-line message, the policy passed in untouched;
 *   - success: the policy survives its own JSON form (cd_policy_to_json, as
 *     persisted): parsing that text again succeeds and renders the same
 *     text; what it gives a few GPUs resolves without fault.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cd-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const char *json, size_t len, const char *detail)
{
	fprintf(stderr, "fuzz-policy: %s (%s) on: %.*s\n", what, detail, (int)len, json);
	abort();
}

static void check_accepted(const struct cd_policy *p, const char *json, size_t len)
{
	static const char *const uuids[] = {NULL, "GPU-00000000-0000-0000-0000-000000000000",
					     "GPU-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"};
	static struct cd_policy again;
	char *text = cd_policy_to_json(p), *text2;
	char err[512];

	if (!text)
		return;		/* out of memory: nothing to compare */
	cd_policy_init(&again, p->name);
	if (cd_policy_parse(&again, text, strlen(text), err, sizeof(err)) != 0)
		broken("the policy's own JSON is refused", json, len, err);
	text2 = cd_policy_to_json(&again);
	if (text2 && strcmp(text, text2) != 0)
		broken("the policy changes through its own JSON", json, len, text2);
	free(text2);
	free(text);
	for (int index = -1; index < 3; index++) {
		for (size_t u = 0; u < sizeof(uuids) / sizeof(uuids[0]); u++) {
			cd_policy_mem_limit(p, index, uuids[u], 80ull << 30);
			cd_policy_core_limit(p, index, uuids[u]);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cd_policy p, before;
	const char *json = (const char *)data;
	char err[512];
	int r;

	cd_policy_init(&p, "fuzz");
	before = p;
	/* Not NUL-terminated: the parser takes a length, as the HTTP body arrives. */
	r = cd_policy_parse(&p, json, size, err, sizeof(err));
	if (r != 0 && r != -EINVAL)
		broken("result neither 0 nor -EINVAL", json, size, "");
	if (r != 0) {
		if (!memchr(err, '\0', sizeof(err)) || !err[0] || strchr(err, '\n'))
			broken("message empty or not one line", json, size, err);
		if (memcmp(&p, &before, sizeof(p)) != 0)
			broken("a refused policy changed the policy", json, size, err);
		return 0;
	}
	check_accepted(&p, json, size);
	return 0;
}
