/*
 * The scheduler's arithmetic and parameters (cd-sched.h): pure, no clocks,
 * no I/O. cd-sched.c measures and acts; this decides.
 */
#include "cd-sched.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-size.h"

/* A page-in shorter than this tells nothing about the link (batch and fault costs dominate). */
#define BW_MIN_BYTES (64ull << 20)
#define BW_MIN_NS 1000000ull
/* Weight of a new bandwidth measure in the running estimate. */
#define BW_ALPHA 0.25

void cd_sched_config_defaults(struct cd_sched_config *c)
{
	c->enabled = true;
	c->tick_ms = 10;
	c->headroom_pct = 5;
	c->calm_ms = 2000;
	c->factor = 20;
	c->quantum_min_ms = 500;
	c->quantum_max_ms = 300000;
	c->bandwidth = 12000000000ull;
	c->idle_ms = 300;
	c->grace_ms = 2000;
	c->drain_quiet_ms = 50;
	c->fair_lead_ms = 1000;
	c->prefetch = CD_SCHED_PREFETCH_AUTO;
}

__attribute__((format(printf, 4, 5))) static int refuse(char *why, size_t len, const char *value,
							const char *fmt, ...)
{
	int n = snprintf(why, len, "\"%.80s\": ", value);
	va_list ap;

	if (n > 0 && (size_t)n < len) {
		va_start(ap, fmt);
		vsnprintf(why + n, len - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* A duration key within [lo, hi] ms into *out. */
static int duration(const char *value, unsigned lo, unsigned hi, unsigned *out, char *why,
		    size_t len)
{
	uint64_t ms;

	if (cs_duration_parse(value, &ms) != 0 || ms < lo || ms > hi)
		return refuse(why, len, value, "expected a duration from %ums to %ums: %s", lo, hi,
			      CS_DURATION_FORMS);
	*out = (unsigned)ms;
	return 0;
}

/* A whole number within [lo, hi] into *out. */
static int number(const char *value, unsigned lo, unsigned hi, unsigned *out, char *why, size_t len)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(value, &end, 10);
	if (!*value || *value == '-' || *value == '+' || *end || errno || v < lo || v > hi)
		return refuse(why, len, value, "expected a whole number from %u to %u", lo, hi);
	*out = (unsigned)v;
	return 0;
}

int cd_sched_config_set(struct cd_sched_config *c, const char *key, const char *value, char *why,
			size_t whylen)
{
	if (strcmp(key, "sched") == 0) {
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return refuse(why, whylen, value, "expected on or off");
		c->enabled = value[1] == 'n';
		return 0;
	}
	if (strcmp(key, "sched_tick") == 0)
		return duration(value, 1, 1000, &c->tick_ms, why, whylen);
	if (strcmp(key, "sched_headroom") == 0) {
		char v[16];
		size_t n = strlen(value);

		/* "5" or "5%" */
		if (n == 0 || n >= sizeof(v))
			return refuse(why, whylen, value, "expected a percentage from 0 to 40");
		memcpy(v, value, n + 1);
		if (v[n - 1] == '%')
			v[n - 1] = '\0';
		if (number(v, 0, 40, &c->headroom_pct, why, whylen) != 0)
			return refuse(why, whylen, value,
				      "expected a percentage from 0 to 40 (e.g. 5 or 5%%)");
		return 0;
	}
	if (strcmp(key, "sched_calm") == 0)
		return duration(value, 0, 600000, &c->calm_ms, why, whylen);
	if (strcmp(key, "sched_quantum_factor") == 0)
		return number(value, 1, 1000, &c->factor, why, whylen);
	if (strcmp(key, "sched_quantum_min") == 0)
		return duration(value, 10, 3600000, &c->quantum_min_ms, why, whylen);
	if (strcmp(key, "sched_quantum_max") == 0)
		return duration(value, 10, 3600000, &c->quantum_max_ms, why, whylen);
	if (strcmp(key, "sched_bandwidth") == 0) {
		uint64_t b;

		if (cs_size_parse(value, &b) != 0 || b < (1ull << 20) || b > (1ull << 50))
			return refuse(why, whylen, value,
				      "expected bytes per second from 1MiB to 1PiB, e.g. 12GB, "
				      "25GiB");
		c->bandwidth = b;
		return 0;
	}
	if (strcmp(key, "sched_idle") == 0)
		return duration(value, 10, 600000, &c->idle_ms, why, whylen);
	if (strcmp(key, "sched_grace") == 0)
		return duration(value, 0, 3600000, &c->grace_ms, why, whylen);
	if (strcmp(key, "sched_drain_quiet") == 0)
		return duration(value, 1, 60000, &c->drain_quiet_ms, why, whylen);
	if (strcmp(key, "sched_fair_lead") == 0)
		return duration(value, 0, 3600000, &c->fair_lead_ms, why, whylen);
	if (strcmp(key, "sched_prefetch") == 0) {
		for (unsigned m = 0; m <= CD_SCHED_PREFETCH_OFF; m++)
			if (strcmp(value, cd_sched_prefetch_mode_name(m)) == 0) {
				c->prefetch = m;
				return 0;
			}
		return refuse(why, whylen, value, "expected auto, on or off");
	}
	return -ENOENT;
}

bool cd_sched_over(uint64_t sum, uint64_t total, unsigned headroom_pct, bool serialized)
{
	unsigned h = headroom_pct > 40 ? 40 : headroom_pct;
	/* 128-bit products: a GPU of 2^40 bytes times 100 does not overflow 64 bits, but be exact.
	 */
	unsigned __int128 s = (unsigned __int128)sum * 100;

	if (!serialized)
		return s > (unsigned __int128)total * (100 - h);
	return s > (unsigned __int128)total * (100 - 2 * h);
}

uint64_t cd_sched_quantum_ns(const struct cd_sched_config *c, uint64_t page_in, double bw)
{
	double ns = bw > 0 ? (double)c->factor * (double)page_in / bw * 1e9 : 0;
	double lo = (double)c->quantum_min_ms * 1e6, hi = (double)c->quantum_max_ms * 1e6;

	if (hi < lo)
		hi = lo;
	if (!(ns >= lo)) /* also NaN */
		ns = lo;
	if (ns > hi)
		ns = hi;
	return (uint64_t)ns;
}

bool cd_sched_turn_over(const struct cd_sched_config *c, uint64_t held_ns, uint64_t quantum_ns,
			double lead_ns, uint64_t serialized_ns)
{
	double lead = (double)c->fair_lead_ms * 1e6, ramp;

	if (held_ns >= quantum_ns)
		return true;
	if (!c->fair_lead_ms || held_ns < (uint64_t)c->quantum_min_ms * 1000000ull)
		return false;
	if (serialized_ns < CD_SCHED_FAIR_WINDOW_NS) {
		ramp = (double)quantum_ns *
		       (1.0 - (double)serialized_ns / (double)CD_SCHED_FAIR_WINDOW_NS);
		if (ramp > lead)
			lead = ramp;
	}
	return lead_ns >= lead;
}

int cd_sched_pick(const struct cd_sched_want *v, unsigned n)
{
	int best = -1;

	for (unsigned i = 0; i < n; i++) {
		double a, b;

		if (!v[i].wants)
			continue;
		if (best < 0) {
			best = (int)i;
			continue;
		}
		a = (double)v[i].served_ns / (v[i].weight ? v[i].weight : 1);
		b = (double)v[best].served_ns / (v[best].weight ? v[best].weight : 1);
		if (a < b || (a == b && v[i].waiting_since_ns < v[best].waiting_since_ns))
			best = (int)i;
	}
	return best;
}

bool cd_sched_bandwidth_measurable(uint64_t bytes, uint64_t ns)
{
	return bytes >= BW_MIN_BYTES && ns >= BW_MIN_NS;
}

double cd_sched_bandwidth(double bw, uint64_t bytes, uint64_t ns)
{
	double m;

	if (!cd_sched_bandwidth_measurable(bytes, ns))
		return bw;
	m = (double)bytes * 1e9 / (double)ns;
	return bw > 0 ? bw + BW_ALPHA * (m - bw) : m;
}

bool cd_sched_prefetch_decide(unsigned mode, struct cd_sched_pf *pf)
{
	unsigned every = CD_SCHED_PF_PROBE_EVERY << (pf->fault_misses < 3 ? pf->fault_misses : 3);
	bool preferred;

	if (mode == CD_SCHED_PREFETCH_ON)
		return true;
	if (mode != CD_SCHED_PREFETCH_AUTO)
		return false;
	/* Nothing known of its prefetches: prefetch (the way a real GPU's link is used best). */
	if (!(pf->prefetch_bw > 0))
		return true;
	if (pf->fault_bw > 0) {
		preferred = pf->prefetch_bw > pf->fault_bw;
		every = CD_SCHED_PF_PROBE_EVERY;
	} else {
		preferred = true;
	}
	if (++pf->since_probe < every)
		return preferred;
	pf->since_probe = 0;
	return !preferred;
}

#define NAME_OF(list, i)                                                                           \
	do {                                                                                       \
		static const char *const names[] = {list(NAME_ENTRY)};                             \
                                                                                                   \
		return (i) < sizeof(names) / sizeof(names[0]) ? names[i] : "?";                    \
	} while (0)
#define NAME_ENTRY(id, name) name,

const char *cd_sched_prefetch_mode_name(unsigned mode)
{
	NAME_OF(CD_SCHED_PREFETCH_MODES, mode);
}

const char *cd_sched_mode_name(unsigned mode)
{
	NAME_OF(CD_SCHED_MODES, mode);
}

const char *cd_sched_state_name(unsigned state)
{
	static const char *const names[] = {"free",	"holder",  "queued",
					    "draining", "revoked", "waiting"};

	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "?";
}
