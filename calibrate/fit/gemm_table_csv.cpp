#include "calibrate/fit/gemm_table_csv.hpp"

#include <algorithm>
#include <boost/algorithm/string.hpp>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <sstream>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/core/units.hpp"

namespace moesim::calibrate {

namespace {

constexpr const char* kLayoutFix =
    "write a header of m,n,k (optional b) and value columns named <dtype>_flops_per_s or <dtype>_time_<unit>, "
    "e.g. `m,n,k,bf16_flops_per_s`";

struct ValueColumn {
  std::size_t index = 0;
  std::string dtype;
  double seconds_per_unit = 0;  // 0: the column holds FLOP/s
};

std::optional<std::string> dtype_of(const std::string& name) {
  if (name == "f32") return "fp32";
  if (name == "f16") return "fp16";
  for (const char* d : {"fp32", "tf32", "fp16", "bf16", "fp8"})
    if (name == d) return std::string(d);
  return std::nullopt;
}

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  boost::split(out, line, boost::is_any_of(","));
  for (auto& c : out) boost::trim(c);
  return out;
}

}  // namespace

Measurements read_gemm_table_csv(const std::string& text, const std::string& file) {
  Measurements m;
  m.file = file;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  std::vector<std::string> header;
  int header_line = 0;
  std::optional<std::size_t> col_b, col_m, col_n, col_k;
  std::vector<ValueColumn> values;
  schema::Json notes = schema::Json::array();
  long skipped_batched = 0;

  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string trimmed = boost::trim_copy(line);
    if (trimmed.empty()) continue;
    if (trimmed.front() == '#') {
      notes.push_back(boost::trim_copy(trimmed.substr(1)));
      continue;
    }
    const auto row = cells(trimmed);
    if (header.empty()) {
      header = row;
      header_line = line_no;
      for (std::size_t i = 0; i < header.size(); ++i) {
        const std::string name = boost::to_lower_copy(header[i]);
        const std::string at = fmt::format("line {}, column {} ({})", line_no, i + 1, header[i]);
        auto* shape = name == "b" ? &col_b : name == "m" ? &col_m : name == "n" ? &col_n : name == "k" ? &col_k : nullptr;
        if (shape) {
          if (*shape) throw InputError(file, at, fmt::format("column {} given twice", name), "keep one");
          *shape = i;
          continue;
        }
        const auto us = name.find('_');
        const auto dtype = us == std::string::npos ? std::nullopt : dtype_of(name.substr(0, us));
        if (!dtype)
          throw InputError(file, at, "a column that is neither m, n, k, b nor <dtype>_flops_per_s / <dtype>_time_<unit>",
                           fmt::format("name the dtype (fp32, tf32, fp16, bf16, fp8, or XLA's f32, f16); {}", kLayoutFix));
        ValueColumn v{i, *dtype, 0};
        const std::string what = name.substr(us + 1);
        if (what.rfind("time_", 0) == 0) {
          v.seconds_per_unit = seconds_per(what.substr(5));
          if (v.seconds_per_unit <= 0)
            throw InputError(file, at, fmt::format("unknown time unit `{}`", what.substr(5)), "use ns, us, ms or s");
        } else if (what != "flops_per_s") {
          throw InputError(file, at, fmt::format("unknown quantity `{}`", what), kLayoutFix);
        }
        if (std::any_of(values.begin(), values.end(), [&](const ValueColumn& o) { return o.dtype == v.dtype; }))
          throw InputError(file, at, fmt::format("a second column for {}", v.dtype), "keep one column per dtype");
        values.push_back(v);
      }
      if (!col_m || !col_n || !col_k)
        throw InputError(file, fmt::format("line {}", line_no), "the header lacks m, n or k", kLayoutFix);
      if (values.empty())
        throw InputError(file, fmt::format("line {}", line_no), "the header names no value column", kLayoutFix);
      continue;
    }
    if (row.size() != header.size())
      throw InputError(file, fmt::format("line {}", line_no),
                       fmt::format("{} cells where the header (line {}) has {}", row.size(), header_line, header.size()),
                       "give every row one cell per header column");
    const auto positive = [&](std::size_t i) {
      const auto v = parse_number(row[i]);
      if (!v || !(*v > 0))
        throw InputError(file, fmt::format("line {}, column {} ({})", line_no, i + 1, header[i]),
                         fmt::format("`{}` is not a positive number", row[i]), "give a number > 0, or leave a value cell empty");
      return *v;
    };
    if (col_b && positive(*col_b) != 1) {
      ++skipped_batched;
      continue;
    }
    const double gm = positive(*col_m), gn = positive(*col_n), gk = positive(*col_k);
    for (const ValueColumn& v : values) {
      if (row[v.index].empty()) continue;  // not measured in this dtype
      const double x = positive(v.index);
      const double seconds = v.seconds_per_unit > 0 ? x * v.seconds_per_unit : 2 * gm * gn * gk / x;
      // A GeMM between a picosecond and a day: past either, the cell is not a measurement (1e-300
      // FLOP/s, a shape of 1e300).
      if (!(seconds >= 1e-12 && seconds <= 86400))
        throw InputError(file, fmt::format("line {}, column {} ({})", line_no, v.index + 1, header[v.index]),
                         fmt::format("`{}` makes the {}x{}x{} GeMM take {:.3g} s", row[v.index], gm, gn, gk, seconds),
                         "give the measured FLOP/s or time of the row's shape (a GeMM takes between 1 ps and 1 day)");
      m.gemm.push_back({v.dtype, gm, gn, gk, seconds, "", fmt::format("line {}", line_no)});
    }
  }
  if (header.empty()) throw InputError(file, "", "no header row", kLayoutFix);
  if (m.gemm.empty())
    throw InputError(file, fmt::format("line {}", header_line), "no GeMM row with a batch of 1",
                     "give rows of single GeMMs (b = 1, or no b column)");
  m.provenance = {{"format", "gemm table csv"}};
  if (!notes.empty()) m.provenance["notes"] = notes;
  if (skipped_batched > 0)
    m.provenance["skipped"] = fmt::format("{} rows of batched GeMMs (b > 1): the tables are over one GeMM's (M, N, K)",
                                          skipped_batched);
  return m;
}

}  // namespace moesim::calibrate
