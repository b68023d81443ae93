/*
 * Unit tests of src/ipc/cs-ipc.c, the libcuslice <-> cusliced wire protocol:
 * every message type survives encode -> decode unchanged; every malformation
 * is -EPROTO as soon as the bytes that prove it have arrived; every proper
 * prefix of a valid message is 0 ("need more"); messages that arrive back to
 * back decode one at a time.
 *
 * Inputs are decoded from heap copies of exactly the length passed, so
 * AddressSanitizer turns any read past `len` into a failure.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cs-group.h"
#include "cs-ipc.h"

#define MAX_MSG (CS_IPC_HEADER + CS_IPC_MAX_BODY)

/* Offsets of the header fields (cuslice/ipc.h: magic | type | flags | length | seq). */
#define OFF_TYPE 4
#define OFF_FLAGS 6
#define OFF_LENGTH 8
#define OFF_SEQ 12

/* One encoded message of each type, rebuilt by every test. */
struct sample {
	enum cs_ipc_type type;
	size_t len;
	unsigned char buf[MAX_MSG];
};

static const enum cs_ipc_type all_types[] = {
	CS_IPC_REGISTER, CS_IPC_REGISTERED, CS_IPC_DENIED, CS_IPC_PING, CS_IPC_PONG,
};
#define NTYPES (sizeof(all_types) / sizeof(all_types[0]))

/* The body of any type, as cs_ipc_encode takes it. */
union body {
	struct cs_ipc_register reg;
	struct cs_ipc_registered ok;
	struct cs_ipc_denied denied;
	struct cs_ipc_ping ping;
};

/* A plausible body of each type: every field set, text fields NUL-padded. */
static void sample_body(enum cs_ipc_type type, union body *b)
{
	memset(b, 0, sizeof(*b));
	switch (type) {
	case CS_IPC_REGISTER:
		b->reg.version = CS_IPC_VERSION;
		strcpy(b->reg.group, "train-a");
		strcpy(b->reg.token, "s3cr3t-token");
		break;
	case CS_IPC_REGISTERED:
		b->ok.version = CS_IPC_VERSION;
		b->ok.flags = CS_IPC_MANAGED | CS_IPC_REQUIRED;
		b->ok.slot = 17;
		strcpy(b->ok.group, "train-a");
		break;
	case CS_IPC_DENIED:
		b->denied.code = EPERM;
		strcpy(b->denied.reason, "group train-a: pid 42 (uid 1000, cgroup /x) is not a member");
		break;
	case CS_IPC_PING:
	case CS_IPC_PONG:
		b->ping.nonce = 0x0123456789abcdefull;
		break;
	}
}

static void sample_make(struct sample *s, enum cs_ipc_type type, uint32_t seq)
{
	union body b;

	sample_body(type, &b);
	s->type = type;
	s->len = cs_ipc_encode(type, seq, &b, s->buf, sizeof(s->buf));
	assert_int_equal(s->len, CS_IPC_HEADER + cs_ipc_body_size(type));
}

/* Decodes buf[0..len) from a heap copy of exactly len bytes (ASan guards the end). */
static long decode_exact(const void *buf, size_t len, struct cs_ipc_msg *msg)
{
	unsigned char *copy = malloc(len ? len : 1);
	long r;

	assert_non_null(copy);
	memcpy(copy, buf, len);
	r = cs_ipc_decode(copy, len, msg);
	free(copy);
	return r;
}

/* Asserts buf[0..len) is malformed, with a message naming the case. */
static void expect_eproto(const void *buf, size_t len, const char *what)
{
	struct cs_ipc_msg msg;
	long r = decode_exact(buf, len, &msg);

	if (r != -EPROTO)
		print_error("%s (len %zu): decode = %ld, expected -EPROTO\n", what, len, r);
	assert_int_equal(r, -EPROTO);
}

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- sizes and encoding ---- */

