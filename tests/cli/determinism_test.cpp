// Determinism of `moesim run`: the same scenario gives byte-identical files, --trace adds a valid
// Chrome trace without changing the results, and the written scenario.effective.json reruns to the
// very same results.
#include <map>

#include "cli_test_support.hpp"

namespace moesim_cli {
namespace {

constexpr int kGpus = 16;  // the quickstart's 2 nodes x 8 H100

class Determinism : public CliTest {
 protected:
  // Runs quickstart (or FILE) into root/NAME; returns the folder.
  fs::path run_into(const std::string& name, const fs::path& file = kQuickstart, bool trace = false) {
    const fs::path out = root_ / name;
    std::vector<std::string> args{"run", file.string(), "--out", out.string()};
    if (trace) args.push_back("--trace");
    const Result r = moesim(args);
    EXPECT_EQ(r.code, 0) << describe(r);
    EXPECT_EQ(r.err, "") << describe(r);
    return out;
  }
};

TEST_F(Determinism, TwoRunsAreByteIdentical) {
  const fs::path a = run_into("a");
  const fs::path b = run_into("b");
  // Exactly the two files (no trace without --trace, no temporary file left behind).
  EXPECT_EQ(listing(a), (std::set<std::string>{"results.json", "scenario.effective.json"}));
  EXPECT_EQ(listing(b), listing(a));
  const std::string results = read_text(a / "results.json");
  ASSERT_FALSE(results.empty());
  EXPECT_EQ(read_text(b / "results.json"), results);
  EXPECT_EQ(read_text(b / "scenario.effective.json"), read_text(a / "scenario.effective.json"));
  // Nothing landed in the current folder (no default out/quickstart).
  EXPECT_TRUE(listing(work_).empty());
}

TEST_F(Determinism, ResultsHoldConsistentValues) {
  const fs::path a = run_into("a");
  const Json r = Json::parse(read_text(a / "results.json"));
  EXPECT_EQ(r.at("scenario"), "quickstart");
  EXPECT_EQ(r.at("cluster").at("gpus"), kGpus);
  EXPECT_EQ(r.at("strategy").at("name"), "ep");
  EXPECT_EQ(r.at("strategy").at("ep_size"), 16);
  EXPECT_EQ(r.at("strategy").at("experts_per_gpu"), 2);  // 32 experts over 16 GPUs
  EXPECT_EQ(r.at("strategy").at("pipelining_degree"), 2);
  const Json& its = r.at("iterations");
  ASSERT_EQ(its.size(), 2u);
  double sum = 0, end = 0;
  for (const Json& it : its) {
    const double t = it.at("time_ms").get<double>();
    EXPECT_GT(t, 0);
    sum += t;
    end += t;
    EXPECT_NEAR(it.at("end_ms").get<double>(), end, 1e-9 * end);  // iterations run back to back
  }
  const double mean = r.at("iteration_time_ms").get<double>();
  EXPECT_NEAR(mean, sum / 2, 1e-9 * mean);
  EXPECT_NEAR(r.at("iteration_time_ps").get<double>(), mean * 1e9, 1.0);
  // Throughput is the tokens of one iteration over its time.
  EXPECT_NEAR(r.at("tokens_per_second").get<double>(), kQuickstartTokensPerIteration / (mean / 1e3), 1e-6 * kQuickstartTokensPerIteration);
  // The summary on stdout reports the same mean iteration time (4 significant digits).
  const Result s = moesim({"run", kQuickstart.string(), "--out", (root_ / "s").string()});
  ASSERT_EQ(s.code, 0) << describe(s);
  EXPECT_NE(s.out.find(fmt::format("{:.4g} ms", mean)), std::string::npos) << describe(s);
  EXPECT_EQ(read_text(root_ / "s" / "results.json"), read_text(a / "results.json"));
}

TEST_F(Determinism, EffectiveScenarioSpellsOutDefaults) {
  const fs::path a = run_into("a");
  const Json e = Json::parse(read_text(a / "scenario.effective.json"));
  EXPECT_EQ(e.at("name"), "quickstart");
  EXPECT_EQ(e.at("seed"), 7);
  // Presets are expanded, defaults filled in.
  ASSERT_EQ(e.at("cluster").at("levels").size(), 2u);
  EXPECT_EQ(e.at("cluster").at("levels")[0].at("bandwidth"), "3200Gbps");
  EXPECT_EQ(e.at("cluster").at("levels")[0].at("oversubscription"), 1.0);
  EXPECT_EQ(e.at("cluster").at("levels")[1].at("count"), 8);
  EXPECT_EQ(e.at("model").at("experts"), 32);
  EXPECT_EQ(e.at("model").at("layers"), 12);
  EXPECT_EQ(e.at("strategy").at("ep_size"), 16);
  EXPECT_EQ(e.at("strategy").at("all_to_all"), "direct");
  EXPECT_EQ(e.at("strategy").at("gradient_sync"), "overlap");
  EXPECT_EQ(e.at("training").at("iterations"), 2);
  EXPECT_TRUE(e.at("gpus").contains("h100-sxm5-80gb"));
  EXPECT_FALSE(e.contains("sweep"));
}

TEST_F(Determinism, TraceIsValidAndDoesNotChangeResults) {
  const fs::path a = run_into("a");
  const fs::path t = run_into("t", kQuickstart, /*trace=*/true);
  EXPECT_EQ(listing(t), (std::set<std::string>{"results.json", "scenario.effective.json", "trace.json"}));
  EXPECT_EQ(read_text(t / "results.json"), read_text(a / "results.json"));
  EXPECT_EQ(read_text(t / "scenario.effective.json"), read_text(a / "scenario.effective.json"));

  Json trace;
  ASSERT_NO_THROW(trace = Json::parse(read_text(t / "trace.json")));
  ASSERT_TRUE(trace.contains("traceEvents"));
  const Json& events = trace.at("traceEvents");
  ASSERT_TRUE(events.is_array());

  std::map<int, std::string> process_names;
  std::map<int, std::size_t> spans_per_gpu;
  std::size_t spans = 0;
  double last_end_us = 0;
  for (const Json& ev : events) {
    ASSERT_TRUE(ev.contains("ph")) << ev.dump();
    const std::string ph = ev.at("ph");
    if (ph == "M" && ev.at("name") == "process_name") {
      const int pid = ev.at("pid");
      EXPECT_EQ(process_names.count(pid), 0u) << "two process_name records for pid " << pid;
      process_names[pid] = ev.at("args").at("name");
    }
    if (ph == "X") {
      ++spans;
      const double ts = ev.at("ts").get<double>();
      const double dur = ev.at("dur").get<double>();
      EXPECT_GE(dur, 0.0) << ev.dump();
      EXPECT_GE(ts, 0.0) << ev.dump();
      const int pid = ev.at("pid");
      EXPECT_GE(pid, 0) << ev.dump();
      EXPECT_LT(pid, kGpus) << ev.dump();
      ++spans_per_gpu[pid];
      last_end_us = std::max(last_end_us, ts + dur);
    }
  }
  // One named process per GPU: pids 0..15, "GPU N (h100-sxm5-80gb)".
  ASSERT_EQ(process_names.size(), static_cast<std::size_t>(kGpus));
  for (int g = 0; g < kGpus; ++g) {
    ASSERT_TRUE(process_names.count(g)) << "no process_name for GPU " << g;
    EXPECT_NE(process_names[g].find(fmt::format("GPU {}", g)), std::string::npos) << process_names[g];
    EXPECT_NE(process_names[g].find("h100-sxm5-80gb"), std::string::npos) << process_names[g];
    EXPECT_GT(spans_per_gpu[g], 0u) << "GPU " << g << " has no span";
  }
  EXPECT_GT(spans, 0u);
  // The last span ends when the last iteration ends (trace times in microseconds).
  const Json r = Json::parse(read_text(a / "results.json"));
  const double end_ms = r.at("iterations").back().at("end_ms").get<double>();
  EXPECT_NEAR(last_end_us, end_ms * 1e3, 1e-3) << "trace ends at " << last_end_us << " us, the run at " << end_ms << " ms";
}

TEST_F(Determinism, TraceIsDeterministic) {
  const fs::path t1 = run_into("t1", kQuickstart, true);
  const fs::path t2 = run_into("t2", kQuickstart, true);
  const std::string trace = read_text(t1 / "trace.json");
  ASSERT_FALSE(trace.empty());
  EXPECT_TRUE(trace == read_text(t2 / "trace.json")) << "two traces of the same scenario differ";
}

TEST_F(Determinism, EffectiveScenarioRerunsToIdenticalResults) {
  const fs::path a = run_into("a");
  // Run the effective scenario where it was written, and from a copy elsewhere: nothing in it
  // depends on the folder it sits in.
  const fs::path b = run_into("b", a / "scenario.effective.json");
  EXPECT_EQ(read_text(b / "results.json"), read_text(a / "results.json"));
  fs::copy_file(a / "scenario.effective.json", work_ / "copy.json");
  const fs::path c = run_into("c", work_ / "copy.json");
  EXPECT_EQ(read_text(c / "results.json"), read_text(a / "results.json"));
  // The effective scenario is a fixed point: rerunning it writes it back byte for byte.
  EXPECT_EQ(read_text(b / "scenario.effective.json"), read_text(a / "scenario.effective.json"));
  EXPECT_EQ(read_text(c / "scenario.effective.json"), read_text(a / "scenario.effective.json"));
  // And validate accepts it.
  const Result v = moesim({"validate", (a / "scenario.effective.json").string()});
  EXPECT_EQ(v.code, 0) << describe(v);
  EXPECT_NE(v.out.find("valid (ep on 16 GPUs"), std::string::npos) << describe(v);
}

TEST_F(Determinism, SeedChangesZipfRouting) {
  // A control for the byte-identity checks above: the results do depend on the seed.
  OrderedJson doc = quickstart();
  doc["seed"] = 8;
  const fs::path file = scenario("seed8.json", doc);
  const fs::path a = run_into("a");
  const fs::path b = run_into("b", file);
  const Json ra = Json::parse(read_text(a / "results.json"));
  const Json rb = Json::parse(read_text(b / "results.json"));
  EXPECT_NE(ra.at("iteration_time_ps"), rb.at("iteration_time_ps"));
}

}  // namespace
}  // namespace moesim_cli

namespace moesim_cli {
namespace {

class TraceSelection : public CliTest {};

TEST_F(TraceSelection, TraceGpusKeepsOnlyTheChosenTracks) {
  const fs::path out = root_ / "t";
  Result r = moesim({"run", kQuickstart.string(), "--out", out.string(), "--trace", "--trace-gpus", "0-1,15"});
  ASSERT_EQ(r.code, 0) << describe(r);
  const Json trace = Json::parse(read_text(out / "trace.json"));
  std::set<int> pids;
  for (const auto& e : trace.at("traceEvents")) pids.insert(e.at("pid").get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1, 15}));
  // A GPU outside the cluster (quickstart has 16) is a usage error, and nothing is written.
  const fs::path bad = root_ / "bad";
  r = moesim({"run", kQuickstart.string(), "--out", bad.string(), "--trace", "--trace-gpus", "3-16"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--trace-gpus"), std::string::npos) << describe(r);
  EXPECT_FALSE(fs::exists(bad));
}

}  // namespace
}  // namespace moesim_cli
