/* Figures from a measured device-time series (see compute-bench.h). */
#include "compute-bench.h"

#include <math.h>
#include <stdlib.h>

unsigned cb_series_bucket_at(const struct cb_series *s, uint64_t t_ns)
{
	uint64_t k = (t_ns + CB_BUCKET_NS - 1) / CB_BUCKET_NS;

	return k > s->k0 ? (unsigned)(k - s->k0) : 0;
}

double cb_series_share(const struct cb_series *s, unsigned g, unsigned from, unsigned to)
{
	double busy = 0;

	if (to <= from)
		return 0;
	for (unsigned i = from; i < to && i < s->n; i++)
		busy += s->busy[g][i];
	return 100.0 * busy / ((double)(to - from) * (double)CB_BUCKET_NS);
}

/* ms from event_ns to the end of the window that starts at bucket w. */
static int end_ms(const struct cb_series *s, unsigned w, unsigned win, uint64_t event_ns)
{
	uint64_t end_ns = (s->k0 + w + win) * CB_BUCKET_NS;

	return (int)((end_ns - event_ns + 500000) / 1000000);
}

void cb_series_settle(const struct cb_series *s, unsigned g, uint64_t event_ns, unsigned horizon,
		      unsigned win, double lo, double hi, struct cb_settle *out)
{
	unsigned first = cb_series_bucket_at(s, event_ns), last, settled;

	out->first_ms = out->stay_ms = -1;
	if (horizon > s->n)
		horizon = s->n;
	if (first + win > horizon)
		return;
	last = horizon - win; /* the last window that fits */
	for (unsigned w = first; w <= last; w++) {
		double x = cb_series_share(s, g, w, w + win);

		if (x >= lo && x <= hi) {
			out->first_ms = end_ms(s, w, win, event_ns);
			break;
		}
	}
	/* Walk back from the last window while windows are in the band. */
	settled = last + 1;
	for (unsigned w = last + 1; w-- > first;) {
		double x = cb_series_share(s, g, w, w + win);

		if (x < lo || x > hi)
			break;
		settled = w;
	}
	if (settled <= last)
		out->stay_ms = end_ms(s, settled, win, event_ns);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double cb_series_spread(const struct cb_series *s, unsigned g, unsigned from, unsigned to,
			unsigned win, double target)
{
	static double dev[CB_MAX_BUCKETS];
	unsigned n = 0;

	for (unsigned w = from; w + win <= to && w + win <= s->n; w++)
		dev[n++] = fabs(cb_series_share(s, g, w, w + win) - target);
	if (n == 0)
		return 0;
	qsort(dev, n, sizeof(dev[0]), cmp_double);
	return dev[(n * 95 + 99) / 100 - 1];
}

struct cb_dist cb_series_dist(const struct cb_series *s, unsigned g, unsigned from, unsigned to,
			      unsigned win, double target)
{
	static double dev[CB_MAX_BUCKETS];
	struct cb_dist d = {0};
	unsigned n = 0;

	for (unsigned w = from; w + win <= to && w + win <= s->n; w++)
		dev[n++] = fabs(cb_series_share(s, g, w, w + win) - target);
	if (n == 0)
		return d;
	qsort(dev, n, sizeof(dev[0]), cmp_double);
	d.p50 = dev[(n * 50 + 99) / 100 - 1];
	d.p95 = dev[(n * 95 + 99) / 100 - 1];
	d.max = dev[n - 1];
	d.n = n;
	return d;
}

int cb_series_absorb(const struct cb_series *s, unsigned g, uint64_t event_ns, unsigned horizon,
		     unsigned win, double target, double p95)
{
	static double dev[CB_MAX_BUCKETS];
	unsigned first = cb_series_bucket_at(s, event_ns);

	if (horizon > s->n)
		horizon = s->n;
	for (unsigned from = first; from + win <= horizon; from++) {
		unsigned n = 0;

		for (unsigned w = from; w + win <= horizon; w++)
			dev[n++] = fabs(cb_series_share(s, g, w, w + win) - target);
		/* At least 10 windows to judge by. */
		if (n < 10)
			break;
		qsort(dev, n, sizeof(dev[0]), cmp_double);
		/* Shares are sums of ns: a window exactly at the goal is at it. */
		if (dev[(n * 95 + 99) / 100 - 1] <= p95 + 0.05)
			return from == first ? 0
					     : (int)(((s->k0 + from) * CB_BUCKET_NS - event_ns + 500000) /
						     1000000);
	}
	return -1;
}