static void test_ipc_body_sizes(void **state)
{
	(void)state;
	assert_int_equal(cs_ipc_body_size(CS_IPC_REGISTER), 200);
	assert_int_equal(cs_ipc_body_size(CS_IPC_REGISTERED), 80);
	assert_int_equal(cs_ipc_body_size(CS_IPC_DENIED), 264);
	assert_int_equal(cs_ipc_body_size(CS_IPC_PING), 8);
	assert_int_equal(cs_ipc_body_size(CS_IPC_PONG), 8);
	assert_int_equal(cs_ipc_body_size(0), 0);
	assert_int_equal(cs_ipc_body_size(6), 0);
	assert_int_equal(cs_ipc_body_size(0xffff), 0);
	assert_int_equal(cs_ipc_body_size(0x10001), 0);
	assert_int_equal(cs_ipc_body_size(UINT32_MAX), 0);
	for (size_t i = 0; i < NTYPES; i++)
		assert_true(cs_ipc_body_size(all_types[i]) <= CS_IPC_MAX_BODY);
}

/* The header is exactly what include/cuslice/ipc.h documents, little-endian. */
static void test_ipc_encode_header_layout(void **state)
{
	struct sample s;

	(void)state;
	sample_make(&s, CS_IPC_REGISTER, 0xa1b2c3d4u);
	assert_memory_equal(s.buf, "CSL1", 4);
	assert_int_equal(s.buf[OFF_TYPE], CS_IPC_REGISTER);
	assert_int_equal(s.buf[OFF_TYPE + 1], 0);
	assert_int_equal(s.buf[OFF_FLAGS], 0);
	assert_int_equal(s.buf[OFF_FLAGS + 1], 0);
	assert_int_equal(s.buf[OFF_LENGTH], 200);
	assert_int_equal(s.buf[OFF_LENGTH + 1], 0);
	assert_int_equal(s.buf[OFF_LENGTH + 2], 0);
	assert_int_equal(s.buf[OFF_LENGTH + 3], 0);
	assert_int_equal(s.buf[OFF_SEQ], 0xd4);
	assert_int_equal(s.buf[OFF_SEQ + 1], 0xc3);
	assert_int_equal(s.buf[OFF_SEQ + 2], 0xb2);
	assert_int_equal(s.buf[OFF_SEQ + 3], 0xa1);
}

/* A buffer one byte short, or an unknown type, encodes nothing and writes nothing. */
static void test_ipc_encode_refuses(void **state)
{
	unsigned char buf[MAX_MSG + 16];
	union body b;

	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		size_t need = CS_IPC_HEADER + cs_ipc_body_size(all_types[i]);

		sample_body(all_types[i], &b);
		memset(buf, 0xee, sizeof(buf));
		assert_int_equal(cs_ipc_encode(all_types[i], 1, &b, buf, need - 1), 0);
		assert_int_equal(cs_ipc_encode(all_types[i], 1, &b, buf, 0), 0);
		for (size_t k = 0; k < sizeof(buf); k++)
			assert_int_equal(buf[k], 0xee);
		assert_int_equal(cs_ipc_encode(all_types[i], 1, &b, buf, need), need);
	}
	memset(&b, 0, sizeof(b));
	assert_int_equal(cs_ipc_encode((enum cs_ipc_type)0, 1, &b, buf, sizeof(buf)), 0);
	assert_int_equal(cs_ipc_encode((enum cs_ipc_type)6, 1, &b, buf, sizeof(buf)), 0);
	assert_int_equal(cs_ipc_encode((enum cs_ipc_type)0xffff, 1, &b, buf, sizeof(buf)), 0);
}

/* ---- round trips ---- */

