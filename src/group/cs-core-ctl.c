/* The compute controller's arithmetic (see cs-core-ctl.h). */
#include "cs-core-ctl.h"

#include <string.h>

#include "cs-group.h"

void cs_core_ctl_init(struct cs_core_ctl *c)
{
	memset(c, 0, sizeof(*c));
}

/* ppm * ns / 1e6 without overflow for any dt below ~5 hours. */
static uint64_t share_of(uint32_t ppm, uint64_t ns)
{
	return (uint64_t)ppm * ns / CS_CORE_PPM;
}

static uint32_t rate_for(uint32_t limit, uint32_t flags, const struct cs_core_sample *s)
{
	uint64_t others;
	uint32_t idle;

	if (!(flags & CS_CORE_BURST))
		return limit;
	if (s->others_ns == 0)
		return CS_CORE_PPM;
	others = s->dt_ns ? s->others_ns * CS_CORE_PPM / s->dt_ns : CS_CORE_PPM;
	if (others + CS_CORE_BURST_MARGIN_PPM >= CS_CORE_PPM)
		return limit;
	idle = CS_CORE_PPM - (uint32_t)others - CS_CORE_BURST_MARGIN_PPM;
	return idle > limit ? idle : limit;
}

bool cs_core_ctl_tick(struct cs_core_ctl *c, uint32_t limit_ppm, uint32_t flags,
		      const struct cs_core_sample *s)
{
	uint64_t credit;

	if (limit_ppm > CS_CORE_PPM)
		limit_ppm = CS_CORE_PPM;
	c->rate_ppm = rate_for(limit_ppm, flags, s);
	c->allowed_ns += share_of(c->rate_ppm, s->dt_ns);
	c->consumed_ns += s->busy_ns;
	credit = share_of(c->rate_ppm, CS_CORE_CREDIT_NS);
	if (c->allowed_ns > c->consumed_ns + credit)
		c->allowed_ns = c->consumed_ns + credit;
	return c->consumed_ns > c->allowed_ns;
}
