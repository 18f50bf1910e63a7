/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "base/parse.h"
#include "base/utf8.h"
#include "harness.h"

TEST(parse_duration_units)
{
	uint64_t ms;

	ASSERT_OK(parse_duration_ms("500", &ms));
	ASSERT_EQ(ms, 500);
	ASSERT_OK(parse_duration_ms("2s", &ms));
	ASSERT_EQ(ms, 2000);
	ASSERT_OK(parse_duration_ms("10m", &ms));
	ASSERT_EQ(ms, 600000);
	ASSERT_OK(parse_duration_ms("1h", &ms));
	ASSERT_EQ(ms, 3600000);
	ASSERT_EQ(parse_duration_ms("", &ms), -EINVAL);
	ASSERT_EQ(parse_duration_ms("-1", &ms), -EINVAL);
	ASSERT_EQ(parse_duration_ms("5x", &ms), -EINVAL);
	ASSERT_EQ(parse_duration_ms("99999999999999999999", &ms), -ERANGE);
}

TEST(parse_duration_us_units)
{
	uint64_t us;

	ASSERT_OK(parse_duration_us("500", &us));
	ASSERT_EQ(us, 500);
	ASSERT_OK(parse_duration_us("500us", &us));
	ASSERT_EQ(us, 500);
	ASSERT_OK(parse_duration_us("2ms", &us));
	ASSERT_EQ(us, 2000);
	ASSERT_OK(parse_duration_us("3s", &us));
	ASSERT_EQ(us, 3000000);
	ASSERT_EQ(parse_duration_us("1m", &us), -EINVAL); /* no minutes for an interval */
	ASSERT_EQ(parse_duration_us("us", &us), -EINVAL);
	/* Scaling past 2^64 is a range error, not a wrap. */
	ASSERT_EQ(parse_duration_us("18446744073709552s", &us), -ERANGE);
}

TEST(parse_u64_strict)
{
	uint64_t v;
	uint32_t w;

	ASSERT_OK(safe_atou64("18446744073709551615", &v));
	ASSERT_TRUE(v == UINT64_MAX);
	ASSERT_EQ(safe_atou64("18446744073709551616", &v), -ERANGE);
	ASSERT_EQ(safe_atou64("+1", &v), -EINVAL);
	ASSERT_EQ(safe_atou64("1 ", &v), -EINVAL);
	ASSERT_EQ(safe_atou32("4294967296", &w), -ERANGE);
}

TEST(parse_host_port_forms)
{
	char host[64];
	uint16_t port;

	ASSERT_OK(parse_host_port("localhost:6009", host, sizeof(host), &port));
	ASSERT_STREQ(host, "localhost");
	ASSERT_EQ(port, 6009);
	ASSERT_OK(parse_host_port("grpc://10.0.0.2:8466", host, sizeof(host), &port));
	ASSERT_STREQ(host, "10.0.0.2");
	ASSERT_OK(parse_host_port("[::1]:6009", host, sizeof(host), &port));
	ASSERT_STREQ(host, "::1");
	ASSERT_EQ(parse_host_port("::1:6009", host, sizeof(host), &port), -EINVAL);
	ASSERT_EQ(parse_host_port("host", host, sizeof(host), &port), -EINVAL);
	ASSERT_EQ(parse_host_port("host:70000", host, sizeof(host), &port), -EINVAL);
	ASSERT_EQ(parse_host_port(":6009", host, sizeof(host), &port), -EINVAL);
}

TEST(path_component_rules)
{
	ASSERT_TRUE(path_component_ok("2026_11_22_10_00_00"));
	ASSERT_TRUE(path_component_ok("localhost_6009.xplane.pb"));
	ASSERT_TRUE(!path_component_ok(""));
	ASSERT_TRUE(!path_component_ok("."));
	ASSERT_TRUE(!path_component_ok(".."));
	ASSERT_TRUE(!path_component_ok("a/b"));
	ASSERT_TRUE(!path_component_ok("a\nb"));
}

/* The log sink's one escaping rule (base/utf8.h): peer text stays one
 * line of valid UTF-8, readable, and nothing is split at the end. */
TEST(utf8_escape_rules)
{
	static const char in[] = "ok \xc3\xa9 a\nb\r\x1b[31m \\ \xff\xc3 \x7f";
	char out[128];

	ASSERT_EQ(utf8_escape(out, sizeof(out), in, sizeof(in) - 1), strlen(out));
	ASSERT_STREQ(out, "ok \xc3\xa9 a\\x0ab\\x0d\\x1b[31m \\\\ \\xff\\xc3 \\x7f");
	ASSERT_TRUE(utf8_valid(out, strlen(out)));
	/* Cut: never half an escape or half a character. */
	ASSERT_EQ(utf8_escape(out, 6, "ab\ncd", 5), 2);
	ASSERT_STREQ(out, "ab");
	ASSERT_EQ(utf8_escape(out, 4, "a\xc3\xa9", 3), 3);
	ASSERT_EQ(utf8_escape(out, 3, "a\xc3\xa9", 3), 1);
	ASSERT_STREQ(out, "a");
	ASSERT_EQ(utf8_escape(out, 1, "abc", 3), 0);
	ASSERT_STREQ(out, "");
}

TEST_MAIN()
