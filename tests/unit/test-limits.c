/* Unit tests of src/common/cs-limits.c: CUSLICE_MEM_LIMIT / CUSLICE_CORE_LIMIT parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cs-limits.h"

#define MEM "CUSLICE_MEM_LIMIT"
#define CORE "CUSLICE_CORE_LIMIT"
#define BOTH (CS_LIMIT_SIZES | CS_LIMIT_PERCENT)

#define UUID0 "GPU-1a2b3c4d-0000-1111-2222-333344445555"
#define UUID1 "GPU-1a2b9999-0000-1111-2222-333344445555"
#define UUID2 "GPU-ffee0000-0000-1111-2222-333344445555"
#define H100 81559347200ull

static struct cs_limits parse_ok(const char *text, unsigned flags)
{
	struct cs_limits l;
	char err[1024] = "";
	int r = cs_limits_parse(MEM, text, flags, &l, err, sizeof(err));

	if (r != 0)
		print_error("cs_limits_parse(\"%s\") = %d: %s\n", text, r, err);
	assert_int_equal(r, 0);
	assert_string_equal(l.var, MEM);
	return l;
}

/* A single value for every device: one default rule. */
static void expect_all_bytes(const char *text, uint64_t bytes)
{
	struct cs_limits l = parse_ok(text, BOTH);

	assert_int_equal(l.n, 1);
	assert_int_equal(l.rule[0].key, CS_LIMIT_KEY_ALL);
	assert_false(l.rule[0].percent);
	assert_int_equal(l.rule[0].bytes, bytes);
}

static void expect_all_ppm(const char *text, unsigned flags, uint32_t ppm)
{
	struct cs_limits l = parse_ok(text, flags);

	assert_int_equal(l.n, 1);
	assert_int_equal(l.rule[0].key, CS_LIMIT_KEY_ALL);
	assert_true(l.rule[0].percent);
	assert_int_equal(l.rule[0].ppm, ppm);
}

static uint64_t resolve(const struct cs_limits *l, int ordinal, const char *uuid, uint64_t total)
{
	struct cs_limit_device d = {.ordinal = ordinal, .uuid = uuid, .total = total};

	return cs_limits_resolve(l, &d);
}

/*
 * Asserts text fails with -EINVAL, leaves *out alone, and says, on one line,
 * the variable, the text, every string in `want` (the item, the reason) and
 * the accepted forms.
 */
static void expect_error(const char *var, const char *text, unsigned flags, const char *const *want)
{
	struct cs_limits l;
	char err[2048];
	int r;

	memset(&l, 0x5a, sizeof(l));
	memset(err, 'x', sizeof(err));
	r = cs_limits_parse(var, text, flags, &l, err, sizeof(err));
	if (r != -EINVAL)
		print_error("cs_limits_parse(\"%s\") = %d, expected -EINVAL\n",
			    text ? text : "(null)", r);
	assert_int_equal(r, -EINVAL);
	assert_int_equal(l.n, 0x5a5a5a5a);
	assert_non_null(memchr(err, '\0', sizeof(err)));
	assert_null(strchr(err, '\n'));
	assert_int_equal(strncmp(err, var, strlen(var)), 0);
	assert_non_null(strstr(err, "; accepted: "));
	for (; *want; want++)
		if (!strstr(err, *want))
			fail_msg("message for \"%s\" lacks \"%s\": %s", text ? text : "(null)",
				 *want, err);
}

#define EXPECT_ERROR(text, ...)                                                                    \
	expect_error(MEM, text, BOTH, (const char *const[]){__VA_ARGS__, NULL})

static void test_limits_single_size(void **state)
{
	(void)state;
	expect_all_bytes("8GiB", 8ull << 30);
	expect_all_bytes("512MiB", 512ull << 20);
	expect_all_bytes("1.5G", 1610612736ull);
	expect_all_bytes("4096", 4096);
	expect_all_bytes("40GB", 40000000000ull);
	expect_all_bytes("0", 0);
	expect_all_bytes("18446744073709551615", UINT64_MAX);
}

static void test_limits_single_percent(void **state)
{
	(void)state;
	expect_all_ppm("50%", BOTH, 500000);
	expect_all_ppm("12.5%", BOTH, 125000);
	expect_all_ppm("0%", BOTH, 0);
	expect_all_ppm("100%", BOTH, 1000000);
	expect_all_ppm("100.0000%", BOTH, 1000000);
	expect_all_ppm("0.0001%", BOTH, 1);
	expect_all_ppm("33.3333%", BOTH, 333333);
	expect_all_ppm("099.9%", BOTH, 999000);
	expect_all_ppm("7.25%", CS_LIMIT_PERCENT, 72500);
}