/* Every type: decode(encode(x)) == x, header and body byte for byte. */
static void test_ipc_round_trip_every_type(void **state)
{
	static const uint32_t seqs[] = {0, 1, 0x7fffffffu, UINT32_MAX};

	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		for (size_t k = 0; k < sizeof(seqs) / sizeof(seqs[0]); k++) {
			struct cs_ipc_msg msg;
			struct sample s;
			union body b;
			long r;

			sample_body(all_types[i], &b);
			sample_make(&s, all_types[i], seqs[k]);
			memset(&msg, 0xa5, sizeof(msg));
			r = decode_exact(s.buf, s.len, &msg);
			assert_int_equal(r, (long)s.len);
			assert_int_equal(msg.h.type, all_types[i]);
			assert_int_equal(msg.h.flags, 0);
			assert_int_equal(msg.h.length, cs_ipc_body_size(all_types[i]));
			assert_int_equal(msg.h.seq, seqs[k]);
			assert_memory_equal(&msg.u, &b, msg.h.length);
		}
	}
}

/* The field values the daemon and the library act on come back as sent. */
static void test_ipc_round_trip_fields(void **state)
{
	unsigned char buf[MAX_MSG];
	struct cs_ipc_register reg = {.version = CS_IPC_VERSION};
	struct cs_ipc_registered ok = {.version = CS_IPC_VERSION, .flags = CS_IPC_MANAGED};
	struct cs_ipc_denied den = {.code = EACCES};
	struct cs_ipc_ping ping = {.nonce = UINT64_MAX};
	struct cs_ipc_msg msg;
	size_t n;

	(void)state;
	/* Empty group: "let the daemon decide"; empty token: none. */
	n = cs_ipc_encode(CS_IPC_REGISTER, 7, &reg, buf, sizeof(buf));
	assert_int_equal(decode_exact(buf, n, &msg), (long)n);
	assert_int_equal(msg.u.reg.version, CS_IPC_VERSION);
	assert_string_equal(msg.u.reg.group, "");
	assert_string_equal(msg.u.reg.token, "");

	/* The longest valid name and token. */
	memset(reg.group, 'g', CS_IPC_NAME - 1);
	memset(reg.token, 't', CS_IPC_TOKEN - 1);
	n = cs_ipc_encode(CS_IPC_REGISTER, 8, &reg, buf, sizeof(buf));
	assert_int_equal(decode_exact(buf, n, &msg), (long)n);
	assert_int_equal(strlen(msg.u.reg.group), CS_IPC_NAME - 1);
	assert_int_equal(strlen(msg.u.reg.token), CS_IPC_TOKEN - 1);

	strcpy(ok.group, "A.b_c-9");
	ok.slot = CS_GROUP_MAX_PROCS - 1;	/* the last slot */
	n = cs_ipc_encode(CS_IPC_REGISTERED, 9, &ok, buf, sizeof(buf));
	assert_int_equal(decode_exact(buf, n, &msg), (long)n);
	assert_int_equal(msg.u.ok.flags, CS_IPC_MANAGED);
	assert_string_equal(msg.u.ok.group, "A.b_c-9");
	assert_int_equal(msg.u.ok.slot, CS_GROUP_MAX_PROCS - 1);

	/* An empty reason is still a reason field with its NUL. */
	n = cs_ipc_encode(CS_IPC_DENIED, 10, &den, buf, sizeof(buf));
	assert_int_equal(decode_exact(buf, n, &msg), (long)n);
	assert_int_equal(msg.u.denied.code, EACCES);
	assert_string_equal(msg.u.denied.reason, "");

	n = cs_ipc_encode(CS_IPC_PONG, 11, &ping, buf, sizeof(buf));
	assert_int_equal(decode_exact(buf, n, &msg), (long)n);
	assert_int_equal(msg.h.type, CS_IPC_PONG);
	assert_int_equal(msg.u.ping.nonce, UINT64_MAX);
}

/* ---- malformations ---- */

/*
 * A wrong magic byte is reported as soon as it arrives, whatever follows:
 * a peer speaking another protocol is cut off at its first byte.
 */
