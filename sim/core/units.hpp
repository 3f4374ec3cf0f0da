// Units of moesim: integer picosecond time, bytes, bandwidth, FLOP rates, and the parsing of
// unit-carrying strings ("10Gbps", "50GB/s", "5us", "80GiB", "312TFLOPS"). Bare numbers are never
// accepted where a unit is needed: Gbps versus GB/s is the most common mistake in this field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moesim {

// Simulated time: a count of picoseconds. int64 covers ±106 days; moesim's clock stops at
// kMaxTime = 2^62 ps (53 days), so the sum of two times never overflows.
using Time = std::int64_t;
inline constexpr Time kMaxTime = Time{1} << 62;
inline constexpr Time kPicosecond = 1;
inline constexpr Time kNanosecond = 1'000;
inline constexpr Time kMicrosecond = 1'000'000;
inline constexpr Time kMillisecond = 1'000'000'000;
inline constexpr Time kSecond = 1'000'000'000'000;

// Bandwidth in bytes per second (SI). "10Gbps" = 1.25e9 B/s.
struct Bandwidth {
  double bytes_per_second = 0.0;
  // Picoseconds to move `bytes` at this rate, rounded to the nearest picosecond.
  [[nodiscard]] Time transfer_time(double bytes) const;
  [[nodiscard]] double ps_per_byte() const { return 1e12 / bytes_per_second; }
};

// Rounds a duration in picoseconds to the clock. Throws InfeasibleError when it is not finite or
// passes kMaxTime (a bandwidth or rate in the wrong unit, usually): the one conversion every model
// uses, so no overflow wraps into a negative time.
Time ps_to_time(double picoseconds);
[[noreturn]] void past_the_clock(double picoseconds);  // the InfeasibleError ps_to_time throws
// Rounds a non-negative duration in seconds to picoseconds (checked as ps_to_time).
Time seconds_to_time(double seconds);
double time_to_seconds(Time t);
double time_to_ms(Time t);

// Parsers return std::nullopt on malformed text; unit_help() says what is accepted.
std::optional<Time> parse_time(std::string_view text);       // nullopt past kMaxTime too
std::optional<double> parse_time_ps(std::string_view text);  // unbounded, for range messages
std::optional<Bandwidth> parse_bandwidth(std::string_view text);
std::optional<double> parse_bytes(std::string_view text);
std::optional<double> parse_flops(std::string_view text);  // FLOP per second
// A bare finite number, the whole text ("12.5", "1e-3"; not " 12", "inf", "12us"): a cell of a
// measurement table.
std::optional<double> parse_number(std::string_view text);

enum class UnitKind { Time, Bandwidth, Bytes, Flops };
std::string unit_help(UnitKind kind);
// The unit names the parser of `kind` accepts ("ps", "ns", ...), from its one table.
std::vector<std::string> unit_names(UnitKind kind);

// Human-readable forms used in tables and effective scenarios; exact for round values.
std::string format_time(Time t);
std::string format_bytes(double bytes);
std::string format_bandwidth(Bandwidth bw);

}  // namespace moesim