/* Oversubscription (CS_LIMIT_OVER): percentages past 100 %, up to 1000 %; saturated resolution. */
static void test_limits_over(void **state)
{
	static const char *const over[] = {"is more than 1000%", NULL};
	struct cs_limits l;

	(void)state;
	expect_all_ppm("150%", BOTH | CS_LIMIT_OVER, 1500000);
	expect_all_ppm("1000%", BOTH | CS_LIMIT_OVER, 10000000);
	expect_all_ppm("50%", BOTH | CS_LIMIT_OVER, 500000);
	l = parse_ok("150%", BOTH | CS_LIMIT_OVER);
	assert_int_equal(resolve(&l, 0, NULL, 8ull << 30), 12ull << 30);
	/* Beyond 64 bits: saturated, as 100 % of such a total is. */
	l = parse_ok("1000%", BOTH | CS_LIMIT_OVER);
	assert_int_equal(resolve(&l, 0, NULL, UINT64_MAX), UINT64_MAX);
	assert_int_equal(resolve(&l, 0, NULL, 1ull << 60), 10ull << 60);
	expect_error(MEM, "1000.0001%", BOTH | CS_LIMIT_OVER, over);
	expect_error(MEM, "99999999999999999999%", BOTH | CS_LIMIT_OVER, over);
	/* Without the flag, as ever. */
	EXPECT_ERROR("150%", "is more than 100%");
}

/* Core limits: percentages only, '%' optional. */
static void test_limits_percent_only(void **state)
{
	(void)state;
	expect_all_ppm("30", CS_LIMIT_PERCENT, 300000);
	expect_all_ppm("30%", CS_LIMIT_PERCENT, 300000);
	expect_all_ppm("12.5", CS_LIMIT_PERCENT, 125000);
	expect_all_ppm("100", CS_LIMIT_PERCENT, 1000000);

	struct cs_limits l = parse_ok("0=30,1=70%,20", CS_LIMIT_PERCENT);
	assert_int_equal(l.n, 3);
	assert_int_equal(resolve(&l, 0, NULL, 1000000), 300000);
	assert_int_equal(resolve(&l, 1, NULL, 1000000), 700000);
	assert_int_equal(resolve(&l, 2, NULL, 1000000), 200000);
}

static void test_limits_ordinal_list(void **state)
{
	struct cs_limits l = parse_ok("0=8GiB,1=4GiB", BOTH);

	(void)state;
	assert_int_equal(l.n, 2);
	assert_int_equal(l.rule[0].key, CS_LIMIT_KEY_ORDINAL);
	assert_int_equal(l.rule[0].ordinal, 0);
	assert_int_equal(l.rule[0].bytes, 8ull << 30);
	assert_int_equal(l.rule[1].key, CS_LIMIT_KEY_ORDINAL);
	assert_int_equal(l.rule[1].ordinal, 1);
	assert_int_equal(l.rule[1].bytes, 4ull << 30);
	assert_int_equal(resolve(&l, 0, UUID0, H100), 8ull << 30);
	assert_int_equal(resolve(&l, 1, UUID1, H100), 4ull << 30);
	assert_int_equal(resolve(&l, 2, UUID2, H100), CS_LIMIT_NONE);
	assert_int_equal(resolve(&l, -1, UUID0, H100), CS_LIMIT_NONE);

	l = parse_ok("1023=1G,7=25%", BOTH);
	assert_int_equal(l.rule[0].ordinal, 1023);
	assert_int_equal(resolve(&l, 7, NULL, 4000), 1000);
}