static void test_ipc_bad_magic_any_prefix(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		struct sample s;

		sample_make(&s, all_types[i], 1);
		for (size_t pos = 0; pos < 4; pos++) {
			for (unsigned v = 0; v < 256; v++) {
				unsigned char bad[MAX_MSG];

				if (v == (unsigned char)CS_IPC_MAGIC[pos])
					continue;
				memcpy(bad, s.buf, s.len);
				bad[pos] = (unsigned char)v;
				/* Before the wrong byte: still a valid prefix. */
				for (size_t len = 0; len <= pos; len++) {
					struct cs_ipc_msg msg;

					assert_int_equal(decode_exact(bad, len, &msg), 0);
				}
				for (size_t len = pos + 1; len <= s.len; len++)
					expect_eproto(bad, len, "bad magic");
			}
		}
	}
	/* HTTP on the same socket is never taken for IPC. */
	expect_eproto("GET /v1/status HTTP/1.1\r\n\r\n", 27, "HTTP request");
	expect_eproto("CSL2", 4, "other protocol version");
	expect_eproto("csl1", 1, "lower case magic");
}

/* Rewrites header field bytes of a copy of s and expects -EPROTO from the header on. */
static void expect_bad_header(const struct sample *s, size_t off, uint32_t value, size_t width,
			      const char *what)
{
	unsigned char bad[MAX_MSG];

	memcpy(bad, s->buf, s->len);
	if (width == 2)
		put16(bad + off, (uint16_t)value);
	else
		put32(bad + off, value);
	/* Before the header is complete nothing is known to be wrong. */
	for (size_t len = 0; len < CS_IPC_HEADER; len++) {
		struct cs_ipc_msg msg;

		assert_int_equal(decode_exact(bad, len, &msg), 0);
	}
	/* From the whole header on, without waiting for a body. */
	for (size_t len = CS_IPC_HEADER; len <= s->len; len++)
		expect_eproto(bad, len, what);
}

static void test_ipc_wrong_type(void **state)
{
	static const uint32_t bad_types[] = {0, 6, 7, 0x100, 0x101, 0x8001, 0xffff};

	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		struct sample s;

		sample_make(&s, all_types[i], 1);
		for (size_t k = 0; k < sizeof(bad_types) / sizeof(bad_types[0]); k++)
			expect_bad_header(&s, OFF_TYPE, bad_types[k], 2, "unknown type");
	}
}

/* A known type with another type's length is wrong too (the length is the type's). */
static void test_ipc_type_length_mismatch(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		struct sample s;

		sample_make(&s, all_types[i], 1);
		for (size_t k = 0; k < NTYPES; k++) {
			if (cs_ipc_body_size(all_types[k]) == cs_ipc_body_size(all_types[i]))
				continue;
			expect_bad_header(&s, OFF_TYPE, all_types[k], 2, "type of another length");
		}
	}
}

static void test_ipc_flags_nonzero(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		struct sample s;

		sample_make(&s, all_types[i], 1);
		for (unsigned bit = 0; bit < 16; bit++)
			expect_bad_header(&s, OFF_FLAGS, 1u << bit, 2, "flags bit");
		expect_bad_header(&s, OFF_FLAGS, 0xffff, 2, "flags all ones");
	}
}

static void test_ipc_wrong_length(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		uint32_t want = (uint32_t)cs_ipc_body_size(all_types[i]);
		const uint32_t lengths[] = {0, 1, want - 1, want + 1, want * 2, 200, 264, 328, 8};
		struct sample s;

		sample_make(&s, all_types[i], 1);
		for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
			if (lengths[k] != want)
				expect_bad_header(&s, OFF_LENGTH, lengths[k], 4, "wrong length");
		}
	}
}

/*
 * A length beyond CS_IPC_MAX_BODY is refused from the header alone: a
 * receiver never waits for (or buffers) a body it will not accept.
 */
static void test_ipc_length_over_max(void **state)
{
	static const uint32_t lengths[] = {
		CS_IPC_MAX_BODY + 1, 4096, 65536, 0x7fffffffu, 0x80000000u, UINT32_MAX,
	};

	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		struct sample s;

		sample_make(&s, all_types[i], 1);
		for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++)
			expect_bad_header(&s, OFF_LENGTH, lengths[k], 4, "length over max");
	}
}

