/*
 * libFuzzer target: the IPC decoder (src/ipc/cs-ipc.c) on arbitrary bytes,
 * read as a stream the way the daemon and libcuslice read a connection.
 *
 * Besides "no crash, no read past len" (ASan/UBSan), it checks the codec's
 * promises on every message it accepts:
 *   - decode returns -EPROTO, 0, or a length within the input;
 *   - re-encoding the decoded message gives back exactly the input bytes
 *     (bodies are raw structs, so nothing may be lost or normalized);
 *   - the re-encoded message decodes to the same length, and every proper
 *     prefix of it is "need more" (0).
 * A broken promise aborts, which libFuzzer reports as a crash.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSG (CS_IPC_HEADER + CS_IPC_MAX_BODY)

static void broken(const char *what, size_t off, long r)
{
	fprintf(stderr, "fuzz-ipc: %s (message at offset %zu, decode = %ld)\n", what, off, r);
	abort();
}

/* Checks one accepted message of length n at data[0..n). */
static void check_accepted(const uint8_t *data, size_t n, const struct cs_ipc_msg *msg,
			   size_t off)
{
	unsigned char buf[MAX_MSG];
	struct cs_ipc_msg again;
	size_t e;

	if (n != CS_IPC_HEADER + cs_ipc_body_size(msg->h.type) || msg->h.length + CS_IPC_HEADER != n)
		broken("accepted length is not the type's", off, (long)n);
	if (msg->h.flags != 0)
		broken("accepted nonzero flags", off, (long)n);
	e = cs_ipc_encode((enum cs_ipc_type)msg->h.type, msg->h.seq, &msg->u, buf, sizeof(buf));
	if (e != n || memcmp(buf, data, n) != 0)
		broken("re-encoding differs from the input", off, (long)e);
	if (cs_ipc_decode(buf, n, &again) != (long)n || memcmp(&again.h, &msg->h, sizeof(again.h)))
		broken("re-encoded message does not decode the same", off, (long)n);
	/* Prefixes: a few around the header boundary and the last byte suffice per input. */
	for (size_t len = 0; len < n; len = len < CS_IPC_HEADER + 1 ? len + 1 : len + 61) {
		long r = cs_ipc_decode(buf, len, &again);

		if (r != 0)
			broken("a proper prefix of a valid message is not 'need more'", off, r);
	}
	if (cs_ipc_decode(buf, n - 1, &again) != 0)
		broken("a message missing its last byte is not 'need more'", off, (long)n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	/* Consume messages until the stream is malformed or runs out, like a receiver. */
	while (off <= size) {
		struct cs_ipc_msg msg;
		long r = cs_ipc_decode(data + off, size - off, &msg);

		if (r == 0 || r == -EPROTO)
			break;
		if (r < 0 || (size_t)r > size - off)
			broken("decode result outside {-EPROTO, 0, 1..len}", off, r);
		check_accepted(data + off, (size_t)r, &msg, off);
		off += (size_t)r;
	}
	return 0;
}
