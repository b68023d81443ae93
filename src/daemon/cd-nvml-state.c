/*
 * NVML's life in the daemon: opened at start, and while it is down (no
 * driver yet, the driver still loading after a reboot, a library that does
 * not initialise) tried again with backoff, 1 s doubling to 5 minutes. Its
 * state is never silent: a warning and an "nvml_down" event when it is
 * down, an "nvml_up" event when it comes up, and the state in GET
 * /v1/status, /v1/healthz (status "degraded") and the metrics
 * (cuslice_nvml_up). While it is down the GPU statistics and the backstop
 * (bypass, over-quota) are off; registration and quotas in libcuslice are
 * not affected.
 */
#include "cd-int.h"

#include <stdio.h>
#include <string.h>

#include "cs-log.h"

/* Records a failed attempt (why) and when the next one comes. Lock NOT held. */
static void down(struct cusliced *d, const char *why, bool first)
{
	uint64_t wait = d->nvml_backoff_ms ? d->nvml_backoff_ms : CD_NVML_RETRY_FIRST_MS;
	bool changed;

	d->nvml_next_ms = cd_now_ms() + wait;
	d->nvml_backoff_ms = wait * 2 > CD_NVML_RETRY_MAX_MS ? CD_NVML_RETRY_MAX_MS : wait * 2;
	pthread_mutex_lock(&d->lock);
	changed = strcmp(d->nvml_state.reason, why) != 0;
	d->nvml_state.up = false;
	d->nvml_state.attempts++;
	d->nvml_state.next_try = cd_now_real() + (double)wait / 1000.0;
	if (first || changed) {
		snprintf(d->nvml_state.reason, sizeof(d->nvml_state.reason), "%s", why);
		d->nvml_state.since = cd_now_real();
		/* One event per distinct reason, not one per attempt. */
		cd_event(d, CS_EVENT_NVML_DOWN, "", 0,
			 "NVML is not available (%s): no GPU statistics and no backstop; "
			 "retrying with backoff",
			 why);
	}
	pthread_mutex_unlock(&d->lock);
	if (first || changed)
		cs_log(CS_LOG_WARN, CD_LOG,
		       "NVML is not available (%s): no GPU statistics, no enforcement backstop "
		       "until it is; retrying in %llu ms, then less often (at most every %u s)",
		       why, (unsigned long long)wait, CD_NVML_RETRY_MAX_MS / 1000);
	else
		cs_log(CS_LOG_DEBUG, CD_LOG, "NVML still not available (%s); next try in %llu ms",
		       why, (unsigned long long)wait);
}

static void up(struct cusliced *d, struct cd_nvml *n)
{
	unsigned attempts;

	d->nvml = n;
	d->nvml_backoff_ms = 0;
	pthread_mutex_lock(&d->lock);
	attempts = ++d->nvml_state.attempts;
	d->nvml_state.up = true;
	d->nvml_state.reason[0] = '\0';
	d->nvml_state.next_try = 0;
	d->nvml_state.since = cd_now_real();
	if (attempts > 1)
		cd_event(d, CS_EVENT_NVML_UP, "", 0, "NVML is up after %u attempts: backstop on",
			 attempts);
	pthread_mutex_unlock(&d->lock);
	if (attempts > 1)
		cs_log(CS_LOG_INFO, CD_LOG, "NVML is up after %u attempts: backstop on", attempts);
}

void cd_nvml_start(struct cusliced *d)
{
	char why[sizeof(d->nvml_state.reason)] = "";
	struct cd_nvml *n = cd_nvml_open(why, sizeof(why));

	if (n)
		up(d, n);
	else
		down(d, why, true);
}

void cd_nvml_retry(struct cusliced *d)
{
	char why[sizeof(d->nvml_state.reason)] = "";
	struct cd_nvml *n;

	if (d->nvml || cd_now_ms() < d->nvml_next_ms)
		return;
	n = cd_nvml_open(why, sizeof(why));
	if (n)
		up(d, n);
	else
		down(d, why, false);
}
