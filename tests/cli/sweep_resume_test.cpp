// `moesim sweep`: a 3 x 2 grid over quickstart (node uplink bandwidth x pipelining degree). An
// uninterrupted run, a run stopped with --stop-after and resumed, and a run resumed after a crash
// left half a row all give the same results.csv byte for byte; a results.csv of another sweep is
// refused and left alone; and the values themselves follow the physics (less bandwidth, slower).
#include <chrono>
#include <random>

#include <sstream>
#include <nlohmann/json.hpp>
#include "cli_test_support.hpp"

namespace moesim_cli {
namespace {

const std::vector<std::string> kBandwidths{"400Gbps", "1600Gbps", "3200Gbps"};
const std::vector<int> kDegrees{1, 2};
constexpr std::size_t kPoints = 6;

class Sweep : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    file_ = scenario("sweep.json", sweep_doc(kBandwidths));
  }

  static OrderedJson sweep_doc(const std::vector<std::string>& bandwidths) {
    OrderedJson doc = quickstart();
    doc["training"]["iterations"] = 1;
    OrderedJson axes = OrderedJson::array();
    axes.push_back({{"path", "cluster.levels[0].bandwidth"}, {"values", bandwidths}});
    axes.push_back({{"path", "strategy.pipelining_degree"}, {"values", kDegrees}});
    doc["sweep"] = {{"axes", axes}};
    return doc;
  }