static void test_limits_uuid_keys(void **state)
{
	struct cs_limits l = parse_ok(UUID0 "=8GiB,GPU-ffee=25%,MIG-0a1b=1G", BOTH);

	(void)state;
	assert_int_equal(l.n, 3);
	assert_int_equal(l.rule[0].key, CS_LIMIT_KEY_UUID);
	assert_string_equal(l.rule[0].uuid, UUID0);
	assert_string_equal(l.rule[1].uuid, "GPU-ffee");
	assert_true(l.rule[1].percent);
	assert_string_equal(l.rule[2].uuid, "MIG-0a1b");
	assert_int_equal(resolve(&l, 0, UUID0, H100), 8ull << 30);
	assert_int_equal(resolve(&l, 5, UUID2, H100), H100 / 4);
	assert_int_equal(resolve(&l, 1, UUID1, H100), CS_LIMIT_NONE);
	assert_int_equal(resolve(&l, 0, NULL, H100), CS_LIMIT_NONE);
	assert_int_equal(resolve(&l, 3, "MIG-0a1b2c3d-0000-1111-2222-333344445555", H100),
			 1ull << 30);
	/* Hex digits match whatever their case. */
	assert_int_equal(resolve(&l, 5, "GPU-FFEE0000-0000-1111-2222-333344445555", 400), 100);
	l = parse_ok("GPU-1A2B=1G", BOTH);
	assert_int_equal(resolve(&l, 0, UUID0, H100), 1ull << 30);
	/* A key is a prefix of the UUID, not the other way round. */
	assert_int_equal(resolve(&l, 0, "GPU-1a2", H100), CS_LIMIT_NONE);
}

/* Ordinal beats UUID, the longest UUID prefix beats a shorter one, both beat the default. */
static void test_limits_precedence(void **state)
{
	struct cs_limits l =
	    parse_ok("6GiB,GPU-1a2b=2GiB,GPU-1a2b3=3GiB,1=1GiB," UUID2 "=5GiB", BOTH);

	(void)state;
	assert_int_equal(l.n, 5);
	assert_int_equal(resolve(&l, 0, UUID0, H100), 3ull << 30);	/* GPU-1a2b3 */
	assert_int_equal(resolve(&l, 2, UUID1, H100), 2ull << 30);	/* GPU-1a2b */
	assert_int_equal(resolve(&l, 1, UUID0, H100), 1ull << 30);	/* ordinal 1 */
	assert_int_equal(resolve(&l, 1, UUID2, H100), 1ull << 30);
	assert_int_equal(resolve(&l, 3, UUID2, H100), 5ull << 30);
	assert_int_equal(resolve(&l, 4, "GPU-00000000-0000-1111-2222-333344445555", H100),
			 6ull << 30);
	assert_int_equal(resolve(&l, 4, NULL, H100), 6ull << 30);
	assert_int_equal(resolve(&l, -1, NULL, H100), 6ull << 30);

	/* Order in the text does not matter. */
	l = parse_ok("1=1GiB,GPU-1a2b3=3GiB,GPU-1a2b=2GiB,6GiB", BOTH);
	assert_int_equal(resolve(&l, 0, UUID0, H100), 3ull << 30);
	assert_int_equal(resolve(&l, 1, UUID0, H100), 1ull << 30);
	assert_int_equal(resolve(&l, 2, UUID2, H100), 6ull << 30);

	/* Default plus keyed, default as a percentage. */
	l = parse_ok("0=8GiB,50%", BOTH);
	assert_int_equal(l.n, 2);
	assert_int_equal(resolve(&l, 0, UUID0, H100), 8ull << 30);
	assert_int_equal(resolve(&l, 1, UUID1, H100), 40779673600ull);
}

static void test_limits_percent_rounding(void **state)
{
	struct cs_limits l;

	(void)state;
	l = parse_ok("50%", BOTH);
	assert_int_equal(resolve(&l, 0, NULL, H100), 40779673600ull);
	assert_int_equal(resolve(&l, 0, NULL, 3), 1);	/* 1.5 rounds down */
	assert_int_equal(resolve(&l, 0, NULL, 0), 0);
	l = parse_ok("12.5%", BOTH);
	assert_int_equal(resolve(&l, 0, NULL, H100), 10194918400ull);
	l = parse_ok("33.3333%", BOTH);
	/* 81559347200 * 333333 / 10^6 = 27186421880.2176 */
	assert_int_equal(resolve(&l, 0, NULL, H100), 27186421880ull);
	l = parse_ok("0.0001%", BOTH);
	assert_int_equal(resolve(&l, 0, NULL, 999999), 0);
	assert_int_equal(resolve(&l, 0, NULL, 1000000), 1);
	/* total * ppm overflows 64 bits; the result does not. */
	l = parse_ok("100%", BOTH);
	assert_int_equal(resolve(&l, 0, NULL, UINT64_MAX), UINT64_MAX);
	l = parse_ok("99.9999%", BOTH);
	assert_int_equal(resolve(&l, 0, NULL, UINT64_MAX), 18446725626965477905ull);
	l = parse_ok("0%", BOTH);
	assert_int_equal(resolve(&l, 0, NULL, H100), 0);
}