/*
 * Fills field [off, off + size) of message s's body with `fill` and no NUL;
 * the message is malformed once the whole body is there.
 */
static void expect_unterminated(enum cs_ipc_type type, size_t off, size_t size, char fill,
				const char *what)
{
	unsigned char bad[MAX_MSG];
	struct cs_ipc_msg msg;
	struct sample s;

	sample_make(&s, type, 1);
	memcpy(bad, s.buf, s.len);
	memset(bad + CS_IPC_HEADER + off, fill, size);
	/* A body still arriving may yet be fine. */
	for (size_t len = 0; len < s.len; len++)
		assert_int_equal(decode_exact(bad, len, &msg), 0);
	expect_eproto(bad, s.len, what);
	/* The same field with a NUL in its last byte is accepted. */
	bad[CS_IPC_HEADER + off + size - 1] = '\0';
	assert_int_equal(decode_exact(bad, s.len, &msg), (long)s.len);
}

static void test_ipc_missing_nul(void **state)
{
	(void)state;
	expect_unterminated(CS_IPC_REGISTER, offsetof(struct cs_ipc_register, group), CS_IPC_NAME,
			    'g', "REGISTER.group without NUL");
	expect_unterminated(CS_IPC_REGISTER, offsetof(struct cs_ipc_register, token), CS_IPC_TOKEN,
			    't', "REGISTER.token without NUL");
	expect_unterminated(CS_IPC_REGISTERED, offsetof(struct cs_ipc_registered, group),
			    CS_IPC_NAME, 'g', "REGISTERED.group without NUL");
	expect_unterminated(CS_IPC_DENIED, offsetof(struct cs_ipc_denied, reason), CS_IPC_REASON,
			    'r', "DENIED.reason without NUL");
}

/* Encodes a REGISTER asking for `group` and expects -EPROTO (name invalid). */
static void expect_bad_register_group(const char *group)
{
	struct cs_ipc_register reg = {.version = CS_IPC_VERSION};
	unsigned char buf[MAX_MSG];
	char what[128];
	size_t n;

	strcpy(reg.group, group);
	n = cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
	assert_int_not_equal(n, 0);
	snprintf(what, sizeof(what), "REGISTER.group \"%s\"", group);
	expect_eproto(buf, n, what);
}

static void expect_bad_registered(const char *group, uint32_t slot, uint32_t priority)
{
	struct cs_ipc_registered ok = {.version = CS_IPC_VERSION, .slot = slot,
				       .priority = priority};
	unsigned char buf[MAX_MSG];
	char what[128];
	size_t n;

	strcpy(ok.group, group);
	n = cs_ipc_encode(CS_IPC_REGISTERED, 1, &ok, buf, sizeof(buf));
	assert_int_not_equal(n, 0);
	snprintf(what, sizeof(what), "REGISTERED \"%s\" slot %u priority %u", group, slot,
		 priority);
	expect_eproto(buf, n, what);
}

static void test_ipc_invalid_group_name(void **state)
{
	static const char *const bad[] = {
		".hidden", "-dash", "a b", "a/b", "../etc", "a\tb", "ä", "a:b", "a*", "a\\b",
		"a\x7f", "\x01",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		expect_bad_register_group(bad[i]);
		expect_bad_registered(bad[i], 0, 0);
	}
	/* The daemon always names the group it grants. */
	expect_bad_registered("", 0, 0);
	/* A slot the region does not have; a priority that is not one of enum cs_priority. */
	expect_bad_registered("ok", CS_GROUP_MAX_PROCS, 0);
	expect_bad_registered("ok", UINT32_MAX, 0);
	expect_bad_registered("ok", 0, CS_PRIORITY_COUNT);
	expect_bad_registered("ok", 0, UINT32_MAX);
}

