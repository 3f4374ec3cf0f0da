// Helpers of the CLI tests: run the built moesim binary as a user would (through the shell, in a
// private temporary folder), capture its stdout, stderr and exit code, and read what it wrote.
// No project library is linked: everything is observed from the outside.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <vector>

namespace moesim_cli {

namespace fs = std::filesystem;
using Json = nlohmann::json;                // key order ignored: semantic comparison
using OrderedJson = nlohmann::ordered_json;  // key order kept: for writing scenarios

inline const fs::path kSourceDir = MOESIM_SOURCE_DIR;
inline const fs::path kBinary = MOESIM_BINARY;
inline const fs::path kQuickstart = kSourceDir / "scenarios" / "quickstart.json";
// The quickstart's tokens per iteration: 2 nodes x 8 H100, 8 sequences of 1024 tokens per GPU per
// microbatch, 2 microbatches.
inline constexpr double kQuickstartTokensPerIteration = 16.0 * 8 * 1024 * 2;  // 262144

struct Result {
  int code = -1;    // the exit status; 128 + signal when the process was killed by a signal
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(pos));
      break;
    }
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

inline std::size_t count_char(const std::string& s, char c) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), c));
}

// The names of the entries of a folder (not recursive), sorted.
inline std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Every test gets its own temporary folder:
//   root/work  the current folder of every moesim process (scenario files are written here, and a
//              run that forgets --out would land in work/out/...)
//   root/cap   captured stdout/stderr (outside work/, so "nothing written" can list work/ exactly)
//   root/...   --out folders
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Presets come from the source tree the binary was built from, whatever the caller's environment.
    ::unsetenv("MOESIM_DATA");
    std::string tmpl = (fs::path(::testing::TempDir()) / "moesim-cli-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << "mkdtemp " << tmpl;
    root_ = tmpl;
    work_ = root_ / "work";
    cap_ = root_ / "cap";
    fs::create_directories(work_);
    fs::create_directories(cap_);
  }

  void TearDown() override {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
  }

  // Runs `moesim ARGS...` from work/, as a user would from a shell. `shell` runs first in the same
  // shell, which then execs moesim: limits (`ulimit -f 4`), ignored signals, or a wrapper
  // (`exec timeout -s KILL 0.3`).
  Result moesim(const std::vector<std::string>& args, const std::string& shell = "") {
    const std::size_t n = ++runs_;
    const fs::path out = cap_ / fmt::format("stdout.{}", n);
    const fs::path err = cap_ / fmt::format("stderr.{}", n);
    std::string cmd = fmt::format("cd {} && {} {}", shell_quote(work_.string()), shell.empty() ? "exec" : shell,
                                  shell_quote(kBinary.string()));
    for (const auto& a : args) cmd += fmt::format(" {}", shell_quote(a));
    cmd += fmt::format(" >{} 2>{} </dev/null", shell_quote(out.string()), shell_quote(err.string()));
    const int status = std::system(cmd.c_str());
    Result r;
    if (status == -1)
      r.code = -1;
    else if (WIFEXITED(status))
      r.code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      r.code = 128 + WTERMSIG(status);
    r.out = read_text(out);
    r.err = read_text(err);
    return r;
  }

  // Writes a scenario file into work/ and returns its absolute path.
  fs::path scenario(const std::string& name, const std::string& text) {
    const fs::path p = work_ / name;
    write_text(p, text);
    return p;
  }
  fs::path scenario(const std::string& name, const OrderedJson& doc) { return scenario(name, doc.dump(2) + "\n"); }

  // quickstart.json, parsed with its key order.
  static OrderedJson quickstart() { return OrderedJson::parse(read_text(kQuickstart)); }

  fs::path root_, work_, cap_;
  std::size_t runs_ = 0;
};

// Describes a result for assertion messages.
inline std::string describe(const Result& r) {
  return fmt::format("exit code {}\n--- stdout ---\n{}--- stderr ---\n{}", r.code, r.out, r.err);
}

// A small comma-separated table, fields without quotes (moesim's results.csv of ok rows).
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  static std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> f;
    std::size_t pos = 0;
    for (;;) {
      const std::size_t c = line.find(',', pos);
      f.push_back(line.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
      if (c == std::string::npos) break;
      pos = c + 1;
    }
    return f;
  }
  static Csv parse(const std::string& text) {
    Csv csv;
    const auto lines = split_lines(text);
    if (lines.empty()) return csv;
    csv.header = split(lines[0]);
    for (std::size_t i = 1; i < lines.size(); ++i) csv.rows.push_back(split(lines[i]));
    return csv;
  }
  // The index of a column by its header name; fails the test when missing.
  std::size_t column(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << "no column \"" << name << "\" in the header";
    return static_cast<std::size_t>(it - header.begin());
  }
  const std::string& at(std::size_t row, const std::string& name) const { return rows.at(row).at(column(name)); }
  double number(std::size_t row, const std::string& name) const { return std::stod(at(row, name)); }
};

}  // namespace moesim_cli
