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

uint32_t cs_core_ctl_rate(struct cs_core_ctl *c, uint32_t limit_ppm, uint32_t flags,
			  uint64_t dt_ns, uint64_t others_ns)
{
	if (limit_ppm > CS_CORE_PPM)
		limit_ppm = CS_CORE_PPM;
	if (others_ns)
		c->quiet_ns = 0;
	else if (c->quiet_ns < CS_CORE_BURST_QUIET_NS)
		c->quiet_ns += dt_ns;
	if ((flags & CS_CORE_BURST) && c->quiet_ns >= CS_CORE_BURST_QUIET_NS)
		c->rate_ppm = CS_CORE_PPM;
	else
		c->rate_ppm = limit_ppm;
	return c->rate_ppm;
}

void cs_core_ctl_earn(struct cs_core_ctl *c, uint32_t rate_ppm, uint64_t dt_ns)
{
	int64_t take;

	/* ppm * dt / 1e6 cannot overflow for any dt below ~5 hours. */
	if (dt_ns > 3600000000000ull)
		dt_ns = 3600000000000ull;
	if (c->spread_ns <= dt_ns) {
		take = c->pending_ns;
		c->spread_ns = 0;
	} else {
		take = (int64_t)((double)c->pending_ns * (double)dt_ns / (double)c->spread_ns);
		c->spread_ns -= dt_ns;
	}
	c->pending_ns -= take;
	c->allow_ns = (int64_t)((uint64_t)rate_ppm * dt_ns / CS_CORE_PPM) - take;
}

int64_t cs_core_ctl_credit(const struct cs_core_ctl *c, int64_t cur)
{
	int64_t cap = c->allow_ns > 0 ? c->allow_ns * CS_CORE_BUCKET_TICKS : 0, next;

	/* Unused beyond the bucket (or more than that: the rate fell, a wild write): lost. */
	if (cur > cap)
		cur = cap;
	if (cur < CS_CORE_DEBT_NS)
		cur = CS_CORE_DEBT_NS;
	/* |allow| stays far below 2^62: no overflow. */
	next = cur + c->allow_ns;
	if (next > cap)
		next = cap;
	return next < CS_CORE_DEBT_NS ? CS_CORE_DEBT_NS : next;
}

void cs_core_ctl_forgive(struct cs_core_ctl *c, int64_t debt_ns)
{
	if (debt_ns > 0)
		c->scheduled_ns -= debt_ns;
}

void cs_core_ctl_measured(struct cs_core_ctl *c, uint64_t measured_ns, int64_t charged_ns,
			  uint64_t period_ns)
{
	int64_t outstanding;
	double part;

	c->diff_ns += (int64_t)measured_ns - charged_ns;
	outstanding = c->diff_ns - c->scheduled_ns;
	/*
	 * A share of what is not corrected yet, as much as the sample's period
	 * is of the horizon: the difference also holds the work in flight
	 * (charged at launch, measured once it ran), which comes and goes
	 * between samples; correcting it sample by sample passed that jitter to
	 * the credit (100 ms windows 4 pp off instead of 2). Refunds, which give
	 * back what over-charged launches kept the group from using earlier,
	 * are spread ten times thinner: the limit is a ceiling, and a refund
	 * runs the group above it while it lasts.
	 */
	part = (double)period_ns /
	       (double)(outstanding > 0 ? CS_CORE_RECONCILE_NS : CS_CORE_REFUND_NS);
	outstanding = (int64_t)((double)outstanding * (part < 1 ? part : 1));
	c->scheduled_ns += outstanding;
	c->pending_ns += outstanding;
	c->spread_ns = period_ns;
}

void cs_core_ctl_forget(struct cs_core_ctl *c)
{
	c->scheduled_ns = c->diff_ns;
	c->pending_ns = 0;
	c->spread_ns = 0;
}

uint64_t cs_core_cost_add(struct cs_core_cost *e, uint64_t busy_ns, uint64_t launches,
			  uint64_t window_ns)
{
	/* exp(-window / tau) to first order, without libm: tau / (tau + window). */
	double keep = (double)CS_CORE_COST_TAU_NS / ((double)CS_CORE_COST_TAU_NS + (double)window_ns);
	double cost;

	e->busy_ns = e->busy_ns * keep + (double)busy_ns;
	e->launches = e->launches * keep + (double)launches;
	if (e->busy_ns <= 0) {
		/*
		 * Nothing showed yet (see the header): the launches made before
		 * this sample's window ran less than half a percent of the windows
		 * since. Those of this window may not have run yet: not counted.
		 */
		uint64_t before = e->unseen_launches;

		if (before)
			e->unseen_ns += window_ns;
		e->unseen_launches += launches;
		if (!before)
			return e->cost_ns;
		cost = (double)e->unseen_ns / 200.0 / (double)before;
	} else if (e->launches <= 0) {
		return e->cost_ns;
	} else {
		cost = e->busy_ns / e->launches;
	}
	if (cost < (double)CS_CORE_COST_MIN_NS)
		cost = (double)CS_CORE_COST_MIN_NS;
	if (cost > (double)CS_CORE_COST_MAX_NS)
		cost = (double)CS_CORE_COST_MAX_NS;
	e->cost_ns = (uint64_t)cost;
	return e->cost_ns;
}