static void test_limits_max_rules(void **state)
{
	char text[512] = "";
	struct cs_limits l;
	size_t pos = 0;

	(void)state;
	for (int i = 0; i < CS_LIMIT_RULES_MAX; i++)
		pos += (size_t)snprintf(text + pos, sizeof(text) - pos, "%s%d=%dM", i ? "," : "", i,
					i + 1);
	l = parse_ok(text, BOTH);
	assert_int_equal(l.n, CS_LIMIT_RULES_MAX);
	for (int i = 0; i < CS_LIMIT_RULES_MAX; i++)
		assert_int_equal(resolve(&l, i, NULL, H100), (uint64_t)(i + 1) << 20);
	snprintf(text + pos, sizeof(text) - pos, ",1G");
	EXPECT_ERROR(text, "item \"1G\"", "at most 32");
}

static void test_limits_errors(void **state)
{
	(void)state;
	/* The example of the design notes, word for word up to the forms. */
	EXPECT_ERROR("0=8XB",
		     MEM "=\"0=8XB\": item \"0=8XB\": \"8XB\" is not a size; accepted: "
			 "SIZE or PERCENT% for every device, or a comma list of KEY=VALUE "
			 "(KEY: CUDA device ordinal or GPU UUID / UUID prefix), optionally "
			 "with one bare default VALUE; SIZE: a byte count",
		     "PERCENT: 0 to 100");
	EXPECT_ERROR("", MEM "=\"\" is empty");
	EXPECT_ERROR(NULL, MEM "=\"\" is empty");
	EXPECT_ERROR("8XB", "item \"8XB\": \"8XB\" is not a size");
	EXPECT_ERROR("8 GiB", "item \"8 GiB\" has blanks");
	EXPECT_ERROR(" 8GiB", "item \" 8GiB\" has blanks");
	EXPECT_ERROR("0=8GiB, 1=4GiB", "item \" 1=4GiB\" has blanks");
	EXPECT_ERROR("0=8GiB,1=4GiB\n", "item \"1=4GiB\\x0a\" has blanks");
	EXPECT_ERROR("0=8GiB,,1=4GiB", "\"0=8GiB,,1=4GiB\" has an empty item (number 2)");
	EXPECT_ERROR(",8GiB", "empty item (number 1)");
	EXPECT_ERROR("8GiB,", "empty item (number 2)");
	EXPECT_ERROR(",", "empty item (number 1)");
	EXPECT_ERROR("0=", "item \"0=\" is empty: a value is needed");
	EXPECT_ERROR("=8GiB", "item \"=8GiB\" has an empty key");
	EXPECT_ERROR("0=8GiB,0=4GiB", "item \"0=4GiB\" names device 0 a second time");
	EXPECT_ERROR("0=8GiB,00=4GiB", "item \"00=4GiB\" names device 0 a second time");
	EXPECT_ERROR("GPU-1a2b=1G,GPU-1A2B=2G",
		     "item \"GPU-1A2B=2G\" names GPU-1A2B a second time");
	EXPECT_ERROR("1G,0=2G,3G", "item \"3G\" is a second default");
	EXPECT_ERROR("101%", "item \"101%\": \"101%\" is more than 100%");
	EXPECT_ERROR("100.0001%", "\"100.0001%\" is more than 100%");
	EXPECT_ERROR("99999999999999999999%", "is more than 100%");
	EXPECT_ERROR("0=12.34567%", "item \"0=12.34567%\": \"12.34567%\" has more than 4 decimals");
	EXPECT_ERROR("%", "\"%\" is not a percentage");
	EXPECT_ERROR("-5%", "\"-5%\" is not a percentage");
	EXPECT_ERROR(".5%", "\".5%\" is not a percentage");
	EXPECT_ERROR("5.%", "\"5.%\" is not a percentage");
	EXPECT_ERROR("5%%", "\"5%%\" is not a percentage");
	EXPECT_ERROR("50 %", "has blanks");
	EXPECT_ERROR("1.5", "\"1.5\" is not a size");
	EXPECT_ERROR("-1G", "\"-1G\" is not a size");
	EXPECT_ERROR("99999999999T", "\"99999999999T\" is too large");
	EXPECT_ERROR("0=8GiB=1", "\"8GiB=1\" is not a size");
	EXPECT_ERROR("1024=1G", "item \"1024=1G\" names a device ordinal out of range (0 to 1023)");
	EXPECT_ERROR("99999999999999999999=1G", "out of range");
	EXPECT_ERROR("-1=1G",
		     "item \"-1=1G\" has a key that is neither a device ordinal nor a GPU UUID");
	EXPECT_ERROR("0x1=1G", "\"0x1=1G\" has a key that is neither");
	EXPECT_ERROR("1a2b=1G", "GPU- or MIG-");
	EXPECT_ERROR("gpu-1a2b=1G", "item \"gpu-1a2b=1G\" has a key that is neither");
	EXPECT_ERROR("GPU=1G", "neither a device ordinal nor a GPU UUID");
	EXPECT_ERROR("GPU-=1G", "item \"GPU-=1G\" has a UUID key with nothing after");
	EXPECT_ERROR("GPU-1a2g=1G",
		     "\"GPU-1a2g=1G\" has a UUID key with characters other than hex");
	EXPECT_ERROR("GPU-1a2b/0=1G", "characters other than hex");
	EXPECT_ERROR("GPU-1a2b3c4d-0000-1111-2222-3333444455556=1G",
		     "has a UUID key longer than a UUID (40 characters)");
	EXPECT_ERROR("dev0=1G", "\"dev0=1G\" has a key that is neither");
	/* Quotes and control characters are escaped: the message stays one line. */
	EXPECT_ERROR("\"8G\"", "item \"\\\"8G\\\"\": \"\\\"8G\\\"\" is not a size");
	EXPECT_ERROR("8G\x01", "\"8G\\x01\" is not a size");
}