  Result sweep(const fs::path& out, std::vector<std::string> extra = {}, const fs::path& file = {},
               const std::string& shell = "") {
    std::vector<std::string> args{"sweep", (file.empty() ? file_ : file).string(), "--out", out.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return moesim(args, shell);
  }

  // The uninterrupted reference run (--jobs 2): root/A/results.csv.
  std::string reference() {
    const Result r = sweep(root_ / "A", {"--jobs", "2"});
    EXPECT_EQ(r.code, 0) << describe(r);
    const std::string csv = read_text(root_ / "A" / "results.csv");
    EXPECT_EQ(split_lines(csv).size(), 1 + kPoints) << csv;
    return csv;
  }

  fs::path file_;
};

TEST_F(Sweep, UninterruptedRunWritesEveryPointInGridOrder) {
  const std::string text = reference();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const Csv csv = Csv::parse(text);
  ASSERT_EQ(csv.rows.size(), kPoints);
  ASSERT_GE(csv.header.size(), 4u);
  EXPECT_EQ(csv.header[0], "point");
  EXPECT_EQ(csv.header[1], "cluster.levels[0].bandwidth");
  EXPECT_EQ(csv.header[2], "strategy.pipelining_degree");
  EXPECT_EQ(csv.header.back(), "note");
  for (std::size_t p = 0; p < kPoints; ++p) {
    ASSERT_EQ(csv.rows[p].size(), csv.header.size()) << "row " << p;
    EXPECT_EQ(csv.at(p, "point"), std::to_string(p));
    // The first axis varies slowest.
    EXPECT_EQ(csv.at(p, "cluster.levels[0].bandwidth"), kBandwidths[p / 2]);
    EXPECT_EQ(csv.at(p, "strategy.pipelining_degree"), std::to_string(kDegrees[p % 2]));
    EXPECT_EQ(csv.at(p, "status"), "ok");
    EXPECT_EQ(csv.at(p, "note"), "");
    EXPECT_NEAR(csv.number(p, "tokens_per_second") * csv.number(p, "iteration_time_ms") / 1e3, kQuickstartTokensPerIteration,
                1e-6 * kQuickstartTokensPerIteration);
  }
  // The folder holds the CSV and the effective base scenario, nothing else.
  EXPECT_EQ(listing(root_ / "A"), (std::set<std::string>{"results.csv", "scenario.effective.json"}));
  const Json eff = Json::parse(read_text(root_ / "A" / "scenario.effective.json"));
  EXPECT_EQ(eff.at("sweep").at("axes").size(), 2u);
}

TEST_F(Sweep, ValuesFollowBandwidth) {
  const Csv csv = Csv::parse(reference());
  ASSERT_EQ(csv.rows.size(), kPoints);
  for (std::size_t d = 0; d < kDegrees.size(); ++d) {
    for (std::size_t b = 0; b + 1 < kBandwidths.size(); ++b) {
      const std::size_t slow = b * 2 + d, fast = (b + 1) * 2 + d;
      // Less node bandwidth, longer iteration, for the same pipelining degree.
      EXPECT_GT(csv.number(slow, "iteration_time_ms"), csv.number(fast, "iteration_time_ms"))
          << kBandwidths[b] << " vs " << kBandwidths[b + 1] << ", pipelining " << kDegrees[d];
      EXPECT_GT(csv.number(slow, "all_to_all_busy_ms"), csv.number(fast, "all_to_all_busy_ms"));
      // The all-to-all crosses the node link: its time shrinks by most of the bandwidth ratio (the
      // node link dominates; NCCL's send/recv round per peer, 8 of them over InfiniBand, is the
      // part that does not shrink). With the flow model (the default) it can shrink by more: on
      // slow links the gradient all-reduce overlaps it longer and takes a share of the same links.
      const double bw_ratio = b == 0 ? 4.0 : 2.0;
      const double ratio = csv.number(slow, "all_to_all_busy_ms") / csv.number(fast, "all_to_all_busy_ms");
      EXPECT_GT(ratio, 0.75 * bw_ratio) << kBandwidths[b] << " vs " << kBandwidths[b + 1];
      // Compute and the bytes moved do not depend on the link speed.
      EXPECT_EQ(csv.at(slow, "compute_ms"), csv.at(fast, "compute_ms"));
      EXPECT_EQ(csv.at(slow, "bytes_level0"), csv.at(fast, "bytes_level0"));
      EXPECT_EQ(csv.at(slow, "bytes_level1"), csv.at(fast, "bytes_level1"));
    }
  }
  // Splitting the tokens in 2 chunks overlaps the all-to-all with expert compute: faster at every
  // bandwidth of this communication-bound setup.
  for (std::size_t b = 0; b < kBandwidths.size(); ++b)
    EXPECT_LT(csv.number(b * 2 + 1, "iteration_time_ms"), csv.number(b * 2, "iteration_time_ms")) << kBandwidths[b];
}

TEST_F(Sweep, PointMatchesASingleRun) {
  // The last point (3200Gbps, pipelining 2) is the base scenario itself with 1 iteration.
  const Csv csv = Csv::parse(reference());
  ASSERT_EQ(csv.rows.size(), kPoints);
  OrderedJson doc = sweep_doc(kBandwidths);
  doc.erase("sweep");
  const fs::path single = scenario("single.json", doc);
  const Result r = moesim({"run", single.string(), "--out", (root_ / "single").string(), "--quiet"});
  ASSERT_EQ(r.code, 0) << describe(r);
  const Json res = Json::parse(read_text(root_ / "single" / "results.json"));
  EXPECT_DOUBLE_EQ(csv.number(5, "iteration_time_ms"), res.at("iteration_time_ms").get<double>());
  EXPECT_DOUBLE_EQ(csv.number(5, "tokens_per_second"), res.at("tokens_per_second").get<double>());
  EXPECT_DOUBLE_EQ(csv.number(5, "peak_memory_bytes"), res.at("memory").at("peak_bytes").get<double>());
}

TEST_F(Sweep, StopAfterThenResumeIsByteIdentical) {
  const std::string a = reference();
  const fs::path b = root_ / "B";
  // 2 points, exit 3: header + 2 rows, identical to the first lines of A.
  Result r = sweep(b, {"--stop-after", "2"});
  EXPECT_EQ(r.code, 3) << describe(r);
  std::string text = read_text(b / "results.csv");
  auto lines = split_lines(text);
  ASSERT_EQ(lines.size(), 3u) << text;
  EXPECT_EQ(text, a.substr(0, text.size()));
  // 2 more, exit 3 again.
  r = sweep(b, {"--stop-after", "2", "--jobs", "2"});
  EXPECT_EQ(r.code, 3) << describe(r);
  text = read_text(b / "results.csv");
  EXPECT_EQ(split_lines(text).size(), 5u) << text;
  EXPECT_EQ(text, a.substr(0, text.size()));
  // The rest, exit 0: byte-identical to the uninterrupted run.
  r = sweep(b, {"--jobs", "1"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(read_text(b / "results.csv"), a);
  // A finished sweep re-run: nothing to do, nothing changed.
  r = sweep(b);
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("6 already done, 0 run now"), std::string::npos) << describe(r);
  EXPECT_EQ(read_text(b / "results.csv"), a);
  EXPECT_EQ(read_text(b / "scenario.effective.json"), read_text(root_ / "A" / "scenario.effective.json"));
}

TEST_F(Sweep, ResumeAfterCrashMidRow) {
  const std::string a = reference();
  const fs::path c = root_ / "C";
  fs::create_directories(c);
  // The sweep writes its effective scenario before the first row, so a crash leaves it behind.
  fs::copy_file(root_ / "A" / "scenario.effective.json", c / "scenario.effective.json");
  // A crash while writing the last row: half of it on disk, no newline.
  const std::size_t last_row = a.rfind('\n', a.size() - 2) + 1;
  const std::size_t cut = last_row + (a.size() - last_row) / 2;
  write_text(c / "results.csv", a.substr(0, cut));
  Result r = sweep(c, {"--jobs", "2"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(read_text(c / "results.csv"), a);

  // A crash earlier: 2 complete rows, the third cut after its point number.
  const auto lines = split_lines(a);
  write_text(c / "results.csv", lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n" + lines[3].substr(0, 2));
  r = sweep(c);
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(read_text(c / "results.csv"), a);

  // Only the header survived.
  write_text(c / "results.csv", lines[0] + "\n");
  r = sweep(c, {"--jobs", "2"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(read_text(c / "results.csv"), a);
}

// SIGKILL at seeded moments spread over the sweep (from before the header to the last rows): every
// kill leaves a folder the next run resumes from, and the CSV ends byte-identical. Whether a moment
// falls inside a run depends on the machine's timing (a resumed run has fewer points left, and on a
// fast machine process start-up is a large share of a run), so the rounds go on until 10 of them
// were killed rather than counting kills among a fixed number of rounds, which was flaky in CI.
TEST_F(Sweep, KilledAtRandomMomentsResumesByteIdentical) {
  const auto started = std::chrono::steady_clock::now();
  const std::string a = reference();
  const double full = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const fs::path k = root_ / "K";
  std::mt19937 rng(14);
  std::uniform_real_distribution<double> moment(0.0, full);
  constexpr int kKills = 10, kMaxRounds = 80;
  int killed = 0, rounds = 0;
  for (; killed < kKills && rounds < kMaxRounds; ++rounds) {
    const Result r = sweep(k, {"--jobs", "2"}, {}, fmt::format("exec timeout -s KILL {:.3f}", moment(rng)));
    if (r.code == 128 + 9 || r.code == 137) ++killed;
    else EXPECT_EQ(r.code, 0) << describe(r);
    // Whatever the moment, the CSV on disk is a prefix of complete rows (a partial last row at most).
    if (fs::exists(k / "results.csv")) {
      const std::string text = read_text(k / "results.csv");
      EXPECT_EQ(text, a.substr(0, text.size()));
    }
    if (r.code == 0) fs::remove_all(k);  // finished: start over, so every round is killed somewhere
  }
  RecordProperty("rounds", rounds);
  EXPECT_EQ(killed, kKills) << "fewer than " << kKills << " of " << kMaxRounds << " rounds were killed mid-run";
  const Result r = sweep(k, {"--jobs", "2"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(read_text(k / "results.csv"), a);
}

// A write that fails (here the file-size limit, as a full disk would) exits 1 naming the file; the
// CSV keeps only complete rows, and a resume without the limit gives the uninterrupted CSV. The
// limit holds for every file, so the CSV must outgrow the effective scenario (with its GPU's
// catalogue entry, measured attention kernels included): 40 bandwidths x 2.
TEST_F(Sweep, FailedWriteExitsNonZeroAndResumeIsIdentical) {
  std::vector<std::string> bandwidths;
  for (int g = 1; g <= 40; ++g) bandwidths.push_back(fmt::format("{}Gbps", 200 * g));
  const fs::path file = scenario("long.json", sweep_doc(bandwidths));
  Result r = sweep(root_ / "A", {"--jobs", "2"}, file);
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::string a = read_text(root_ / "A" / "results.csv");
  const auto effective = fs::file_size(root_ / "A" / "scenario.effective.json");
  // sh's ulimit -f counts 512-byte blocks: room for the effective scenario, not for every row.
  const std::size_t blocks = (effective + 511) / 512;
  ASSERT_LT(blocks * 512 + 512, a.size()) << "the limit would not cut the CSV";
  const fs::path w = root_ / "W";
  r = sweep(w, {"--jobs", "1"}, file, fmt::format("trap '' XFSZ; ulimit -f {}; exec", blocks));
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(r.err, fmt::format("moesim: error: cannot write {}: File too large\n", (w / "results.csv").string()))
      << describe(r);
  const std::string text = read_text(w / "results.csv");
  EXPECT_EQ(text, a.substr(0, text.size()));
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_LT(text.size(), a.size());
  const Result resumed = sweep(w, {"--jobs", "2"}, file);
  EXPECT_EQ(resumed.code, 0) << describe(resumed);
  EXPECT_EQ(read_text(w / "results.csv"), a);
}

TEST_F(Sweep, ForeignCsvIsRefusedAndLeftAlone) {
  const fs::path d = root_ / "D";
  fs::create_directories(d);
  const std::string foreign = "point,model.experts,status\n0,8,ok\n1,16,ok\n";
  write_text(d / "results.csv", foreign);
  const Result r = sweep(d, {"--jobs", "2"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
  EXPECT_NE(r.err.find((d / "results.csv").string()), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("header"), std::string::npos) << describe(r);
  EXPECT_EQ(read_text(d / "results.csv"), foreign);
  // Nothing else written next to it either.
  EXPECT_EQ(listing(d), std::set<std::string>{"results.csv"});
}

TEST_F(Sweep, CsvOfSameAxesButOtherValuesIsNotResumed) {
  // Stop a sweep after 2 points (both at 400Gbps), then change the first axis' values and resume.
  // The 2 kept rows were computed at 400Gbps but the grid now says 100Gbps: keeping them would mix
  // two different sweeps in one file. Either refuse (exit 2, file untouched) or recompute: the file
  // must end up equal to a fresh run of the new grid.
  const fs::path e = root_ / "E";
  Result r = sweep(e, {"--stop-after", "2"});
  ASSERT_EQ(r.code, 3) << describe(r);
  const std::string partial = read_text(e / "results.csv");
  const std::vector<std::string> changed{"100Gbps", "1600Gbps", "3200Gbps"};
  const fs::path edited = scenario("sweep-edited.json", sweep_doc(changed));
  r = sweep(e, {}, edited);
  const fs::path fresh = root_ / "fresh";
  const Result f = sweep(fresh, {}, edited);
  ASSERT_EQ(f.code, 0) << describe(f);
  if (r.code == 2) {
    EXPECT_EQ(read_text(e / "results.csv"), partial);
  } else {
    EXPECT_EQ(r.code, 0) << describe(r);
    const std::string got = read_text(e / "results.csv");
    EXPECT_EQ(got, read_text(fresh / "results.csv")) << "resume kept rows of another grid:\n" << got;
  }
}

TEST_F(Sweep, CsvOfAnotherBaseScenarioIsNotResumed) {
  // Same axes and values, but the scenario under them changed (half the micro-batch): the 2 kept
  // rows describe another scenario. Either refuse (exit 2, file untouched) or recompute: the file
  // must end up equal to a fresh run of the edited scenario.
  const fs::path e = root_ / "E";
  Result r = sweep(e, {"--stop-after", "2"});
  ASSERT_EQ(r.code, 3) << describe(r);
  const std::string partial = read_text(e / "results.csv");
  OrderedJson doc = sweep_doc(kBandwidths);
  doc["training"]["micro_batch_size"] = 4;
  const fs::path edited = scenario("sweep-edited.json", doc);
  r = sweep(e, {}, edited);
  const fs::path fresh = root_ / "fresh";
  const Result f = sweep(fresh, {}, edited);
  ASSERT_EQ(f.code, 0) << describe(f);
  ASSERT_NE(read_text(fresh / "results.csv").substr(0, partial.size()), partial) << "the edit changes no value";
  if (r.code == 2) {
    EXPECT_EQ(read_text(e / "results.csv"), partial);
  } else {
    EXPECT_EQ(r.code, 0) << describe(r);
    const std::string got = read_text(e / "results.csv");
    EXPECT_EQ(got, read_text(fresh / "results.csv")) << "resume kept rows of another scenario:\n" << got;
  }
}

// A zipped axis (bandwidth and pipelining degree moving together) crossed with a plain one: one
// CSV column per path, in the order given, the zipped axis slowest here; 2 x 2 = 4 points. A run
// stopped after one point and resumed gives the uninterrupted run's CSV byte for byte.
TEST_F(Sweep, ZippedAxisColumnsAndResume) {
  OrderedJson doc = quickstart();
  doc["training"]["iterations"] = 1;
  doc["sweep"] = OrderedJson::parse(R"({"axes": [
      {"paths": ["cluster.levels[0].bandwidth", "strategy.pipelining_degree"], "values": [["400Gbps", 1], ["3200Gbps", 2]]},
      {"path": "training.micro_batch_size", "values": [4, 8]}]})");
  const fs::path zipped = scenario("zipped.json", doc);
  Result r = sweep(root_ / "Z", {"--jobs", "2"}, zipped);
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::string a = read_text(root_ / "Z" / "results.csv");
  const Csv csv = Csv::parse(a);
  ASSERT_EQ(csv.rows.size(), 4u) << a;
  ASSERT_GE(csv.header.size(), 5u);
  EXPECT_EQ(csv.header[0], "point");
  EXPECT_EQ(csv.header[1], "cluster.levels[0].bandwidth");
  EXPECT_EQ(csv.header[2], "strategy.pipelining_degree");
  EXPECT_EQ(csv.header[3], "training.micro_batch_size");
  EXPECT_EQ(csv.header[4], "status");
  const char* bw[] = {"400Gbps", "3200Gbps"};
  const char* degree[] = {"1", "2"};
  const char* mb[] = {"4", "8"};
  for (std::size_t p = 0; p < 4; ++p) {
    EXPECT_EQ(csv.at(p, "cluster.levels[0].bandwidth"), bw[p / 2]) << "row " << p;
    EXPECT_EQ(csv.at(p, "strategy.pipelining_degree"), degree[p / 2]) << "row " << p;
    EXPECT_EQ(csv.at(p, "training.micro_batch_size"), mb[p % 2]) << "row " << p;
    EXPECT_EQ(csv.at(p, "status"), "ok") << "row " << p;
  }
  // Faster links and pipelining: a shorter iteration at the same micro-batch.
  EXPECT_GT(csv.number(1, "iteration_time_ms"), csv.number(3, "iteration_time_ms"));

  const fs::path b = root_ / "Y";
  r = sweep(b, {"--stop-after", "1"}, zipped);
  EXPECT_EQ(r.code, 3) << describe(r);
  EXPECT_EQ(split_lines(read_text(b / "results.csv")).size(), 2u);
  r = sweep(b, {"--jobs", "2"}, zipped);
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("1 already done, 3 run now"), std::string::npos) << describe(r);
  EXPECT_EQ(read_text(b / "results.csv"), a);
}

// `moesim run SCENARIO --point P` runs point P of the grid alone (here with a trace): the same
// iteration time as the sweep's row P, an effective scenario without the sweep block.
TEST_F(Sweep, OnePointRunsAloneAsItsRow) {
  const auto rows = split_lines(reference());
  const fs::path out = root_ / "P";
  const Result r = moesim({"run", file_.string(), "--point", "3", "--trace", "-o", out.string(), "--quiet"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(fs::exists(out / "trace.json"));
  const auto results = nlohmann::json::parse(read_text(out / "results.json"));
  // Row 3's iteration_time_ms (the fifth column: point, two axes, status, iteration time).
  std::vector<std::string> cells;
  std::stringstream row(rows.at(4));
  for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
  ASSERT_EQ(cells.at(0), "3");
  EXPECT_DOUBLE_EQ(results.at("iteration_time_ms").get<double>(), std::stod(cells.at(4)));
  const auto effective = nlohmann::json::parse(read_text(out / "scenario.effective.json"));
  EXPECT_FALSE(effective.contains("sweep"));
  // Beyond the grid, or a scenario without one: refused, exit 2.
  EXPECT_EQ(moesim({"run", file_.string(), "--point", std::to_string(kPoints), "-o", (root_ / "Q").string()}).code, 2);
  EXPECT_EQ(moesim({"run", kQuickstart.string(), "--point", "0", "-o", (root_ / "Q").string()}).code, 2);
  EXPECT_FALSE(fs::exists(root_ / "Q"));
}

// A grid none of whose points can run (here: 2000 and 3000 layers, far beyond an H100's memory)
// exits 2 and says so on stderr; the CSV keeps each point's reason.
TEST_F(Sweep, EveryPointRefusedExits2) {
  OrderedJson doc = quickstart();
  doc["training"]["iterations"] = 1;
  doc["sweep"] = {{"axes", OrderedJson::array({{{"path", "model.layers"}, {"values", {2000, 3000}}}})}};
  const fs::path file = scenario("refused.json", doc);
  const Result r = sweep(root_ / "R", {}, file);
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_TRUE(r.err.starts_with("moesim: cannot run: every point of the sweep was refused;")) << describe(r);
  const auto rows = split_lines(read_text(root_ / "R" / "results.csv"));
  ASSERT_EQ(rows.size(), 3u);
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_NE(rows[i].find(",infeasible,"), std::string::npos) << rows[i];
  // One point that runs is an answer: exit 0.
  doc["sweep"]["axes"][0]["values"] = {2, 3000};
  const Result mixed = sweep(root_ / "M", {}, scenario("mixed.json", doc));
  EXPECT_EQ(mixed.code, 0) << describe(mixed);
}

}  // namespace
}  // namespace moesim_cli
