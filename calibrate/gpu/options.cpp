// Command line of the GPU calibration binaries (see options.hpp).
#include "options.hpp"

#include <cctype>
#include <fmt/format.h>
#include <iostream>
#include <limits>

#include "dtype.hpp"

namespace po = boost::program_options;

namespace moesim::calibrate {

namespace {

// Shell-quotes an argument only where needed, so the provenance command can be pasted back.
std::string quoted(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                           "0123456789-_=.,/:+@%") == std::string::npos;
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

CommandLine::CommandLine(std::string tool, std::string usage)
    : tool_(std::move(tool)), usage_(std::move(usage)), own_("options") {}

bool CommandLine::parse(int argc, char** argv) {
  po::options_description common("common options");
  common.add_options()
      ("help,h", "print this help and exit")
      ("dry-run", "list what would be measured and exit; needs no GPU")
      ("out,o", po::value<std::string>(&common_.out), "write the measurements JSON to FILE (default: stdout)")
      ("warmup", po::value<int>(&common_.warmup)->default_value(5), "untimed runs before the timed ones")
      ("reps", po::value<int>(&common_.reps)->default_value(20), "timed repetitions")
      ("quiet,q", "no progress lines on stderr");
  po::options_description all;
  all.add(own_).add(common);
  // Words that are not options are collected to be refused by name, not ignored.
  po::options_description hidden;
  hidden.add_options()("stray", po::value<std::vector<std::string>>());
  po::options_description parsed;
  parsed.add(all).add(hidden);
  po::positional_options_description stray;
  stray.add("stray", -1);
  try {
    po::store(po::command_line_parser(argc, argv).options(parsed).positional(stray).run(), values_);
    po::notify(values_);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  if (values_.count("help")) {
    std::cout << usage_ << "\n" << all << "\n";
    return false;
  }
  if (values_.count("stray"))
    throw UsageError(fmt::format("unexpected argument \"{}\" (every option starts with --)",
                                 values_["stray"].as<std::vector<std::string>>().front()));
  common_.dry_run = values_.count("dry-run") > 0;
  common_.quiet = values_.count("quiet") > 0;
  if (common_.warmup < 0) throw UsageError(fmt::format("--warmup {}: must be 0 or more", common_.warmup));
  if (common_.reps < 1) throw UsageError(fmt::format("--reps {}: must be 1 or more", common_.reps));
  if (values_.count("out") && common_.out.empty()) throw UsageError("--out: empty file name");
  common_.command = tool_;
  for (int i = 1; i < argc; ++i) common_.command += " " + quoted(argv[i]);
  return true;
}

std::vector<std::string> split_list(const std::string& list, const char* option) {
  std::vector<std::string> items;
  std::size_t pos = 0;
  while (true) {
    const std::size_t end = std::min(list.find(',', pos), list.size());
    std::string item = list.substr(pos, end - pos);
    if (item.empty()) throw UsageError(fmt::format("{} \"{}\": empty item in the comma list", option, list));
    items.push_back(std::move(item));
    if (end == list.size()) return items;
    pos = end + 1;
  }
}

std::vector<std::int64_t> parse_int_list(const std::string& list, const char* option, std::int64_t min,
                                         std::int64_t max) {
  std::vector<std::int64_t> values;
  for (const std::string& item : split_list(list, option)) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used != item.size() || used == 0) throw UsageError(fmt::format("{}: \"{}\" is not an integer", option, item));
    if (v < min || v > max) throw UsageError(fmt::format("{}: {} is outside [{}, {}]", option, v, min, max));
    values.push_back(v);
  }
  return values;
}

std::uint64_t parse_bytes(const std::string& text, const char* option) {
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) value = std::stoull(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used == 0) throw UsageError(fmt::format("{}: \"{}\" is not a size in bytes (e.g. 8, 64K, 1M, 1G)", option, text));
  std::string unit = text.substr(used);
  std::uint64_t scale = 1;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KiB") scale = 1ull << 10;
  else if (unit == "M" || unit == "MiB") scale = 1ull << 20;
  else if (unit == "G" || unit == "GiB") scale = 1ull << 30;
  else throw UsageError(fmt::format("{}: unknown unit \"{}\" in \"{}\" (use B, K/KiB, M/MiB, G/GiB)", option, unit, text));
  if (value > std::numeric_limits<std::uint64_t>::max() / scale) throw UsageError(fmt::format("{}: {} is too large", option, text));
  return value * scale;
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.4g} {}", v, units[u]);
}

int run_tool(const char* tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << tool << ": " << e.what() << " (see " << tool << " --help)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << tool << ": error: " << e.what() << "\n";
    return 1;
  }
}

// --- dtype.hpp ---

const char* name(DType t) {
  switch (t) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp32: return "fp32";
    case DType::tf32: return "tf32";
  }
  return "?";
}

std::size_t element_size(DType t) { return t == DType::bf16 || t == DType::fp16 ? 2 : 4; }

std::vector<DType> parse_dtypes(const std::string& list, const std::vector<DType>& allowed, const char* option) {
  std::vector<DType> out;
  for (const std::string& item : split_list(list, option)) {
    bool found = false;
    for (DType t : allowed) {
      if (item == name(t)) {
        found = true;
        bool repeated = false;
        for (DType seen : out) repeated = repeated || seen == t;
        if (!repeated) out.push_back(t);
      }
    }
    if (!found) {
      std::string names;
      for (DType t : allowed) names += std::string(names.empty() ? "" : ", ") + name(t);
      throw UsageError(fmt::format("{}: unknown dtype \"{}\" (one of {})", option, item, names));
    }
  }
  return out;
}

}  // namespace moesim::calibrate
