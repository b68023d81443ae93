/*
 * The driver's error log (CUDA 12.9+): cuLogsRegisterCallback,
 * cuLogsUnregisterCallback, cuLogsCurrent, cuLogsDumpToFile,
 * cuLogsDumpToMemory.
 *
 * cusim logs the failures it can explain better than an error code (an
 * image that does not load and why, an allocation that does not fit, a
 * kernel that faults: sim_log() callers) into a buffer of at most 25,600
 * bytes, as cuda.h bounds it; the oldest messages are dropped first, and a
 * dump then says so. Iterators are message sequence numbers. Callbacks are
 * called in the thread that logs, with no cusim lock held.
 */
#include "sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_BYTES 25600u
#define LOG_MSG_MAX 512u
#define LOG_CALLBACKS 16u

struct entry {
	unsigned seq;
	CUlogLevel level;
	char text[LOG_MSG_MAX];
	size_t len;
};

struct CUlogsCallbackEntry_st {
	CUlogsCallback fn;
	void *data;
	bool used;
};

static struct {
	pthread_mutex_t lock;
	struct entry ring[LOG_BYTES / 32];	/* at most this many messages (32 bytes at least each) */
	unsigned first, next;			/* sequence numbers: [first, next) are held */
	size_t bytes;				/* text bytes held */
	struct CUlogsCallbackEntry_st cbs[LOG_CALLBACKS];
} logs = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define RING (sizeof(logs.ring) / sizeof(logs.ring[0]))

void sim_log(CUlogLevel level, const char *fmt, ...)
{
	struct CUlogsCallbackEntry_st cbs[LOG_CALLBACKS];
	char text[LOG_MSG_MAX];
	struct entry *e;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	pthread_mutex_lock(&logs.lock);
	e = &logs.ring[logs.next % RING];
	if (logs.next - logs.first == RING) {
		logs.bytes -= e->len;
		logs.first++;
	}
	e->seq = logs.next++;
	e->level = level;
	memcpy(e->text, text, sizeof(text));
	e->len = strlen(text);
	logs.bytes += e->len + 1;
	while (logs.bytes > LOG_BYTES && logs.first < logs.next) {
		logs.bytes -= logs.ring[logs.first % RING].len + 1;
		logs.first++;
	}
	memcpy(cbs, logs.cbs, sizeof(cbs));
	pthread_mutex_unlock(&logs.lock);
	for (unsigned i = 0; i < LOG_CALLBACKS; i++)
		if (cbs[i].used)
			cbs[i].fn(cbs[i].data, level, text, strlen(text));
}

SIM_API CUresult cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData,
					CUlogsCallbackHandle *callback_out)
{
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	if (!callbackFunc)
		return r;
	pthread_mutex_lock(&logs.lock);
	for (unsigned i = 0; i < LOG_CALLBACKS; i++) {
		if (logs.cbs[i].used)
			continue;
		logs.cbs[i] = (struct CUlogsCallbackEntry_st){callbackFunc, userData, true};
		if (callback_out)
			*callback_out = &logs.cbs[i];
		r = CUDA_SUCCESS;
		break;
	}
	pthread_mutex_unlock(&logs.lock);
	return r == CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_API CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle callback)
{
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&logs.lock);
	for (unsigned i = 0; i < LOG_CALLBACKS; i++) {
		if (&logs.cbs[i] == callback && logs.cbs[i].used) {
			logs.cbs[i].used = false;
			r = CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&logs.lock);
	return r;
}

SIM_API CUresult cuLogsCurrent(CUlogIterator *iterator_out, unsigned int flags)
{
	if (!iterator_out || flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&logs.lock);
	*iterator_out = logs.next;
	pthread_mutex_unlock(&logs.lock);
	return CUDA_SUCCESS;
}

/*
 * Copies the messages from *it (NULL: all held) into out, newest last, each
 * followed by a newline, fitting `cap` bytes less the NUL: older ones are
 * left out first, with a note at the head when any were dropped. Advances
 * *it past what exists now. Returns the bytes written (without the NUL).
 */
static size_t collect(CUlogIterator *it, char *out, size_t cap)
{
	static const char trunc[] = "[cusim: older log messages were dropped]\n";
	unsigned from, to;
	size_t total = 0, len = 0;
	bool lost;

	pthread_mutex_lock(&logs.lock);
	from = it ? *it : logs.first;
	to = logs.next;
	lost = from < logs.first;
	if (lost)
		from = logs.first;
	/* Newest first, as many as fit with the note. */
	unsigned start = to;
	size_t room = cap ? cap - 1 : 0;
	while (start > from && total + logs.ring[(start - 1) % RING].len + 1 <= room) {
		total += logs.ring[(start - 1) % RING].len + 1;
		start--;
	}
	if (start > from)
		lost = true;
	if (lost && total + sizeof(trunc) - 1 > room) {
		while (start < to && total + sizeof(trunc) - 1 > room) {
			total -= logs.ring[start % RING].len + 1;
			start++;
		}
	}
	if (lost && total + sizeof(trunc) - 1 <= room) {
		memcpy(out, trunc, sizeof(trunc) - 1);
		len = sizeof(trunc) - 1;
	}
	for (unsigned s = start; s < to; s++) {
		const struct entry *e = &logs.ring[s % RING];

		memcpy(out + len, e->text, e->len);
		len += e->len;
		out[len++] = '\n';
	}
	if (cap)
		out[len] = '\0';
	if (it)
		*it = to;
	pthread_mutex_unlock(&logs.lock);
	return len;
}

SIM_API CUresult cuLogsDumpToMemory(CUlogIterator *iterator, char *buffer, size_t *size,
				    unsigned int flags)
{
	unsigned from;
	size_t n;

	if (!buffer || !size || flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&logs.lock);
	from = iterator ? *iterator : logs.first;
	n = logs.next > from ? logs.next - from : 0;
	pthread_mutex_unlock(&logs.lock);
	if (n == 0) {
		if (*size)
			buffer[0] = '\0';
		*size = 0;
		return CUDA_SUCCESS;
	}
	n = collect(iterator, buffer, *size);
	*size = n;
	/* cuda.h: a buffer too small for any message is an error. */
	return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuLogsDumpToFile(CUlogIterator *iterator, const char *pathToFile,
				  unsigned int flags)
{
	char *buf;
	size_t n;
	FILE *f;

	if (!pathToFile || flags)
		return CUDA_ERROR_INVALID_VALUE;
	buf = malloc(LOG_BYTES + 64);
	if (!buf)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n = collect(iterator, buf, LOG_BYTES + 64);
	f = fopen(pathToFile, "we");
	if (!f) {
		free(buf);
		return CUDA_ERROR_INVALID_VALUE;
	}
	fwrite(buf, 1, n, f);
	free(buf);
	return fclose(f) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
