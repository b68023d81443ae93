/* The compute controller's arithmetic (see cs-core-ctl.h). */
#include "cs-core-ctl.h"

#include <string.h>

#include "cs-group.h"

void cs_core_ctl_init(struct cs_core_ctl *c)
{
	memset(c, 0, sizeof(*c));
	/* Nobody else seen yet: a burst group starts with the whole device. */
	c->quiet_ns = CS_CORE_BURST_QUIET_NS;
}

/* ppm * ns / 1e6 without overflow for any dt below ~5 hours. */
static uint64_t share_of(uint32_t ppm, uint64_t ns)
{
	return (uint64_t)ppm * ns / CS_CORE_PPM;
}

static uint32_t rate_for(struct cs_core_ctl *c, uint32_t limit, uint32_t flags,
			 const struct cs_core_sample *s)
{
	if (s->others_ns)
		c->quiet_ns = 0;
	else if (c->quiet_ns < CS_CORE_BURST_QUIET_NS)
		c->quiet_ns += s->dt_ns;
	if ((flags & CS_CORE_BURST) && c->quiet_ns >= CS_CORE_BURST_QUIET_NS)
		return CS_CORE_PPM;
	return limit;
}

bool cs_core_ctl_tick(struct cs_core_ctl *c, uint32_t limit_ppm, uint32_t flags,
		      const struct cs_core_sample *s)
{
	uint64_t credit;

	if (limit_ppm > CS_CORE_PPM)
		limit_ppm = CS_CORE_PPM;
	c->rate_ppm = rate_for(c, limit_ppm, flags, s);
	c->allowed_ns += share_of(c->rate_ppm, s->dt_ns);
	c->consumed_ns += s->busy_ns;
	/*
	 * A fixed amount of device time, not a share of it: a group with a
	 * small share whose kernels wait behind another group's queued work
	 * must keep the allowance it accrued meanwhile, or it ends up below
	 * its share (measured: 8.5 % for 10 % beside a 90 % group).
	 */
	credit = CS_CORE_CREDIT_NS;
	if (c->allowed_ns > c->consumed_ns + credit)
		c->allowed_ns = c->consumed_ns + credit;
	return c->consumed_ns + s->pending_ns > c->allowed_ns;
}
