/* Unit tests of src/common/cs-size.c: parsing and formatting human-written sizes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cs-size.h"

#define UNTOUCHED 0x5a5a5a5a5a5a5a5aull

/* Parses s and asserts it yields exactly `want`. */
static void expect_size(const char *s, uint64_t want)
{
	uint64_t v = UNTOUCHED;
	int r = cs_size_parse(s, &v);

	if (r != 0 || v != want)
		print_error("cs_size_parse(\"%s\") = %d, %llu; expected 0, %llu\n", s, r,
			    (unsigned long long)v, (unsigned long long)want);
	assert_int_equal(r, 0);
	assert_int_equal(v, want);
}

/* Asserts that s fails with `err` and leaves the output alone. */
static void expect_fail(const char *s, int err)
{
	uint64_t v = UNTOUCHED;
	int r = cs_size_parse(s, &v);

	if (r != err)
		print_error("cs_size_parse(\"%s\") = %d; expected %d\n", s ? s : "(null)", r, err);
	assert_int_equal(r, err);
	assert_int_equal(v, UNTOUCHED);
}

static void test_size_plain_bytes(void **state)
{
	(void)state;
	expect_size("0", 0);
	expect_size("1", 1);
	expect_size("4096", 4096);
	expect_size("4096B", 4096);
	expect_size("4096b", 4096);
	expect_size("007", 7);
	expect_size("18446744073709551615", UINT64_MAX);
	expect_size("18446744073709551615B", UINT64_MAX);
}

static void test_size_binary_units(void **state)
{
	(void)state;
	expect_size("1K", 1024);
	expect_size("1k", 1024);
	expect_size("1KiB", 1024);
	expect_size("1kib", 1024);
	expect_size("1Ki", 1024);
	expect_size("3M", 3ull << 20);
	expect_size("3MiB", 3ull << 20);
	expect_size("3Mi", 3ull << 20);
	expect_size("512MiB", 512ull << 20);
	expect_size("80G", 80ull << 30);
	expect_size("80GiB", 80ull << 30);
	expect_size("80gi", 80ull << 30);
	expect_size("2T", 2ull << 40);
	expect_size("2TiB", 2ull << 40);
	expect_size("2Ti", 2ull << 40);
}

static void test_size_decimal_units(void **state)
{
	(void)state;
	expect_size("1KB", 1000);
	expect_size("1kb", 1000);
	expect_size("1Kb", 1000);
	expect_size("5MB", 5000000);
	expect_size("40GB", 40000000000ull);
	expect_size("3TB", 3000000000000ull);
}

static void test_size_fractions(void **state)
{
	(void)state;
	expect_size("1.5G", 1610612736);
	expect_size("1.5GiB", 1610612736);
	expect_size("0.5K", 512);
	expect_size("0.25M", 262144);
	expect_size("2.5KB", 2500);
	expect_size("1.5TB", 1500000000000ull);
	/* Rounded down to a whole byte: 0.1 KiB is 102.4 bytes. */
	expect_size("0.1K", 102);
	expect_size("1.0001K", 1024);
	expect_size("1.999K", 2046);
	/* Digits past the twelfth cannot change the result and are accepted. */
	expect_size("1.00000000000000000001G", 1ull << 30);
	expect_size("0.000000000001T", 1);
}

static void test_size_overflow(void **state)
{
	(void)state;
	expect_fail("18446744073709551616", -ERANGE);
	expect_fail("99999999999999999999999", -ERANGE);
	expect_fail("16777216T", -ERANGE);	/* 2^24 TiB = 2^64 */
	expect_fail("17179869184G", -ERANGE);	/* 2^34 GiB = 2^64 */
	expect_fail("18446744073709552KB", -ERANGE);
}

static void test_size_overflow_by_fraction(void **state)
{
	uint64_t v = 0;

	(void)state;
	/* (2^24 - 1) TiB + almost 1 TiB still fits: just under 2^64. */
	assert_int_equal(cs_size_parse("16777215.5T", &v), 0);
	assert_int_equal(v, (16777215ull << 40) + (1ull << 39));
	/* 18446744073709551615 bytes = 18446744073709551.615 KB; .616 KB overflows. */
	expect_size("18446744073709551.615KB", UINT64_MAX);
	expect_fail("18446744073709551.616KB", -ERANGE);
}

static void test_size_malformed(void **state)
{
	static const char *const bad[] = {
		"", " 1G", "1G ", "\t1", "1\n", "-1", "+1", "1.", ".5G", "1.5", "1.B", "1.5B",
		"1.5b", "1.5.G", "1XB", "1iB", "1Bi", "1Gi B", "1 G", "1GG", "G", "K1", "1,5G",
		"1e9", "0x10", "1P", "1PiB",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_fail(bad[i], -EINVAL);
	expect_fail(NULL, -EINVAL);
}

static void test_size_format(void **state)
{
	char buf[32];

	(void)state;
	assert_string_equal(cs_size_format(0, buf, sizeof(buf)), "0 B");
	assert_string_equal(cs_size_format(1023, buf, sizeof(buf)), "1023 B");
	assert_string_equal(cs_size_format(1024, buf, sizeof(buf)), "1.00 KiB");
	assert_string_equal(cs_size_format(1536, buf, sizeof(buf)), "1.50 KiB");
	assert_string_equal(cs_size_format(512ull << 20, buf, sizeof(buf)), "512.00 MiB");
	assert_string_equal(cs_size_format(80ull << 30, buf, sizeof(buf)), "80.00 GiB");
	assert_string_equal(cs_size_format(1610612736, buf, sizeof(buf)), "1.50 GiB");
	assert_string_equal(cs_size_format(3ull << 40, buf, sizeof(buf)), "3.00 TiB");
	assert_string_equal(cs_size_format(5ull << 50, buf, sizeof(buf)), "5.00 PiB");
	/* Past PiB there is no larger unit: it stays in PiB. */
	assert_string_equal(cs_size_format(2048ull << 50, buf, sizeof(buf)), "2048.00 PiB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_plain_bytes),
		cmocka_unit_test(test_size_binary_units),
		cmocka_unit_test(test_size_decimal_units),
		cmocka_unit_test(test_size_fractions),
		cmocka_unit_test(test_size_overflow),
		cmocka_unit_test(test_size_overflow_by_fraction),
		cmocka_unit_test(test_size_malformed),
		cmocka_unit_test(test_size_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