/* Percent-only (core limits): sizes are refused, and the message says so. */
static void test_limits_errors_percent_only(void **state)
{
	static const char *const only[] = {
		"accepted: only percentages: PERCENT for every device",
		"with or without %, e.g. 30 or 12.5%",
		NULL,
	};
	static const char *const size[] = {
		CORE "=\"8GiB\": item \"8GiB\": \"8GiB\" is not a percentage (only percentages are "
		     "accepted here); accepted: only percentages",
		NULL,
	};
	static const char *const big[] = {"item \"0=150\": \"150\" is more than 100%", NULL};
	static const char *const nopct[] = {
		"\"50%\" is a percentage: only sizes are accepted here",
		"accepted: SIZE for every device",
		NULL,
	};
	static const char *const noforms[] = {"caller bug", NULL};

	(void)state;
	expect_error(CORE, "8GiB", CS_LIMIT_PERCENT, size);
	expect_error(CORE, "8GiB", CS_LIMIT_PERCENT, only);
	expect_error(CORE, "0=150", CS_LIMIT_PERCENT, big);
	expect_error(CORE, "0=4096", CS_LIMIT_PERCENT, only);
	expect_error(CORE, "", CS_LIMIT_PERCENT, only);
	/* Sizes-only callers refuse percentages. */
	expect_error(MEM, "50%", CS_LIMIT_SIZES, nopct);
	expect_error(MEM, "50%", 0, noforms);
}

/* Truncation: a small buffer still gets a terminated prefix; no buffer is fine. */
static void test_limits_error_buffer(void **state)
{
	struct cs_limits l;
	char small[16];
	char big[4096];
	char text[600];

	(void)state;
	assert_int_equal(cs_limits_parse(MEM, "8XB", BOTH, &l, small, sizeof(small)), -EINVAL);
	assert_string_equal(small, "CUSLICE_MEM_LIM");
	assert_int_equal(cs_limits_parse(MEM, "8XB", BOTH, &l, NULL, 0), -EINVAL);
	assert_int_equal(cs_limits_parse(MEM, "8XB", BOTH, &l, small, 0), -EINVAL);
	/* A long text is shown cut, with the item in full view. */
	memset(text, 'x', sizeof(text));
	text[sizeof(text) - 1] = '\0';
	assert_int_equal(cs_limits_parse(MEM, text, BOTH, &l, big, sizeof(big)), -EINVAL);
	assert_non_null(strstr(big, "xxx...\": item \"xxx"));
	assert_true(strlen(big) < 1000);
}

