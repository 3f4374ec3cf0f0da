#include "calibrate/fit/nccl_tests_log.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "sim/calibration/nccl_tests.hpp"
#include "sim/core/error.hpp"
#include "sim/core/units.hpp"

namespace moesim::calibrate {

using calibration::nccl_tests::busbw_factor;
using calibration::nccl_tests::canonical;

namespace {

const std::regex& prefix_re() {
  static const std::regex re(R"(^\s*(\[\d+,\d+\]<std(out|err)>:|\d+:(?=\s)))");
  return re;
}
constexpr std::size_t kMaxLogLine = 4096;

const std::regex& rank_re() {
  static const std::regex re(R"(^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.*?)\s*$)");
  return re;
}
// A Rank line cut short ("#  Rank 71 ..."): its index only.
const std::regex& rank_index_re() {
  static const std::regex re(R"(^#\s*Rank\s+(\d+)\b.*$)");
  return re;
}
const std::regex& threads_re() {
  static const std::regex re(R"(nThread\s+(\d+)\s+nGpus\s+(\d+))");
  return re;
}
const std::regex& name_re() {
  static const std::regex re(R"((all_?reduce|all_?gather|all_?to_?all|reduce_?scatter|send_?recv))", std::regex::icase);
  return re;
}

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool is_integer(const std::string& t) {
  return !t.empty() && std::all_of(t.begin() + (t[0] == '-' ? 1 : 0), t.end(), [](char c) { return std::isdigit(c); }) &&
         t != "-";
}

// Half the last printed digit of a number as nccl-tests printed it ("12.34" → 0.005).
double half_ulp(const std::string& t) {
  const auto dot = t.find('.');
  const auto digits = dot == std::string::npos ? 0 : static_cast<int>(t.size() - dot - 1);
  return 0.5 * std::pow(10.0, -digits);
}

struct Row {
  double bytes = 0;
  std::vector<double> times;  // µs, out-of-place then in-place
  double algbw = 0, busbw = 0;
  double algbw_ulp = 0, busbw_ulp = 0;  // half their last printed digit
  int line = 0;
};

struct Table {
  int index = 0;
  int first_line = 0;
  std::string preamble;       // text since the previous table
  std::string named;          // collective named by "Collective test starting"
  std::map<int, std::string> rank_hosts;
  int largest_rank = -1;   // of every Rank line, elided ones too
  int threads_gpus = 0;    // nThread × nGpus of the preamble
  std::string gpu, nccl, command;
  std::vector<Row> rows;
};

}  // namespace

std::vector<Series> read_nccl_tests_log(std::string_view text, const std::string& file, const NcclTestsOptions& options) {
  std::vector<Table> tables;
  Table pending;  // preamble of the next table
  bool in_table = false;
  std::istringstream in{std::string(text)};
  int line_no = 0;
  const auto where = [&](const Table& t, int line) { return fmt::format("table {} (line {})", t.index + 1, line); };
  for (std::string raw; std::getline(in, raw);) {
    ++line_no;
    // nccl-tests lines are under 200 characters; the regular expressions below recurse per
    // character, so a megabyte line must not reach them.
    if (raw.size() > kMaxLogLine)
      throw InputError(file, fmt::format("line {}", line_no),
                       fmt::format("a line of {} characters (nccl-tests writes lines under 200)", raw.size()),
                       "give the log as nccl-tests wrote it");
    std::string line = std::regex_replace(raw, prefix_re(), "", std::regex_constants::format_first_only);
    const auto first = line.find_first_not_of(" \t\r");
    line = first == std::string::npos ? "" : line.substr(first);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    // Blank lines, and "..." where an excerpt elided rows, neither start nor end a table.
    if (line.empty() || line.find_first_not_of(".… ") == std::string::npos) continue;
    const std::vector<std::string> tok = tokens(line);
    const bool row = tok.size() >= 6 && is_integer(tok[0]) && is_integer(tok[1]) && !parse_number(tok[2]);
    Table& cur = in_table ? tables.back() : pending;
    if (row) {
      if (!in_table) throw InputError(file, fmt::format("line {}", line_no), "a result row before any table header",
                                      "keep nccl-tests' `# size count type ...` header above the rows");
      // size count type redop [root] then per half: time algbw busbw #wrong.
      std::size_t k = 4;
      const std::size_t rest = tok.size() - 4;
      if (rest == 9 || rest == 5) ++k;  // a root column
      else if (rest != 8 && rest != 4)
        throw InputError(file, where(cur, line_no), fmt::format("a row of {} columns", tok.size()),
                         "give nccl-tests rows as printed: size count type redop [root] time algbw busbw #wrong ...");
      Row r;
      r.bytes = *parse_number(tok[0]);
      r.line = line_no;
      for (std::size_t half = k; half + 3 <= tok.size(); half += 4) {
        const auto t = parse_number(tok[half]);
        const auto alg = parse_number(tok[half + 1]);
        const auto bus = parse_number(tok[half + 2]);
        if (!t || !alg || !bus)
          throw InputError(file, where(cur, line_no), fmt::format("\"{}\" is not a time", tok[half]),
                           "the row is damaged; fix or delete it");
        r.times.push_back(*t);
        if (*alg > r.algbw) {
          r.algbw = *alg;
          r.busbw = *bus;
          r.algbw_ulp = half_ulp(tok[half + 1]);
          r.busbw_ulp = half_ulp(tok[half + 2]);
        }
      }
      cur.rows.push_back(std::move(r));
      continue;
    }
    if (line[0] == '#') {
      const std::string body = line.substr(line.find_first_not_of("# \t") == std::string::npos ? line.size()
                                                                                               : line.find_first_not_of("# \t"));
      const std::vector<std::string> h = tokens(body);
      if (h.size() >= 3 && h[0] == "size" && h[1] == "count" && h[2] == "type") {
        // A table header: what came before is this table's preamble.
        Table t = in_table ? Table{} : std::move(pending);
        t.index = static_cast<int>(tables.size());
        t.first_line = line_no;
        tables.push_back(std::move(t));
        pending = Table{};
        in_table = true;
        continue;
      }
      if (h.size() >= 3 && h[0] == "(B)" && h[1] == "(elements)") {
        const bool us = std::find(h.begin(), h.end(), "(us)") != h.end();
        if (!us)
          throw InputError(file, where(cur, line_no), fmt::format("times are not in microseconds: \"{}\"", body),
                           "nccl-tests prints times in us; give the log as nccl-tests wrote it (mixed or converted units "
                           "are refused)");
        continue;
      }
      if (in_table && !tables.back().rows.empty()) in_table = false;  // a footer ends the rows
      Table& target = in_table ? tables.back() : pending;
      std::smatch m;
      if (std::regex_match(line, m, rank_re())) {
        const std::string rank = m[1];
        if (rank.size() > 7)
          throw InputError(file, fmt::format("line {}", line_no), fmt::format("rank {} of an impossible job size", rank),
                           "give the log as nccl-tests wrote it");
        target.rank_hosts[std::stoi(rank)] = m[2];
        target.largest_rank = std::max(target.largest_rank, std::stoi(rank));
        target.gpu = m[3];
        continue;
      }
      if (std::regex_match(line, m, rank_index_re())) {
        const std::string rank = m[1];
        if (rank.size() > 7)
          throw InputError(file, fmt::format("line {}", line_no), fmt::format("rank {} of an impossible job size", rank),
                           "give the log as nccl-tests wrote it");
        target.largest_rank = std::max(target.largest_rank, std::stoi(rank));
        continue;
      }
      if (std::regex_search(line, m, threads_re()) && m[1].length() < 6 && m[2].length() < 6)
        target.threads_gpus = std::stoi(m[1]) * std::stoi(m[2]);
      if (const auto pos = body.find("Collective test starting:"); pos != std::string::npos)
        if (const auto named = tokens(body.substr(pos + 25)); !named.empty()) target.named = canonical(named[0]);
      target.preamble += body + "\n";
      continue;
    }
    // Any other line (NCCL version, launcher output, prose): preamble of the next table.
    if (in_table && !tables.back().rows.empty()) in_table = false;
    Table& target = in_table ? tables.back() : pending;
    if (line.rfind("NCCL version", 0) == 0) target.nccl = tokens(line).size() > 2 ? tokens(line)[2] : "";
    target.preamble += line + "\n";
  }

  std::vector<Series> out;
  std::string previous;  // a table that names no collective continues the log's previous one
  for (Table& t : tables) {
    const std::string at = where(t, t.first_line);
    if (t.rows.empty()) continue;
    // The collective: named by the test, or the last test name in the text before the table.
    std::string collective = t.named;
    if (collective.empty()) {
      for (auto it = std::sregex_iterator(t.preamble.begin(), t.preamble.end(), name_re()); it != std::sregex_iterator(); ++it)
        collective = canonical((*it)[1]);
    }
    if (collective.empty()) collective = options.collective.empty() ? previous : options.collective;
    previous = collective;
    // --table picks one table: the others' collectives and ranks (which --ranks describes not) are
    // not checked.
    if (options.table && t.index + 1 != *options.table) continue;
    if (collective.empty())
      throw InputError(file, at, "the log does not say which collective this table measured",
                       "pass --collective all_reduce|all_gather|reduce_scatter|all_to_all|send_recv");
    // Ranks: stated, listed, one process's GPUs, or solved from busbw/algbw. The ratio's
    // uncertainty comes from the printed digits: r = b/a with b ± δb, a ± δa is known to
    // r·(δb/b + δa/a). Each row admits an interval of rank counts; the table's are those most rows
    // admit (one row whose cells disagree, a cell printed to other digits than its busbw, does not
    // decide), the most precise row naming the table in the messages.
    int ranks = options.ranks ? *options.ranks
                : t.largest_rank >= 0 ? t.largest_rank + 1
                : t.threads_gpus > 1 ? t.threads_gpus
                                     : 0;
    const char* said_by = options.ranks ? "--ranks" : t.largest_rank >= 0 ? "the Rank lines" : "nThread × nGpus";
    const Row* best = nullptr;
    double best_rel = 0;
    for (const Row& r : t.rows) {
      if (r.algbw <= 0 || r.busbw <= 0) continue;
      const double rel = r.busbw_ulp / r.busbw + r.algbw_ulp / r.algbw;
      if (!best || rel < best_rel) {
        best = &r;
        best_rel = rel;
      }
    }
    if (best && collective != "send_recv") {
      // n from the ratio: 2/(2 − r) for all_reduce, 1/(1 − r) for the others; increasing in r.
      const auto n_of = [&](double r) {
        const double top = collective == "all_reduce" ? 2.0 : 1.0;
        return r >= top ? std::numeric_limits<double>::infinity() : top / (top - r);
      };
      constexpr long long kAny = 1LL << 40;  // no upper bound
      // The rank counts a row's digits admit, [first, last] (empty: last < first).
      const auto admitted = [&](const Row& r) -> std::pair<long long, long long> {
        const double ratio = r.busbw / r.algbw, delta = ratio * (r.busbw_ulp / r.busbw + r.algbw_ulp / r.algbw);
        const double lo = n_of(ratio - delta), hi = n_of(ratio + delta);
        // lo infinite: even the smallest ratio the digits allow is beyond every rank count's factor.
        if (!std::isfinite(lo)) return {1, 0};
        const auto first = std::max(2LL, static_cast<long long>(std::ceil(lo - 1e-9)));
        const auto last = std::isfinite(hi) ? static_cast<long long>(std::floor(hi + 1e-9)) : kAny;
        return {first, last};
      };
      // The interval most rows admit: every row's bounds are candidate ends; count the rows
      // admitting each candidate count and keep the widest run of the best-supported ones.
      std::vector<std::pair<long long, long long>> spans;
      for (const Row& r : t.rows)
        if (r.algbw > 0 && r.busbw > 0) spans.push_back(admitted(r));
      const auto support = [&](long long n) {
        int k = 0;
        for (const auto& [f, l] : spans) k += f <= n && n <= l;
        return k;
      };
      int most = 0;
      long long first = 1, last = 0;
      for (const auto& [f, l] : spans)
        for (const long long n : {f, l}) {
          if (l < f) continue;
          const int k = support(n);
          if (k > most) most = k, first = last = n;
          else if (k == most) first = std::min(first, n), last = std::max(last, n);
        }
      const double ratio = best->busbw / best->algbw;
      if (most == 0)
        throw InputError(file, at,
                         fmt::format("busbw/algbw = {:.4f} (line {}) is not the {} factor of any rank count", ratio,
                                     best->line, collective),
                         "check the collective (pass --collective if the log misnames it)");
      if (ranks > 0 && (ranks < first || ranks > last))
        throw InputError(file, at,
                         fmt::format("busbw/algbw = {:.4f} (line {}) means {} ranks for {}, but {} say {}", ratio,
                                     best->line, first == last ? fmt::to_string(first) : fmt::format("{}–{}", first, last),
                                     collective, said_by, ranks),
                         "the table is of another collective or rank count; pass --collective or --ranks, or fix the log");
      if (ranks == 0) {
        if (first != last)
          throw InputError(file, at,
                           fmt::format("busbw/algbw = {:.5f} (line {}, to the printed digits) fits {} ranks from {} to {}: "
                                       "it cannot tell them apart, and the log lists no Rank lines",
                                       ratio, best->line, collective, first, last == kAny ? "any above" : fmt::to_string(last)),
                           "pass --ranks N (the job's GPU count)");
        ranks = static_cast<int>(first);
      }
    }
    if (ranks < 2)
      throw InputError(file, at, "cannot tell how many ranks ran this table",
                       "keep the `#  Rank N ...` lines of the log, or pass --ranks N");
    std::set<std::string> hosts;
    for (const auto& [r, h] : t.rank_hosts) hosts.insert(h);
    const bool every_rank_listed = static_cast<int>(t.rank_hosts.size()) == ranks;
    int nodes = options.nodes ? *options.nodes : every_rank_listed ? static_cast<int>(hosts.size()) : 0;
    if (nodes == 0 && options.gpus_per_node) nodes = (ranks + *options.gpus_per_node - 1) / *options.gpus_per_node;

    Series s;
    s.collective = collective;
    s.ranks = ranks;
    s.nodes = nodes;
    s.split = collective == "all_to_all" ? "even" : "";
    s.variant = "out-of-place and in-place";
    s.time_unit = "us";
    s.file = file;
    s.where = at;
    s.table = t.index + 1;
    s.provenance = {{"source", file}, {"table", t.index + 1}, {"format", "nccl-tests log"}};
    if (!t.gpu.empty()) s.provenance["gpu"] = t.gpu;
    if (!t.nccl.empty()) s.provenance["nccl"] = t.nccl;
    if (!hosts.empty()) s.provenance["hosts"] = std::vector<std::string>(hosts.begin(), hosts.end());
    for (const Row& r : t.rows) {
      if (r.bytes <= 0) continue;
      for (double us : r.times) s.samples.push_back({r.bytes, us * 1e-6, fmt::format("{} line {}", file, r.line)});
    }
    out.push_back(std::move(s));
  }
  if (options.table) {
    const auto it = std::find_if(out.begin(), out.end(), [&](const Series& s) { return s.table == *options.table; });
    if (it == out.end())
      throw InputError(file, "",
                       fmt::format("no table {} (the log has {} with results)", *options.table,
                                   std::count_if(tables.begin(), tables.end(), [](const Table& t) { return !t.rows.empty(); })),
                       "pass --table between 1 and the number of result tables");
    return {*it};
  }
  if (out.empty())
    throw InputError(file, "", "no nccl-tests result table found",
                     "give the output of an nccl-tests binary (all_reduce_perf, alltoall_perf, ...)");
  return out;
}

}  // namespace moesim::calibrate
