// Command line shared by the GPU calibration binaries: --help, --dry-run, --out, --warmup, --reps,
// --quiet, the tool's own options (Boost.Program_options, as the moesim CLI), list and size parsing,
// and the exit-code convention: 0 done, 2 bad command line (the message names the option),
// 1 a CUDA/cuBLAS/NCCL failure or no usable GPU (the message names the call).
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace moesim::calibrate {

// A bad command line: exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CommonOptions {
  bool dry_run = false;
  bool quiet = false;
  std::string out;  // empty: stdout
  int warmup = 5;
  int reps = 20;
  std::string command;  // the command line as typed, for the provenance
};

class CommandLine {
 public:
  // `usage` is the text printed by --help above the option list.
  CommandLine(std::string tool, std::string usage);

  // Where the tool declares its own options.
  boost::program_options::options_description& options() { return own_; }

  // Parses argv; false when --help was printed (exit 0). Throws UsageError.
  bool parse(int argc, char** argv);

  const boost::program_options::variables_map& values() const { return values_; }
  bool given(const char* option) const { return values_.count(option) > 0 && !values_[option].defaulted(); }
  const CommonOptions& common() const { return common_; }
  const std::string& tool() const { return tool_; }

 private:
  std::string tool_;
  std::string usage_;
  boost::program_options::options_description own_;
  boost::program_options::variables_map values_;
  CommonOptions common_;
};

// "a,b,c" -> {"a", "b", "c"}; an empty item is a usage error naming `option`.
std::vector<std::string> split_list(const std::string& list, const char* option);

// "512,1024" -> {512, 1024}; every value must be in [min, max].
std::vector<std::int64_t> parse_int_list(const std::string& list, const char* option, std::int64_t min,
                                         std::int64_t max);

// "8", "64K", "1M", "1G", "4KiB", "1GiB" (K = 1024 bytes, as nccl-tests' -b/-e).
std::uint64_t parse_bytes(const std::string& text, const char* option);

// "1.5 GiB", "64 KiB", "8 B".
std::string format_bytes(std::uint64_t bytes);

// Runs a tool's main body, turning exceptions into messages on stderr and exit codes.
int run_tool(const char* tool, const std::function<int()>& body);

}  // namespace moesim::calibrate