/* A 0 % compute share would block the group for good: refused; sizes are not shares. */
static void test_limits_check_shares(void **state)
{
	struct cs_limits l;
	char err[256];

	(void)state;
	assert_int_equal(cs_limits_parse("CUSLICE_CORE_LIMIT", "0=30,1=0.0001", CS_LIMIT_PERCENT, &l,
					 err, sizeof(err)),
			 0);
	assert_int_equal(cs_limits_check_shares(&l, err, sizeof(err)), 0);
	assert_int_equal(cs_limits_parse("CUSLICE_CORE_LIMIT", "0=30,1=0", CS_LIMIT_PERCENT, &l, err,
					 sizeof(err)),
			 0);
	assert_int_equal(cs_limits_check_shares(&l, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "CUSLICE_CORE_LIMIT: a share of 0% would stop the group's GPU "
				 "work for good; accepted: a percentage above 0, up to 100");
	l = parse_ok("0", BOTH);	/* 0 bytes of memory: a (strict) limit, not a share */
	assert_int_equal(cs_limits_check_shares(&l, err, sizeof(err)), 0);
}

static void test_limits_check_ordinals(void **state)
{
	struct cs_limits l = parse_ok("0=1G,3=2G,GPU-1a=3G,4G", BOTH);
	char err[256];

	(void)state;
	assert_int_equal(cs_limits_check_ordinals(&l, 4, err, sizeof(err)), 0);
	assert_int_equal(cs_limits_check_ordinals(&l, 8, err, sizeof(err)), 0);
	assert_int_equal(cs_limits_check_ordinals(&l, 3, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, MEM " names CUDA device 3, but this process sees 3 devices "
				 "(ordinals 0 to 2, after CUDA_VISIBLE_DEVICES)");
	assert_int_equal(cs_limits_check_ordinals(&l, 1, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, MEM " names CUDA device 3, but this process sees 1 device "
				 "(ordinals 0 to 0, after CUDA_VISIBLE_DEVICES)");
	assert_int_equal(cs_limits_check_ordinals(&l, 0, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, MEM " names CUDA device 0, but this process sees no CUDA device");
	assert_int_equal(cs_limits_check_ordinals(&l, 0, NULL, 0), -EINVAL);

	l = parse_ok("GPU-1a=3G,4G", BOTH);
	assert_int_equal(cs_limits_check_ordinals(&l, 0, err, sizeof(err)), 0);
}

static void test_limits_check_uuids(void **state)
{
	const struct cs_limit_device devs[] = {
		{.ordinal = 0, .uuid = UUID0, .total = H100},
		{.ordinal = 1, .uuid = UUID1, .total = H100},
		{.ordinal = 2, .uuid = UUID2, .total = H100},
	};
	struct cs_limits l;
	char err[256];

	(void)state;
	/* Unique prefixes, a full UUID, and a UUID nobody has are fine. */
	l = parse_ok("GPU-1a2b3=1G,GPU-1a2b9=2G," UUID2 "=3G,GPU-dead=4G", BOTH);
	assert_int_equal(cs_limits_check_uuids(&l, devs, 3, err, sizeof(err)), 0);
	/* A prefix of two GPUs is ambiguous... */
	l = parse_ok("GPU-1a2b=1G", BOTH);
	assert_int_equal(cs_limits_check_uuids(&l, devs, 3, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, MEM ": UUID prefix \"GPU-1a2b\" matches more than one GPU (" UUID0
				 " and " UUID1 "); give enough of the UUID to name one");
	/* ...unless a longer prefix or an ordinal decides for one of them. */
	l = parse_ok("GPU-1a2b=1G,GPU-1a2b9=2G", BOTH);
	assert_int_equal(cs_limits_check_uuids(&l, devs, 3, err, sizeof(err)), 0);
	l = parse_ok("GPU-1a2b=1G,0=2G", BOTH);
	assert_int_equal(cs_limits_check_uuids(&l, devs, 3, err, sizeof(err)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limits_single_size),
		cmocka_unit_test(test_limits_single_percent),
		cmocka_unit_test(test_limits_percent_only),
		cmocka_unit_test(test_limits_over),
		cmocka_unit_test(test_limits_ordinal_list),
		cmocka_unit_test(test_limits_uuid_keys),
		cmocka_unit_test(test_limits_precedence),
		cmocka_unit_test(test_limits_percent_rounding),
		cmocka_unit_test(test_limits_max_rules),
		cmocka_unit_test(test_limits_errors),
		cmocka_unit_test(test_limits_errors_percent_only),
		cmocka_unit_test(test_limits_error_buffer),
		cmocka_unit_test(test_limits_check_shares),
		cmocka_unit_test(test_limits_check_ordinals),
		cmocka_unit_test(test_limits_check_uuids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