/* ---- truncation and streams ---- */

/*
 * Every proper prefix of every valid message is "need more" (0), never an
 * error and never a read past the prefix (each is a heap copy of exactly
 * that many bytes).
 */
static void test_ipc_truncation_every_byte(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		struct sample s;

		sample_make(&s, all_types[i], 0xdeadbeefu);
		for (size_t len = 0; len < s.len; len++) {
			struct cs_ipc_msg msg;
			long r = decode_exact(s.buf, len, &msg);

			if (r != 0)
				print_error("type %d truncated to %zu: decode = %ld\n", s.type, len,
					    r);
			assert_int_equal(r, 0);
		}
		{
			struct cs_ipc_msg msg;

			assert_int_equal(decode_exact(s.buf, s.len, &msg), (long)s.len);
		}
	}
}

/* Two messages in one buffer: the first, then the rest; never both at once. */
static void test_ipc_back_to_back(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		for (size_t k = 0; k < NTYPES; k++) {
			unsigned char stream[2 * MAX_MSG];
			struct sample a, b;
			struct cs_ipc_msg msg;
			size_t total;

			sample_make(&a, all_types[i], 100);
			sample_make(&b, all_types[k], 101);
			memcpy(stream, a.buf, a.len);
			memcpy(stream + a.len, b.buf, b.len);
			total = a.len + b.len;

			/* The first message alone, whatever part of the second has arrived. */
			for (size_t len = a.len; len <= total; len++) {
				memset(&msg, 0, sizeof(msg));
				assert_int_equal(decode_exact(stream, len, &msg), (long)a.len);
				assert_int_equal(msg.h.type, all_types[i]);
				assert_int_equal(msg.h.seq, 100);
			}
			/* Then the second, from where the first ended. */
			for (size_t len = 0; len < b.len; len++)
				assert_int_equal(decode_exact(stream + a.len, len, &msg), 0);
			memset(&msg, 0, sizeof(msg));
			assert_int_equal(decode_exact(stream + a.len, b.len, &msg), (long)b.len);
			assert_int_equal(msg.h.type, all_types[k]);
			assert_int_equal(msg.h.seq, 101);
			assert_memory_equal(&msg.u, b.buf + CS_IPC_HEADER, msg.h.length);
		}
	}
}

/* A valid message followed by garbage: the message decodes; the garbage is refused next. */
static void test_ipc_message_then_garbage(void **state)
{
	unsigned char stream[MAX_MSG + 8];
	struct cs_ipc_msg msg;
	struct sample s;

	(void)state;
	sample_make(&s, CS_IPC_PING, 5);
	memcpy(stream, s.buf, s.len);
	memcpy(stream + s.len, "GARBAGE!", 8);
	assert_int_equal(decode_exact(stream, s.len + 8, &msg), (long)s.len);
	assert_int_equal(msg.h.type, CS_IPC_PING);
	expect_eproto(stream + s.len, 8, "garbage after a message");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipc_body_sizes),
		cmocka_unit_test(test_ipc_encode_header_layout),
		cmocka_unit_test(test_ipc_encode_refuses),
		cmocka_unit_test(test_ipc_round_trip_every_type),
		cmocka_unit_test(test_ipc_round_trip_fields),
		cmocka_unit_test(test_ipc_bad_magic_any_prefix),
		cmocka_unit_test(test_ipc_wrong_type),
		cmocka_unit_test(test_ipc_type_length_mismatch),
		cmocka_unit_test(test_ipc_flags_nonzero),
		cmocka_unit_test(test_ipc_wrong_length),
		cmocka_unit_test(test_ipc_length_over_max),
		cmocka_unit_test(test_ipc_missing_nul),
		cmocka_unit_test(test_ipc_invalid_group_name),
		cmocka_unit_test(test_ipc_truncation_every_byte),
		cmocka_unit_test(test_ipc_back_to_back),
		cmocka_unit_test(test_ipc_message_then_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
