// Reading a user's input file safely. Only regular files are read (a FIFO, a device such as
// /dev/zero or a folder would block or never end), never more than a bound (a scenario, profile,
// log or table is kilobytes; 64 MiB leaves room for a full nccl-tests sweep log), and every failure
// is an InputError naming the file and the fix: the reader never throws a library message.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace moesim {

inline constexpr std::uint64_t kMaxInputBytes = 64ULL << 20;

std::string read_input_file(const std::filesystem::path& file, std::uint64_t max_bytes = kMaxInputBytes);

}  // namespace moesim
