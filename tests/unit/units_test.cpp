// Unit parsing and α-β arithmetic, exact to the picosecond.
#include <gtest/gtest.h>

#include "sim/core/units.hpp"

using namespace moesim;

TEST(Units, BandwidthBitsVersusBytes) {
  // 10 Gbps = 10e9 bits/s = 1.25e9 bytes/s; 50 GB/s = 5e10 bytes/s; GiB/s is binary.
  EXPECT_DOUBLE_EQ(parse_bandwidth("10Gbps")->bytes_per_second, 1.25e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("50GB/s")->bytes_per_second, 5e10);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1GiB/s")->bytes_per_second, 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 Gbps")->bytes_per_second, 5e10);
}

TEST(Units, BareNumbersAndUnknownUnitsAreRefused) {
  EXPECT_FALSE(parse_bandwidth("10"));
  EXPECT_FALSE(parse_bandwidth("10Gbit"));
  EXPECT_FALSE(parse_time("5"));
  EXPECT_FALSE(parse_bytes("80"));
  EXPECT_FALSE(parse_bytes("-1GB"));
  EXPECT_FALSE(parse_flops("312"));
}

TEST(Units, TimesAndSizes) {
  EXPECT_EQ(*parse_time("5us"), 5 * kMicrosecond);
  EXPECT_EQ(*parse_time("1.5ms"), 1'500'000'000);
  EXPECT_EQ(*parse_time("250ps"), 250);
  EXPECT_DOUBLE_EQ(*parse_bytes("80GiB"), 80.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*parse_bytes("48GB"), 48e9);
  EXPECT_DOUBLE_EQ(*parse_flops("312TFLOPS"), 312e12);
}

TEST(Units, TransferTimeIsExactToThePicosecond) {
  // 1 MB at 10 Gbps: 1e6 B × 800 ps/B = 8e8 ps = 0.8 ms.
  EXPECT_EQ(parse_bandwidth("10Gbps")->transfer_time(1e6), 800'000'000);
  // 3 bytes at 900 GB/s: 3 / 9e11 s = 3.333 ps, rounded to 3 ps.
  EXPECT_EQ(parse_bandwidth("900GB/s")->transfer_time(3), 3);
  // 7 bytes: 7.777 ps rounds to 8.
  EXPECT_EQ(parse_bandwidth("900GB/s")->transfer_time(7), 8);
}
