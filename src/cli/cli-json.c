/* Small accessors for the daemon's JSON: absent and null members read as "none". */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>

const char *cli_json_str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool cli_json_num(const cJSON *o, const char *key, double *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v))
		return false;
	*ret = v->valuedouble;
	return true;
}

const cJSON *cli_json_array(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsArray(v) ? v : NULL;
}

int cli_json_print(const cJSON *j, FILE *f)
{
	char *s = cJSON_Print(j);

	if (!s)
		return -ENOMEM;
	fprintf(f, "%s\n", s);
	cJSON_free(s);
	return 0;
}
