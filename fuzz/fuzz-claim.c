/*
 * libFuzzer target: dra_claim_parse (src/k8s/dra-claim.c), a ResourceClaim
 * as the API server sends it to the DRA driver, read as a cuslice group.
 *
 * Checks, besides ASan/UBSan:
 *   - the result is 0 or -EINVAL; failure leaves a non-empty one-line message;
 *   - success: at least one device, every GPU's memory within the GPU and its
 *     share within 100 %, the group named k8s-claim-<uid>;
 *   - the policy the driver would PUT (dra_claim_policy) is one cusliced
 *     accepts (cd_policy_parse): the driver never makes a group the daemon
 *     refuses, whatever the claim says.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cd-int.h"
#include "dra-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define UID "c1a10000-0000-4000-8000-000000000000"

static void broken(const char *what, const uint8_t *data, size_t size, const char *detail)
{
	fprintf(stderr, "fuzz-claim: %s (%s) on: %.*s\n", what, detail, (int)size, (const char *)data);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct k8s_gpu gpus[2] = {
	    {.index = 0, .uuid = "GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", .memory_total = 16ull << 30,
	     .healthy = true},
	    {.index = 1, .uuid = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", .memory_total = 80ull << 30,
	     .healthy = true}};
	static struct dra_claim c;
	static struct cd_policy p;
	struct k8s_common common;
	char err[1024] = "", perr[512];
	cJSON *j;
	char *policy;
	int r;

	if (size > 65536)
		return 0;
	j = cJSON_ParseWithLength((const char *)data, size);
	if (!j)
		return 0;
	memset(&common, 0, sizeof(common));
	common.preload = true;
	snprintf(common.on_violation, sizeof(common.on_violation), "report");
	r = dra_claim_parse(j, UID, "gpu.cuslice.io", "node-1", gpus, 2, &common, &c, err, sizeof(err));
	cJSON_Delete(j);
	if (r != 0) {
		if (r != -EINVAL || !err[0] || strchr(err, '\n'))
			broken("bad failure", data, size, err);
		return 0;
	}
	if (c.ndev == 0 || c.nuse == 0 || strcmp(c.group, "k8s-claim-" UID) != 0)
		broken("accepted an empty claim", data, size, c.group);
	for (unsigned i = 0; i < c.nuse; i++)
		if (c.use[i].core_ppm > 1000000 ||
		    c.use[i].memory > (strcmp(c.use[i].uuid, gpus[0].uuid) == 0 ? gpus[0].memory_total
										 : gpus[1].memory_total))
			broken("a share beyond its GPU", data, size, c.use[i].uuid);
	policy = dra_claim_policy(&c, &common);
	if (!policy)
		return 0; /* out of memory */
	cd_policy_init(&p, c.group);
	if (cd_policy_parse(&p, policy, strlen(policy), perr, sizeof(perr)) != 0)
		broken("cusliced refuses the driver's policy", (const uint8_t *)policy, strlen(policy),
		       perr);
	free(policy);
	return 0;
}
