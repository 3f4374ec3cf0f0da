// Bad input: moesim exits with code exactly 2, prints one line on stderr naming the scenario file,
// the JSON path and the fix, and writes nothing at all (no --out folder, no out/ in the current
// folder, no temporary files).
#include <functional>
#include <regex>
#include <sys/stat.h>

#include "cli_test_support.hpp"

namespace moesim_cli {
namespace {

// A valid inline cluster of 2 nodes x 8 H100, to be broken one field at a time.
constexpr const char* kTwoNodes = R"({"gpu": "h100-sxm5-80gb", "levels": [
      {"name": "node", "count": 2, "bandwidth": "400Gbps", "latency": "5us"},
      {"name": "gpu", "count": 8, "bandwidth": "450GB/s", "latency": "2us"}]})";

std::string scenario_text(const std::string& cluster, const std::string& model, const std::string& training,
                          const std::string& strategy) {
  return fmt::format(R"({{
  "name": "bad",
  "cluster": {},
  "model": {},
  "training": {},
  "strategy": {}
}}
)",
                     cluster, model, training, strategy);
}

class BadInput : public CliTest {
 protected:
  // A copy of the repository's presets (models/, topologies/) to break one file of: the --data folder.
  fs::path data_copy() {
    const fs::path data = root_ / "data";
    fs::create_directories(data);
    fs::copy(kSourceDir / "models", data / "models", fs::copy_options::recursive);
    fs::copy(kSourceDir / "topologies", data / "topologies", fs::copy_options::recursive);
    return data;
  }

  // Edits a copy of links.json and runs a DGX H100 pair (which names ib-ndr and nvlink4) on it:
  // refused, on one line naming links.json and the JSON `path`, with each of `texts`.
  void expect_links_json_refused(const std::function<void(Json&)>& edit, const std::string& path,
                                 const std::vector<std::string>& texts) {
    const fs::path data = data_copy();
    Json links = Json::parse(read_text(data / "topologies" / "links.json"));
    edit(links["links"]);
    write_text(data / "topologies" / "links.json", links.dump(1));
    const fs::path file = scenario("ib.json", scenario_text(R"({"preset": "dgx-h100-2node"})", R"({"preset": "gpt-medium-moe"})",
                                                            R"({"sequence_length": 1024})", R"({"name": "ep"})"));
    const fs::path out = root_ / "out";
    const Result r = moesim({"run", file.string(), "--data", data.string(), "--out", out.string()});
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
    EXPECT_NE(r.err.find((data / "topologies" / "links.json").string() + ": " + path), std::string::npos) << describe(r);
    for (const std::string& t : texts) EXPECT_NE(r.err.find(t), std::string::npos) << t << "\n" << describe(r);
    EXPECT_FALSE(fs::exists(out));
  }

  // links.json's `link` (whose Simple efficiency is `efficiency`) at exchange factor `factor`:
  // refused with what an all-to-all would then move (`moves`, of the line rate) and the most it
  // may be (`bound`).
  void expect_exchange_factor_refused(const std::string& link, double efficiency, double factor, const std::string& moves,
                                      const std::string& bound) {
    expect_links_json_refused(
        [&](Json& links) {
          ASSERT_DOUBLE_EQ(links[link]["simple"]["efficiency"].get<double>(), efficiency);
          links[link]["exchange_factor"] = factor;
        },
        "$.links." + link + ".exchange_factor", {moves + " of the line rate", "at most " + bound});
  }

  // Runs `moesim COMMAND FILE [--out DIR]` on a scenario written to work/NAME and checks the
  // contract of bad input; returns stderr for the case's own checks.
  std::string expect_rejected(const std::string& command, const std::string& name, const std::string& text,
                              const std::vector<std::string>& must_contain) {
    const fs::path file = scenario(name, text);
    const fs::path out = root_ / ("out-" + command);
    std::vector<std::string> args{command, file.string()};
    if (command != "validate") args.insert(args.end(), {"--out", out.string()});
    const Result r = moesim(args);
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_EQ(r.out, "") << describe(r);
    // Exactly one line, ending in a newline.
    EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
    EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << describe(r);
    EXPECT_EQ(r.err.rfind("moesim: ", 0), 0u) << describe(r);
    EXPECT_NE(r.err.find(file.string()), std::string::npos) << "stderr does not name the scenario file\n" << describe(r);
    for (const auto& s : must_contain) EXPECT_NE(r.err.find(s), std::string::npos) << "missing \"" << s << "\"\n" << describe(r);
    // Nothing written: no --out folder, and work/ holds only the scenario file.
    EXPECT_FALSE(fs::exists(out)) << out << " was created\n" << describe(r);
    EXPECT_EQ(listing(work_), std::set<std::string>{name}) << describe(r);
    EXPECT_EQ(listing(root_), (std::set<std::string>{"cap", "work"})) << describe(r);
    return r.err;
  }

  // Both `run` and `validate` reject the scenario with the same message (validate checks what run checks).
  std::string expect_rejected_by_run_and_validate(const std::string& name, const std::string& text,
                                                  const std::vector<std::string>& must_contain) {
    const std::string run = expect_rejected("run", name, text, must_contain);
    const std::string validate = expect_rejected("validate", name, text, must_contain);
    EXPECT_EQ(run, validate);
    return run;
  }
};

// (a) typo'd keys.
TEST_F(BadInput, TopLevelTypoNamesPathAndSuggestsKey) {
  const std::string text = R"({
  "name": "bad",
  "cluster": {"preset": "dgx-h100-2node"},
  "model": {"preset": "gpt-medium-moe"},
  "trainig": {"sequence_length": 1024},
  "strategy": {"name": "ep"}
}
)";
  expect_rejected_by_run_and_validate("typo.json", text,
                                      {"$.trainig", "unknown key \"trainig\"", "did you mean \"training\"?"});
}

TEST_F(BadInput, TypoInInlineClusterLevelNamesPathAndSuggestsKey) {
  std::string cluster = kTwoNodes;
  cluster.replace(cluster.find("\"bandwidth\": \"400Gbps\""), 11, "\"bandwith\"");
  ASSERT_NE(cluster.find("\"bandwith\": \"400Gbps\""), std::string::npos);
  const std::string err = expect_rejected_by_run_and_validate(
      "typo-level.json", scenario_text(cluster, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep"})"),
      {"$.cluster.levels[0].bandwith", "unknown key \"bandwith\"", "did you mean \"bandwidth\"?"});
  // The second level is fine: the message is about level 0 only.
  EXPECT_EQ(err.find("levels[1]"), std::string::npos) << err;
}

// (b) a bandwidth without a unit, as a number and as a string.
TEST_F(BadInput, BandwidthNumberWithoutUnit) {
  std::string cluster = kTwoNodes;
  cluster.replace(cluster.find("\"400Gbps\""), 9, "10");
  expect_rejected_by_run_and_validate(
      "nounit.json", scenario_text(cluster, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep"})"),
      {"$.cluster.levels[0].bandwidth", "10 has no unit", "\"10Gbps\"", "GB/s"});
}

TEST_F(BadInput, BandwidthStringWithoutUnit) {
  std::string cluster = kTwoNodes;
  cluster.replace(cluster.find("\"400Gbps\""), 9, "\"10\"");
  expect_rejected(
      "run", "nounit-string.json",
      scenario_text(cluster, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep"})"),
      {"$.cluster.levels[0].bandwidth", "\"10\"", "unit", "Gbps"});
}

TEST_F(BadInput, BandwidthWithUnknownUnit) {
  std::string cluster = kTwoNodes;
  cluster.replace(cluster.find("\"400Gbps\""), 9, "\"400Gbit\"");
  expect_rejected("run", "bad-unit.json",
                  scenario_text(cluster, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep"})"),
                  {"$.cluster.levels[0].bandwidth", "\"400Gbit\"", "Gbps"});
}

// (c) experts not divisible by the EP size: gpt-medium-moe has 32 experts; 3 x 8 = 24 GPUs split
// into EP groups of 12, but 32 % 12 != 0. The sizes that divide both 32 and 24: 1, 2, 4, 8.
TEST_F(BadInput, ExpertsNotDivisibleByEpSize) {
  std::string cluster = kTwoNodes;
  cluster.replace(cluster.find("\"count\": 2"), 10, "\"count\": 3");
  expect_rejected_by_run_and_validate(
      "ep-size.json",
      scenario_text(cluster, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep", "ep_size": 12})"),
      {"$.strategy.ep_size", "32 experts", "ep_size 12", "24 GPUs", "e.g. 1, 2, 4, 8"});
}

// Links inside a level and hosts: each bad value is refused at its path with the fix.
std::string links_scenario(const std::string& node_extra, const std::string& gpu_extra, const std::string& hosts) {
  const std::string cluster = fmt::format(R"({{"gpu": "h100-sxm5-80gb", "levels": [
      {{"name": "node", "count": 2, "bandwidth": "400Gbps", "latency": "5us"{}}},
      {{"name": "gpu", "count": 8, "bandwidth": "450GB/s", "latency": "2us"{}}}]{}}})",
                                          node_extra, gpu_extra, hosts);
  return scenario_text(cluster, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep"})");
}
constexpr const char* kSwitchUplink = R"("switch_uplink": {"bandwidth": "64GB/s", "latency": "1us"})";

TEST_F(BadInput, PortsOnALevelWithoutASwitch) {
  expect_rejected_by_run_and_validate("ports-mesh.json", links_scenario("", R"(, "fabric": "full_mesh", "ports": 2)", ""),
                                      {"$.cluster.levels[1].ports", "full_mesh", "\"fabric\": \"switch\""});
}

TEST_F(BadInput, PortsThatDoNotSpreadTheGpusEvenly) {
  expect_rejected_by_run_and_validate("ports-uneven.json", links_scenario(R"(, "ports": 3)", "", ""),
                                      {"$.cluster.levels[0].ports", "8 GPUs of a node", "3 ports", "dividing 8"});
}

TEST_F(BadInput, DomainsThatDoNotCutTheLevelEvenly) {
  expect_rejected_by_run_and_validate(
      "domains.json", links_scenario("", R"(, "domains": {"size": 3, "bandwidth": "64GB/s", "latency": "4us"})", ""),
      {"$.cluster.levels[1].domains.size", "domains of 3", "8 workers"});
}

TEST_F(BadInput, HostsThatDoNotSplitTheGpus) {
  expect_rejected_by_run_and_validate(
      "hosts.json", links_scenario("", "", fmt::format(R"(, "hosts": {{"gpus": 5, "memory": "2TiB", {}}})", kSwitchUplink)),
      {"$.cluster.hosts.gpus", "16 GPUs", "hosts of 5", "e.g. 8"});
}

TEST_F(BadInput, PcieSwitchesThatDoNotSplitAHostsGpus) {
  expect_rejected_by_run_and_validate(
      "switches.json",
      links_scenario("", "", fmt::format(R"(, "hosts": {{"memory": "2TiB", "pcie_switches": 3, {}}})", kSwitchUplink)),
      {"$.cluster.hosts.pcie_switches", "8 GPUs", "3 PCIe switches"});
}

// (d) Mixtral-8x7B on two 16 GiB T4s in fp16. Hand count of the weights on one GPU (EP over the
// 2 GPUs, 4 of the 8 experts each): experts 4 x 32 layers x 3 x 4096 x 14336 = 22.55e9 params;
// attention 32 x (2 x 4096^2 + 2 x 4096 x 1024) = 1.342e9; embedding + LM head 2 x 32000 x 4096 =
// 0.262e9; router 32 x 4096 x 8 = 1.0e6: 24.15e9 params x 2 bytes = 48.3e9 B = 44.98 GiB.
TEST_F(BadInput, ModelExceedsGpuMemory) {
  const std::string cluster = R"({"gpu": "t4-16gb", "levels": [{"name": "gpu", "count": 2, "bandwidth": "16GB/s", "latency": "5us"}]})";
  const std::string err = expect_rejected_by_run_and_validate(
      "oom.json",
      scenario_text(cluster, R"({"preset": "mixtral-8x7b"})", R"({"sequence_length": 1024, "dtype": "fp16"})", R"({"name": "ep"})"),
      {"does not fit in GPU memory", "t4-16gb", "has 16 GiB", "or more GPUs"});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(err, m, std::regex(R"(needs ([0-9.]+) GiB \(weights ([0-9.]+) GiB)"))) << err;
  EXPECT_GT(std::stod(m[1].str()), 16.0) << err;
  EXPECT_NEAR(std::stod(m[2].str()), 44.98, 0.1) << err;
}

// (e) malformed JSON: the position is where the parser stops.
TEST_F(BadInput, MalformedJsonTrailingCommaAtTopLevel) {
  // The trailing comma ends line 6; the parser finds "}" where a key must follow: line 7, column 1
  // (as Python's json module and jq report it).
  const std::string text = R"({
  "name": "bad",
  "cluster": {"preset": "dgx-h100-2node"},
  "model": {"preset": "gpt-medium-moe"},
  "training": {"sequence_length": 1024},
  "strategy": {"name": "ep"},
}
)";
  expect_rejected_by_run_and_validate("trailing-comma.json", text,
                                      {"malformed JSON at line 7, column 1", "trailing commas"});
}

TEST_F(BadInput, MalformedJsonTrailingCommaInsideLine) {
  // Line 5, the "}" right after the comma: column 40.
  const std::string text = R"({
  "name": "bad",
  "cluster": {"preset": "dgx-h100-2node"},
  "model": {"preset": "gpt-medium-moe"},
  "training": {"sequence_length": 1024,},
  "strategy": {"name": "ep"}
}
)";
  const std::string line5 = split_lines(text)[4];
  ASSERT_EQ(line5.find(",}") + 2, 40u);  // 1-based column of the "}"
  expect_rejected("run", "trailing-comma-inline.json", text, {"malformed JSON at line 5, column 40"});
}

TEST_F(BadInput, MalformedJsonMissingCommaNamesTheLine) {
  const std::string text = R"({
  "name": "bad",
  "cluster": {"preset": "dgx-h100-2node"},
  "model": {"preset": "gpt-medium-moe" "layers": 12},
  "training": {"sequence_length": 1024},
  "strategy": {"name": "ep"}
}
)";
  const std::string err = expect_rejected("run", "missing-comma.json", text, {"malformed JSON at line 4, column "});
  // The column falls on the unexpected token "layers" (columns 40 to 47 of line 4).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(err, m, std::regex(R"(line 4, column ([0-9]+))"))) << err;
  const int col = std::stoi(m[1].str());
  EXPECT_GE(col, 40) << err;
  EXPECT_LE(col, 47) << err;
}

// (f) unknown preset names: the fix lists the presets there are.
TEST_F(BadInput, UnknownTopologyPreset) {
  expect_rejected_by_run_and_validate(
      "preset.json",
      scenario_text(R"({"preset": "dgx-h100-3node"})", R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep"})"),
      {"$.cluster.preset", "no preset \"dgx-h100-3node\"", "dgx-h100-2node", "hybridep-1000dc", "moesim presets"});
}

TEST_F(BadInput, UnknownModelPreset) {
  expect_rejected("run", "model-preset.json",
                  scenario_text(R"({"preset": "dgx-h100-2node"})", R"({"preset": "mixtral-8x8b"})", R"({"sequence_length": 1024})", R"({"name": "ep"})"),
                  {"$.model.preset", "no preset \"mixtral-8x8b\"", "mixtral-8x7b", "deepseek-v3"});
}

TEST_F(BadInput, UnknownGpuKindSuggestsNearest) {
  std::string cluster = kTwoNodes;
  cluster.replace(cluster.find("h100-sxm5-80gb"), 14, "h100");
  expect_rejected("run", "gpu-kind.json",
                  scenario_text(cluster, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep"})"),
                  {"$.cluster.gpu", "unknown GPU kind \"h100\"", "did you mean \"h100-"});
}

TEST_F(BadInput, UnknownLinkTechnologySuggestsNearest) {
  expect_rejected_by_run_and_validate(
      "link.json",
      scenario_text(R"({"preset": "dgx-h100-2node", "levels": [{"name": "node", "count": 2, "bandwidth": "3200Gbps",
                       "latency": "5us", "ports": 8, "link": "ib-ndr"}, {"name": "gpu", "count": 8, "bandwidth": "450GB/s",
                       "latency": "2us", "link": "nvlnk4"}]})",
                    R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep"})"),
      {"$.cluster.levels[1].link", "unknown link technology \"nvlnk4\"", "did you mean \"nvlink4\"", "topologies/links.json"});
}

// (g) wrong types.
TEST_F(BadInput, StringWhereIntegerExpected) {
  expect_rejected_by_run_and_validate(
      "type.json",
      scenario_text(R"({"preset": "dgx-h100-2node"})", R"({"preset": "gpt-medium-moe", "layers": "12"})", R"({"sequence_length": 1024})",
                    R"({"name": "ep"})"),
      {"$.model.layers", "expected an integer", "\"12\"", "without quotes"});
}

TEST_F(BadInput, OutOfRangeStrategyOption) {
  expect_rejected("run", "range.json",
                  scenario_text(R"({"preset": "dgx-h100-2node"})", R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})",
                                R"({"name": "ep", "pipelining_degree": 0})"),
                  {"$.strategy.pipelining_degree", "out of range", "between 1 and 64"});
}

// (h) unknown strategy.
TEST_F(BadInput, UnknownStrategy) {
  expect_rejected_by_run_and_validate(
      "strategy.json",
      scenario_text(R"({"preset": "dgx-h100-2node"})", R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "fsdp"})"),
      {"$.strategy.name", "unknown strategy \"fsdp\"", "use one of: ep"});
}

TEST_F(BadInput, UnknownStrategyOption) {
  expect_rejected("run", "strategy-option.json",
                  scenario_text(R"({"preset": "dgx-h100-2node"})", R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})",
                                R"({"name": "ep", "ep_sise": 16})"),
                  {"$.strategy.ep_sise", "did you mean \"ep_size\"?"});
}

// A mistake inside a preset file is reported in that file, at its own JSON path.
TEST_F(BadInput, BrokenPresetFileIsNamed) {
  const fs::path data = data_copy();
  Json model = Json::parse(read_text(data / "models" / "gpt-medium-moe.json"));
  model["layers"] = "12";
  write_text(data / "models" / "broken.json", model.dump(1));
  OrderedJson doc = quickstart();
  doc["model"] = {{"preset", "broken"}};
  const fs::path file = scenario("uses-broken.json", doc);
  const fs::path out = root_ / "out";
  const Result r = moesim({"run", file.string(), "--data", data.string(), "--out", out.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
  EXPECT_NE(r.err.find((data / "models" / "broken.json").string() + ": $.layers: expected an integer"), std::string::npos)
      << describe(r);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(listing(work_), std::set<std::string>{"uses-broken.json"});
}

// An exchange factor may exceed 1 (an all-to-all can keep more of a NIC busy than a ring), but not so
// far that an all-to-all would move more than the line rate: ib-ndr's Simple efficiency is 0.82, so
// 1.5 would move 1.23 of it and at most 1/0.82 = 1.22 is allowed.
TEST_F(BadInput, ExchangeFactorBeyondTheLineRateIsNamedInLinksJson) {
  expect_exchange_factor_refused("ib-ndr", 0.82, 1.5, "1.23", "1.22");
}

// The bound holds for every entry of links.json, not only for the links a scenario names: the
// DGX H100 pair names ib-ndr and nvlink4, and roce-800 (Simple efficiency 0.96, so at most
// 1/0.96 = 1.04; 1.1 would move 1.06) is refused all the same.
TEST_F(BadInput, ExchangeFactorOfALinkNoScenarioNamesIsRefusedToo) {
  expect_exchange_factor_refused("roce-800", 0.96, 1.1, "1.06", "1.04");
}

// NVLS-tree's share of the NVLS rate is a fraction (topologies/links.json, NCCL's NVLS_TREE).
TEST_F(BadInput, NvlsTreeEfficiencyAboveOneIsNamedInLinksJson) {
  expect_links_json_refused([](Json& links) { links["nvlink5"]["nvls"]["tree_efficiency"] = 1.5; },
                            "$.links.nvlink5.nvls.tree_efficiency", {"1.5"});
}

TEST_F(BadInput, MissingScenarioFile) {
  const fs::path missing = work_ / "nope.json";
  const Result r = moesim({"run", missing.string(), "--out", (root_ / "out").string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
  EXPECT_NE(r.err.find(missing.string()), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << describe(r);
  EXPECT_FALSE(fs::exists(root_ / "out"));
  EXPECT_TRUE(listing(work_).empty());
}

TEST_F(BadInput, UnknownOptionIsUsageError) {
  const Result r = moesim({"run", kQuickstart.string(), "--out", (root_ / "out").string(), "--bogus"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << describe(r);
  EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
  EXPECT_NE(r.err.find("`moesim --help` shows the usage"), std::string::npos) << describe(r);
  EXPECT_FALSE(fs::exists(root_ / "out"));
  EXPECT_TRUE(listing(work_).empty());
}

// A failed run into the folder of an earlier good run leaves the earlier results untouched.
TEST_F(BadInput, FailedRunLeavesExistingOutputUntouched) {
  const fs::path out = root_ / "out";
  const Result good = moesim({"run", kQuickstart.string(), "--out", out.string(), "--quiet"});
  ASSERT_EQ(good.code, 0) << describe(good);
  const std::string results = read_text(out / "results.json");
  const std::string effective = read_text(out / "scenario.effective.json");
  const fs::path bad = scenario(
      "ep-size.json", scenario_text(R"({"preset": "dgx-h100-2node"})", R"({"preset": "gpt-medium-moe"})",
                                    R"({"sequence_length": 1024})", R"({"name": "ep", "ep_size": 12})"));
  const Result r = moesim({"run", bad.string(), "--out", out.string(), "--trace"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("$.strategy.ep_size"), std::string::npos) << describe(r);
  EXPECT_EQ(listing(out), (std::set<std::string>{"results.json", "scenario.effective.json"}));
  EXPECT_EQ(read_text(out / "results.json"), results);
  EXPECT_EQ(read_text(out / "scenario.effective.json"), effective);
}

// A sweep whose grid holds an invalid value: `sweep` refuses it before running any point.
TEST_F(BadInput, SweepWithInvalidPointWritesNothing) {
  OrderedJson doc = quickstart();
  doc["sweep"] = OrderedJson::parse(R"({"axes": [{"path": "cluster.levels[0].bandwidth", "values": ["400Gbps", "10"]}]})");
  const fs::path file = scenario("sweep-bad.json", doc);
  const fs::path out = root_ / "sweep-out";
  const Result r = moesim({"sweep", file.string(), "--out", out.string(), "--jobs", "2"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
  EXPECT_NE(r.err.find(file.string()), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("\"10\""), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("Gbps"), std::string::npos) << describe(r);
  EXPECT_FALSE(fs::exists(out)) << describe(r);
  EXPECT_EQ(listing(work_), std::set<std::string>{"sweep-bad.json"});
}

// The bad value sits in the file at $.sweep.axes[0].values[1] (quickstart's cluster is a preset: the
// file has no $.cluster.levels at all), so that is the path the message must name.
TEST_F(BadInput, SweepInvalidPointMessageNamesTheSweepAxis) {
  OrderedJson doc = quickstart();
  doc["sweep"] = OrderedJson::parse(R"({"axes": [{"path": "cluster.levels[0].bandwidth", "values": ["400Gbps", "10"]}]})");
  const fs::path file = scenario("sweep-bad.json", doc);
  const Result r = moesim({"sweep", file.string(), "--out", (root_ / "sweep-out").string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("$.sweep.axes[0].values[1]"), std::string::npos) << "the message names no sweep value\n" << describe(r);
  EXPECT_NE(r.err.find("cluster.levels[0].bandwidth"), std::string::npos) << describe(r);
}

// The usage promises `validate` checks "the scenario (and every sweep point)": a grid with an
// invalid value must not validate when `sweep` refuses the very same file.
TEST_F(BadInput, ValidateChecksEverySweepPoint) {
  OrderedJson doc = quickstart();
  doc["sweep"] = OrderedJson::parse(R"({"axes": [{"path": "cluster.levels[0].bandwidth", "values": ["400Gbps", "10"]}]})");
  const fs::path file = scenario("sweep-bad.json", doc);
  const Result r = moesim({"validate", file.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
  EXPECT_NE(r.err.find("$.sweep.axes[0].values[1]"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("\"10\""), std::string::npos) << describe(r);
  // No "valid" on stdout before the error: the scenario is not valid.
  EXPECT_EQ(r.out, "") << describe(r);
  EXPECT_EQ(listing(work_), std::set<std::string>{"sweep-bad.json"});
}

// Points a strategy refuses (ep_size 12 does not divide 16 GPUs) are valid input for a sweep: they
// become "invalid" rows. `validate` lists them, exits 0; `sweep` records them and runs the rest.
TEST_F(BadInput, SweepPointsRefusedByTheStrategyAreListedAndRecorded) {
  OrderedJson doc = quickstart();
  doc["training"]["iterations"] = 1;
  doc["sweep"] = OrderedJson::parse(R"({"axes": [{"path": "strategy.ep_size", "values": [16, 12, 8]}]})");
  const fs::path file = scenario("sweep-ep.json", doc);
  const Result v = moesim({"validate", file.string()});
  EXPECT_EQ(v.code, 0) << describe(v);
  EXPECT_NE(v.out.find("sweep point 1 would be refused"), std::string::npos) << describe(v);
  EXPECT_NE(v.out.find("$.strategy.ep_size"), std::string::npos) << describe(v);
  EXPECT_EQ(v.out.find("sweep point 0 would be refused"), std::string::npos) << describe(v);
  EXPECT_EQ(v.out.find("sweep point 2 would be refused"), std::string::npos) << describe(v);
  EXPECT_NE(v.out.find("1 would be refused"), std::string::npos) << describe(v);

  const fs::path out = root_ / "sweep-out";
  const Result r = moesim({"sweep", file.string(), "--out", out.string(), "--jobs", "2"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("(1 refused)"), std::string::npos) << describe(r);
  const Csv csv = Csv::parse(read_text(out / "results.csv"));
  ASSERT_EQ(csv.rows.size(), 3u);
  EXPECT_EQ(csv.at(0, "status"), "ok");
  EXPECT_EQ(csv.at(1, "strategy.ep_size"), "12");
  EXPECT_EQ(csv.at(1, "status"), "invalid");
  EXPECT_EQ(csv.at(1, "iteration_time_ms"), "");
  EXPECT_NE(csv.rows[1].back().find("16 GPUs do not split into EP groups of 12"), std::string::npos) << csv.rows[1].back();
  EXPECT_EQ(csv.at(2, "status"), "ok");
  // 8 GPUs per EP group: two groups, 4 experts per GPU; a different iteration time from ep_size 16.
  EXPECT_NE(csv.at(0, "iteration_time_ms"), csv.at(2, "iteration_time_ms"));
}

// Zipped sweep axes ({"paths": [...], "values": [[...], ...]}): a value whose length is not the
// number of paths, and an axis with both "path" and "paths", are bad input: `sweep` exits 2 naming
// the exact JSON path and writes nothing; `validate` refuses the same file with the same message.
TEST_F(BadInput, ZippedSweepValueOfWrongLength) {
  OrderedJson doc = quickstart();
  doc["sweep"] = OrderedJson::parse(R"({"axes": [
      {"path": "strategy.pipelining_degree", "values": [1, 2]},
      {"paths": ["cluster.levels[0].bandwidth", "strategy.ep_size"], "values": [["400Gbps", 16], ["100Gbps", 8], ["10Gbps"]]}]})");
  const std::string text = doc.dump(2);
  const std::string sweep = expect_rejected("sweep", "zip-length.json", text,
                                            {"$.sweep.axes[1].values[2]", "has 1 entry but \"paths\" names 2",
                                             "\"cluster.levels[0].bandwidth\", \"strategy.ep_size\""});
  EXPECT_EQ(sweep.find("values[0]"), std::string::npos) << sweep;
  EXPECT_EQ(expect_rejected("validate", "zip-length.json", text, {"$.sweep.axes[1].values[2]"}), sweep);
}

TEST_F(BadInput, SweepAxisWithPathAndPaths) {
  OrderedJson doc = quickstart();
  doc["sweep"] = OrderedJson::parse(R"({"axes": [
      {"path": "strategy.pipelining_degree", "values": [1, 2]},
      {"path": "model.experts", "paths": ["cluster.levels[0].count", "model.experts"], "values": [[1, 16], [2, 32]]}]})");
  const std::string text = doc.dump(2);
  const std::string sweep =
      expect_rejected("sweep", "zip-both.json", text, {"$.sweep.axes[1]", "both \"path\" and \"paths\""});
  EXPECT_EQ(expect_rejected("validate", "zip-both.json", text, {"$.sweep.axes[1]"}), sweep);
}

// A typo'd "paths" still gets the schema's "did you mean".
TEST_F(BadInput, SweepAxisTypoSuggestsPaths) {
  OrderedJson doc = quickstart();
  doc["sweep"] = OrderedJson::parse(R"({"axes": [{"pathes": ["model.experts"], "values": [[16], [32]]}]})");
  expect_rejected("sweep", "zip-typo.json", doc.dump(2), {"$.sweep.axes[0].pathes", "did you mean \"paths\"?"});
}

// A zipped value the scenario refuses is blamed at its own entry of the axis.
TEST_F(BadInput, ZippedSweepInvalidValueNamesItsEntry) {
  OrderedJson doc = quickstart();
  doc["sweep"] = OrderedJson::parse(R"({"axes": [
      {"paths": ["cluster.levels[0].bandwidth", "strategy.ep_size"], "values": [["400Gbps", 16], ["10", 8]]}]})");
  expect_rejected("sweep", "zip-value.json", doc.dump(2),
                  {"$.sweep.axes[0].values[1][0]", "sets cluster.levels[0].bandwidth to \"10\" (with strategy.ep_size = 8)", "Gbps"});
}

TEST_F(BadInput, SweepWithoutSweepBlock) {
  const fs::path out = root_ / "sweep-out";
  const Result r = moesim({"sweep", kQuickstart.string(), "--out", out.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
  EXPECT_NE(r.err.find("$.sweep"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("moesim run"), std::string::npos) << describe(r);
  EXPECT_FALSE(fs::exists(out));
}


// --- Limits: what a careless or hostile file must not get past. ---

// JSON nested 10^5 deep once crashed the recursive walks after the parser; it is refused before.
TEST_F(BadInput, JsonNestedTooDeep) {
  const std::string text = "{\"name\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_rejected_by_run_and_validate("deep.json", text, {"nested more than 64 levels", "line 1, column 73"});
}

// A number past a double was the library's "[json.exception.out_of_range.406]" with exit 1.
TEST_F(BadInput, NumberPastADouble) {
  const std::string err = expect_rejected_by_run_and_validate("huge.json", "{\n  \"name\": \"q\",\n  \"seed\": 1e400\n}\n",
                                                              {"a number too large for a double at line 3, column 11"});
  EXPECT_EQ(err.find("json.exception"), std::string::npos) << err;
}

// Integers that a 32-bit cast would wrap (2^32 + 2 DCs ran as 2) are refused at their path.
TEST_F(BadInput, IntegersThatWouldWrap) {
  OrderedJson doc = quickstart();
  doc["cluster"] = OrderedJson::parse(kTwoNodes);
  doc["cluster"]["levels"][0]["count"] = 4294967298ULL;
  expect_rejected_by_run_and_validate("count.json", doc.dump(2), {"$.cluster.levels[0].count", "4294967298 is out of range"});
  fs::remove(work_ / "count.json");
  doc = quickstart();
  doc["model"] = OrderedJson{{"preset", "gpt-medium-moe"}, {"experts", 4294967328ULL}};
  expect_rejected_by_run_and_validate("experts.json", doc.dump(2), {"$.model.experts", "out of range"});
  fs::remove(work_ / "experts.json");
  // sequence_length 2^31 ran and printed a negative throughput.
  doc = quickstart();
  doc["training"]["sequence_length"] = 2147483648ULL;
  expect_rejected_by_run_and_validate("seq.json", doc.dump(2), {"$.training.sequence_length", "out of range"});
}

// Level counts whose product passes 2^64 once wrapped; the product is checked level by level and
// the message names the level where it passes 2^20 GPUs.
TEST_F(BadInput, GpuCountProductOverflow) {
  OrderedJson doc = quickstart();
  doc["cluster"] = OrderedJson::parse(R"({"gpu": "h100-sxm5-80gb", "levels": [
      {"name": "a", "count": 1048576, "bandwidth": "1Gbps", "latency": "5us"},
      {"name": "b", "count": 1048576, "bandwidth": "1Gbps", "latency": "5us"},
      {"name": "c", "count": 1048576, "bandwidth": "1Gbps", "latency": "5us"},
      {"name": "gpu", "count": 1048576, "bandwidth": "450GB/s", "latency": "2us"}]})");
  expect_rejected_by_run_and_validate("product.json", doc.dump(2), {"$.cluster.levels[1].count", "more than moesim simulates"});
}

// "1bps" aborted on "event scheduled in the past"; links under 1 Mbps and latencies over a day are
// refused where they are written.
TEST_F(BadInput, DurationsPastTheClock) {
  OrderedJson doc = quickstart();
  doc["cluster"] = OrderedJson::parse(kTwoNodes);
  doc["cluster"]["levels"][0]["bandwidth"] = "1bps";
  expect_rejected_by_run_and_validate("slow.json", doc.dump(2), {"$.cluster.levels[0].bandwidth", ">= \"0.001Gbps\""});
  fs::remove(work_ / "slow.json");
  doc["cluster"]["levels"][0]["bandwidth"] = "400Gbps";
  doc["cluster"]["levels"][0]["latency"] = "1e30s";
  expect_rejected_by_run_and_validate("late.json", doc.dump(2), {"$.cluster.levels[0].latency", "out of range"});
  fs::remove(work_ / "late.json");
  // A day's latency was valid and `run` then said "cannot run" naming neither file nor field
  // (issue 45): a link's latency is at most 10 s.
  doc["cluster"]["levels"][0]["latency"] = "86400s";
  expect_rejected_by_run_and_validate("day.json", doc.dump(2),
                                      {"$.cluster.levels[0].latency", "\"86400s\" is out of range; use a value between \"0 ps\" and \"10 s\""});
}

// --- Paths: the name is a file name; presets are names; inputs are regular files. ---

TEST_F(BadInput, NameThatWouldLeaveTheOutputFolder) {
  OrderedJson doc = quickstart();
  // "." wrote straight into out/; " ", "~" and "-rf" were accepted (issue 45).
  for (const std::string name : {"../../x", "/tmp/abs", "a/b", "..", ".", " ", "~", "-rf", ".hidden", "a b", "a\nb"}) {
    doc["name"] = name;
    // Without --out: the default out/NAME must not become a path outside out/.
    const fs::path file = scenario("escape.json", doc.dump(2));
    const Result r = moesim({"run", file.string(), "--quiet"});
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_NE(r.err.find("$.name"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("is not a file name"), std::string::npos) << describe(r);
    EXPECT_EQ(listing(work_), std::set<std::string>{"escape.json"}) << describe(r);
    EXPECT_EQ(listing(root_), (std::set<std::string>{"cap", "work"})) << describe(r);
  }
}

TEST_F(BadInput, ControlCharactersArePrintedAsEscapesOnOneLine) {
  // A newline in a key was printed raw, the error spread over several lines (issue 45).
  OrderedJson doc = quickstart();
  doc["trai\nning"] = 1;
  const std::string err = expect_rejected_by_run_and_validate("newline.json", doc.dump(2), {"$.trai\\nning", "unknown key \"trai\\nning\""});
  EXPECT_EQ(err.find('\n'), err.size() - 1);
}

TEST_F(BadInput, AStrategyOptionErrorNamesTheScenarioFile) {
  // A zebra option the strategy itself parses ("asym_ea": "x") was reported with an empty file
  // name ("moesim: error: : $.strategy.asym_ea").
  OrderedJson doc = OrderedJson::parse(read_text(kSourceDir / "scenarios" / "hetermoe-c1.json"));
  doc.erase("sweep");
  doc["strategy"]["asym_ea"] = "x";
  expect_rejected_by_run_and_validate("asym.json", doc.dump(2), {"asym.json: $.strategy.asym_ea: asym_ea \"x\" is not an option"});
}

// A 5000-character string where a preset is named was a "File name too long" filesystem error.
TEST_F(BadInput, PresetNameThatIsNotAName) {
  OrderedJson doc = quickstart();
  doc["cluster"] = std::string(5000, 'x');
  expect_rejected_by_run_and_validate("long.json", doc.dump(2), {"$.cluster.preset", "is not a preset name"});
  fs::remove(work_ / "long.json");
  doc = quickstart();
  doc["model"] = "../topologies/dgx-h100";
  expect_rejected_by_run_and_validate("up.json", doc.dump(2), {"$.model.preset", "is not a preset name"});
}

// A folder, a FIFO (which blocked) and /dev/zero (which exhausted memory) as the scenario.
TEST_F(BadInput, InputsThatAreNotRegularFiles) {
  const fs::path fifo = root_ / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::pair<fs::path, std::string>> cases{
      {root_ / "cap", "is a folder"}, {fifo, "is a FIFO (named pipe)"}, {"/dev/zero", "is a character device"}};
  for (const auto& [input, problem] : cases) {
    for (const std::string command : {"run", "validate", "sweep"}) {
      const Result r = moesim({command, input.string(), "--quiet"});
      EXPECT_EQ(r.code, 2) << describe(r);
      EXPECT_EQ(r.err, fmt::format("moesim: error: {}: {}, not a regular file; give the path of a file (moesim reads "
                                   "regular files only)\n",
                                   input.string(), problem))
          << describe(r);
      EXPECT_TRUE(listing(work_).empty()) << describe(r);
    }
  }
}

// --- Command-line flags ---

// An --out that is a file, under a file, or under /proc exits 2 before anything runs.
TEST_F(BadInput, OutThatCannotBeWritten) {
  const fs::path file = root_ / "a-file";
  write_text(file, "x");
  const std::vector<std::pair<fs::path, std::string>> cases{{file, "exists and is not a folder"},
                                                           {file / "sub", "cannot create the folder: Not a directory"},
                                                           {"/proc/moesim-out", "is the root folder or a folder of the system itself"}};
  for (const auto& [out, problem] : cases) {
    for (const std::string command : {"run", "sweep"}) {
      const fs::path scenario_file = command == "run" ? kQuickstart : kSourceDir / "scenarios" / "sweep-interdc.json";
      const Result r = moesim({command, scenario_file.string(), "--out", out.string()});
      EXPECT_EQ(r.code, 2) << describe(r);
      EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
      EXPECT_EQ(r.err.rfind(fmt::format("moesim: error: --out: {}: {}", out.string(), problem), 0), 0u) << describe(r);
      EXPECT_EQ(read_text(file), "x");
      EXPECT_TRUE(listing(work_).empty()) << describe(r);
    }
  }
}

TEST_F(BadInput, JobsMustBeAPositiveCount) {
  for (const std::string jobs : {"-1", "0", "99999999999", "two", ""}) {
    const Result r = moesim({"sweep", (kSourceDir / "scenarios" / "sweep-interdc.json").string(), "--jobs", jobs, "--out",
                             (root_ / "out").string()});
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_NE(r.err.find("--jobs"), std::string::npos) << describe(r);
    EXPECT_FALSE(fs::exists(root_ / "out")) << describe(r);
  }
}

// A grid of 10 axes x 1000 values died of std::bad_alloc; the size is checked as the axes are read.
TEST_F(BadInput, SweepGridTooLarge) {
  OrderedJson doc = quickstart();
  OrderedJson values = OrderedJson::array();
  for (int v = 1; v <= 1000; ++v) values.push_back(v);
  doc["sweep"]["axes"] = OrderedJson::array();
  for (const char* path : {"seed", "training.iterations"}) doc["sweep"]["axes"].push_back({{"path", path}, {"values", values}});
  // 1000 x 1000 = 10^6 points, over the 100000 a sweep runs: refused at the second axis.
  expect_rejected("sweep", "grid.json", doc.dump(2), {"$.sweep.axes[1].values", "1000000 points"});
  expect_rejected("validate", "grid.json", doc.dump(2), {"$.sweep.axes[1].values", "1000000 points"});
}


// A plausibility warning does not stop the run: one stderr line, and the same text in results.json.
TEST_F(BadInput, ImplausibleRateWarnsAndRuns) {
  OrderedJson doc = quickstart();
  doc["cluster"] = OrderedJson::parse(kTwoNodes);
  doc["cluster"]["levels"][1]["bandwidth"] = "450Gbps";
  const fs::path file = scenario("nvlink.json", doc.dump(2));
  const fs::path out = root_ / "out";
  const Result r = moesim({"run", file.string(), "--out", out.string(), "--quiet"});
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::string expected = file.string() + ": $.cluster.levels[1].bandwidth: \"450Gbps\" is 56.25 GB/s, an eighth of the "
                               "NVLink of h100-sxm5-80gb";
  EXPECT_EQ(count_char(r.err, '\n'), 1u) << describe(r);
  EXPECT_EQ(r.err.rfind("moesim: warning: " + expected, 0), 0u) << describe(r);
  const Json results = Json::parse(read_text(out / "results.json"));
  ASSERT_EQ(results["warnings"].size(), 1u);
  EXPECT_EQ(results["warnings"][0].get<std::string>().rfind(expected, 0), 0u);
  const Result v = moesim({"validate", file.string()});
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.err, r.err);
}

// A run that would not fit in memory is refused before it starts, by validate as by run: sampled
// routing over an EP group of 2048 GPUs holds, per MoE layer and microbatch, a dense matrix of
// doubles and its transpose; 12 layers x 64 microbatches x 1 iteration is past any machine this
// runs on. The fix names the routing.
TEST_F(BadInput, RunThatWouldNotFitInMemoryIsRefusedUpFront) {
  // ep-1000dc cut to 256 DCs: one EP group of 2048 GPUs, the largest that keeps dense routing
  // matrices (network::kMaxDenseRanks), 64 microbatches: 2 × 2048² × 8 B per layer and
  // microbatch (dispatch and combine), × 12 layers × 64 = 51,539,607,552 B = 48 GiB.
  OrderedJson doc = OrderedJson::parse(read_text(kSourceDir / "scenarios" / "ep-1000dc.json"));
  doc["model"]["experts"] = 2048;
  doc["cluster"]["levels"] = OrderedJson::parse(
      R"([{"name": "dc", "count": 256, "bandwidth": "10Gbps", "latency": "100us", "link": "ethernet"},
          {"name": "gpu", "count": 8, "bandwidth": "128Gbps", "latency": "5us", "link": "pcie3"}])");
  doc["training"]["microbatches"] = 64;
  const std::string err = expect_rejected_by_run_and_validate(
      "huge.json", doc.dump(2), {"cannot run", "sampled routing 48 GiB", "this process may use", "\"sampling\": \"expected\""});
  EXPECT_NE(err.find(", sampled routing 48 GiB, run state "), std::string::npos) << err;
}

}  // namespace
}  // namespace moesim_cli

namespace moesim_cli {
namespace {

// The two-node cluster (16 GPUs) with GPT-Medium MoE (12 layers, 16 heads, 32 experts) and a
// "parallel" layout, to be broken one field at a time.
std::string layout_scenario(const std::string& parallel, const std::string& training = R"({"sequence_length": 1024})",
                            const std::string& strategy = R"({"name": "ep"})") {
  std::string text = scenario_text(kTwoNodes, R"({"preset": "gpt-medium-moe"})", training, strategy);
  text.insert(text.rfind('}'), fmt::format(",\n  \"parallel\": {}\n", parallel));
  return text;
}

TEST_F(BadInput, LayoutWhoseProductDoesNotDivideTheGpus) {
  expect_rejected_by_run_and_validate("layout-product.json", layout_scenario(R"({"tp": 2, "pp": 3})"),
                                      {"$.parallel", "tp 2 x cp 1 x pp 3 = 6", "16 GPUs", "dp is the GPUs left"});
}

TEST_F(BadInput, TensorParallelThatDoesNotSplitTheHeads) {
  // tp 16 fits the 16 GPUs, but 8 heads cannot split over it.
  std::string text = layout_scenario(R"({"tp": 16})");
  const std::string preset = R"({"preset": "gpt-medium-moe"})";
  text.replace(text.find(preset), preset.size(), R"({"preset": "gpt-medium-moe", "heads": 8, "kv_heads": 8})");
  expect_rejected_by_run_and_validate("layout-heads.json", text,
                                      {"$.parallel.tp", "8 heads (8 key/value heads) do not split over tp 16"});
}

TEST_F(BadInput, LayersThatDoNotSplitOverTheVirtualStages) {
  // 12 layers over pp 4 × vp 2 = 8 virtual stages: 12/8 is not whole.
  expect_rejected_by_run_and_validate(
      "layout-layers.json", layout_scenario(R"({"pp": 4, "vp": 2})", R"({"sequence_length": 1024, "microbatches": 4})"),
      {"$.parallel.pp", "12 layers do not fit pp 4 x vp 2", "12 layers do not split evenly over 8 virtual stages",
       "first_stage_layers"});
}

TEST_F(BadInput, VirtualStagesWithoutPipelineStages) {
  // Regression (issue 45, class 1): vp 2 with pp 1 was valid to `validate` and crashed `run` with
  // SIGSEGV. Megatron-Core refuses it (an interleaved schedule needs pipeline-model-parallel > 1).
  expect_rejected_by_run_and_validate("layout-vp-pp1.json", layout_scenario(R"({"vp": 2})"),
                                      {"$.parallel.vp", "vp 2 needs pipeline stages, but pp is 1", "set parallel.pp above 1"});
}

TEST_F(BadInput, SlidingWindowOverAContextParallelRing) {
  // A windowed model over cp 2: the ring attention of a sliding window is not modelled.
  std::string text = layout_scenario(R"({"cp": 2})");
  const std::string preset = R"({"preset": "gpt-medium-moe"})";
  text.replace(text.find(preset), preset.size(),
               R"({"preset": "gpt-medium-moe", "sliding_window": {"tokens": 128, "every": 2}})");
  expect_rejected_by_run_and_validate("layout-window-cp.json", text,
                                      {"$.parallel.cp", "sliding-window attention is not modelled", "use cp 1"});
}

TEST_F(BadInput, SlidingWindowWithoutTheCausalMask) {
  std::string text = layout_scenario(R"({"ep": 16})", R"({"sequence_length": 1024, "causal": false})");
  const std::string preset = R"({"preset": "gpt-medium-moe"})";
  text.replace(text.find(preset), preset.size(), R"({"preset": "gpt-medium-moe", "sliding_window": {"tokens": 128}})");
  expect_rejected_by_run_and_validate("window-not-causal.json", text,
                                      {"$.training.causal", "needs the causal mask", "leave training.causal true"});
}

// A GPU kind of the scenario's own with measured attention kernels (docs/presets.md
// "attention_kernels"): a sliding window needs the causal mask, and a kernel takes time.
std::string own_gpu_scenario(const std::string& kernel) {
  std::string cluster = kTwoNodes;
  cluster.replace(cluster.find("h100-sxm5-80gb"), 14, "my-gpu");
  std::string text = scenario_text(cluster, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "ep"})");
  text.insert(text.rfind('}'), fmt::format(R"(,
  "gpus": {{"my-gpu": {{"name": "a GPU", "peak_flops": {{"bf16": "989TFLOPS"}}, "hbm_bandwidth": "3.35TB/s", "memory": "80GiB",
    "attention_kernels": {{"source": "measured here", "kernels": [{}]}}}}}}
)",
                                           kernel));
  return text;
}

TEST_F(BadInput, MeasuredAttentionKernelWithAWindowButNoCausalMask) {
  expect_rejected_by_run_and_validate(
      "gpu-window.json",
      own_gpu_scenario(R"({"batch": 2, "heads": 64, "seq": 4096, "head_dim": 64, "causal": false, "window": 128, "forward": "0.2ms", "backward": "0.4ms"})"),
      {"$.gpus.my-gpu.attention_kernels.kernels[0].window", "needs the causal mask", "set \"causal\": true"});
}

TEST_F(BadInput, MeasuredAttentionKernelThatTakesNoTime) {
  expect_rejected_by_run_and_validate(
      "gpu-kernel-time.json",
      own_gpu_scenario(R"({"batch": 2, "heads": 64, "seq": 4096, "head_dim": 128, "causal": true, "forward": "0ms", "backward": "0.4ms"})"),
      {"$.gpus.my-gpu.attention_kernels.kernels[0].forward", "takes no time", "measured time"});
}

TEST_F(BadInput, InterleavedScheduleWithMicrobatchesNotAMultipleOfPp) {
  expect_rejected_by_run_and_validate("layout-mb.json",
                                      layout_scenario(R"({"pp": 4, "vp": 3})", R"({"sequence_length": 1024, "microbatches": 6})"),
                                      {"$.training.microbatches", "groups of pp = 4", "use a multiple of 4"});
}

TEST_F(BadInput, GlobalBatchThatIsNotWholeMicrobatches) {
  // pp 2: dp 8, micro_batch_size 2: a step takes 16 sequences; 100 is not a multiple.
  expect_rejected_by_run_and_validate(
      "layout-gbs.json",
      layout_scenario(R"({"pp": 2})", R"({"sequence_length": 1024, "micro_batch_size": 2, "global_batch_size": 100})"),
      {"$.training.global_batch_size", "100 sequences", "8 data-parallel ranks", "multiple of micro_batch_size x dp = 16"});
}

TEST_F(BadInput, GlobalBatchThatDisagreesWithMicrobatches) {
  // pp 2: dp 8; 64 sequences of 1 are 8 microbatches per rank, not the 1 written.
  expect_rejected_by_run_and_validate(
      "layout-gbs-mb.json",
      layout_scenario(R"({"pp": 2})", R"({"sequence_length": 1024, "microbatches": 1, "global_batch_size": 64})"),
      {"$.training.microbatches", "1 microbatches disagree with global_batch_size 64 (8 on 8 data-parallel ranks)",
       "give one of microbatches and global_batch_size"});
}

TEST_F(BadInput, ExpertParallelThatDoesNotFitAStage) {
  // pp 2 leaves 8 GPUs per stage: ep 16 cannot fold over them.
  expect_rejected_by_run_and_validate("layout-ep.json", layout_scenario(R"({"pp": 2, "ep": 16})"),
                                      {"$.parallel.ep", "16 does not divide the 8 GPUs of a pipeline stage"});
}

TEST_F(BadInput, LayoutForAStrategyWhosePaperHasNone) {
  expect_rejected_by_run_and_validate(
      "layout-hybridep.json", layout_scenario(R"({"pp": 2})", R"({"sequence_length": 1024})", R"({"name": "hybridep"})"),
      {"$.parallel", "strategy hybridep runs as its paper does", "use a strategy that takes one: ep"});
}

TEST_F(BadInput, TensorParallelMoeWithoutSequenceParallelism) {
  expect_rejected_by_run_and_validate("layout-sp.json", layout_scenario(R"({"tp": 2, "sequence_parallel": false})"),
                                      {"$.parallel.sequence_parallel", "need sequence parallelism", "set \"sequence_parallel\": true"});
}

TEST_F(BadInput, ContextParallelThatCannotBalanceTheSequence) {
  // 1000 tokens over cp 4: 8 chunks of 125 would do, but 1000 over cp 16 needs 32 chunks.
  expect_rejected_by_run_and_validate("layout-cp.json",
                                      layout_scenario(R"({"cp": 16})", R"({"sequence_length": 1000})"),
                                      {"$.parallel.cp", "1000 tokens does not split into 2 x cp = 32 chunks",
                                       "divisible by 2·cp"});
}

}  // namespace
}  // namespace moesim_cli

namespace moesim_cli {
namespace {

// GPT-Medium MoE (16 heads) with latent attention and one more model field beside it.
std::string mla_scenario(const std::string& beside) {
  std::string text = layout_scenario(R"({"tp": 1})");
  const std::string preset = R"({"preset": "gpt-medium-moe"})";
  text.replace(text.find(preset), preset.size(),
               R"({"preset": "gpt-medium-moe", )" + beside +
                   R"(, "mla": {"kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}})");
  return text;
}

TEST_F(BadInput, LatentAttentionWithASingleHeadDim) {
  // MLA heads have a query/key width and a value width: a head_dim beside them is ambiguous.
  expect_rejected_by_run_and_validate("mla-head-dim.json", mla_scenario(R"("head_dim": 64)"),
                                      {"$.model.head_dim", "no single head_dim", "qk_nope_head_dim"});
}

TEST_F(BadInput, LatentAttentionWithFewerKeyValueHeads) {
  expect_rejected_by_run_and_validate("mla-kv-heads.json", mla_scenario(R"("kv_heads": 4)"),
                                      {"$.model.kv_heads", "kv_heads 4 is not heads 16"});
}

// Zebra parallelism needs two GPU kinds, and Asym-EA's offload must split over the attention GPUs.
TEST_F(BadInput, ZebraOnOneGpuKind) {
  expect_rejected_by_run_and_validate(
      "zebra-one-kind.json",
      scenario_text(kTwoNodes, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})", R"({"name": "zebra"})"),
      {"$.cluster.groups", "exactly two GPU kinds", "the cluster has 1", "hetermoe-o1"});
}

TEST_F(BadInput, ZebraAsymEaOnWhereTheGpuCountsDoNotDivide) {
  // 4 A40 and 3 V100 (Fig. 10's 4:3): Asym-EA needs M a multiple of N or N of M (HeterMoE §4.2).
  const std::string cluster = R"({"groups": [{"gpu": "a40-48gb", "count": 4}, {"gpu": "v100-sxm2-16gb", "count": 3}],
      "levels": [{"name": "gpu", "count": 7, "bandwidth": "100Gbps", "latency": "5us"}]})";
  expect_rejected_by_run_and_validate(
      "zebra-4-3.json",
      scenario_text(cluster, R"({"preset": "mixtral-d1"})", R"({"sequence_length": 4096, "dtype": "fp16"})",
                    R"({"name": "zebra", "asym_ea": "on"})"),
      {"$.strategy.asym_ea", "M = 4, N = 3", "\"auto\""});
}

// O2 (4 A40, 8 V100, Mixtral-D1: 8 MoE layers of 24 experts, 3 per V100).
std::string zebra_o2(const char* offload) {
  return scenario_text(R"({"preset": "hetermoe-o2"})", R"({"preset": "mixtral-d1"})",
                       R"({"sequence_length": 4096, "dtype": "fp16"})", fmt::format(R"({{"name": "zebra", "asym_ea": {}}})", offload));
}

TEST_F(BadInput, ZebraOffloadListOfTheWrongLength) {
  expect_rejected_by_run_and_validate("zebra-short.json", zebra_o2("[0, 1, 0, 1, 0, 1, 0]"),
                                      {"$.strategy.asym_ea", "lists 7 counts", "8 MoE layers"});
}

TEST_F(BadInput, ZebraOffloadOfMoreExpertsThanAnExpertGpuHolds) {
  expect_rejected_by_run_and_validate("zebra-too-many.json", zebra_o2("[0, 1, 0, 1, 0, 1, 0, 4]"),
                                      {"$.strategy.asym_ea[7]", "holds 3 experts per layer", "cannot offload 4"});
}

TEST_F(BadInput, ZebraWithAGlobalBatch) {
  // global_batch_size divides the batch over every GPU; zebra's data-parallel ranks are its
  // attention GPUs, so it takes microbatches (R) instead.
  expect_rejected_by_run_and_validate(
      "zebra-global-batch.json",
      scenario_text(R"({"preset": "hetermoe-o1"})", R"({"preset": "mixtral-d1"})",
                    R"({"sequence_length": 4096, "dtype": "fp16", "global_batch_size": 24})", R"({"name": "zebra"})"),
      {"$.training.global_batch_size", "attention GPUs only", "training.microbatches"});
}

// (issue 44) The software's switches and the recomputation modules, where Megatron-Core refuses
// them or moesim does not model them.
TEST_F(BadInput, RecomputeModulesWithoutSelective) {
  expect_rejected_by_run_and_validate(
      "modules-full.json",
      scenario_text(kTwoNodes, R"({"preset": "gpt-medium-moe"})",
                    R"({"sequence_length": 1024, "recompute": "full", "recompute_modules": ["moe_act"]})", R"({"name": "ep"})"),
      {"$.training.recompute_modules", "training.recompute is full", "\"selective\""});
}

TEST_F(BadInput, RecomputeModuleNotModelled) {
  expect_rejected_by_run_and_validate(
      "modules-moe.json",
      scenario_text(kTwoNodes, R"({"preset": "gpt-medium-moe"})",
                    R"({"sequence_length": 1024, "recompute": "selective", "recompute_modules": ["moe"]})",
                    R"({"name": "ep"})"),
      {"$.training.recompute_modules", "not modelled", "moe_act"});
}

TEST_F(BadInput, DelayedWeightGradientsWithoutEpOverlap) {
  std::string text = scenario_text(kTwoNodes, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})",
                                   R"({"name": "ep"})");
  text.insert(text.rfind('}'), R"(, "software": {"delay_wgrad": true})");
  expect_rejected_by_run_and_validate("delay-wgrad.json", text, {"$.software.delay_wgrad", "\"ep_overlap\": true"});
}

TEST_F(BadInput, DgluDbiasFasterThanWithoutTheBiasGradient) {
  // A kernel that also computes a bias gradient cannot take less time than the same kernel without it.
  std::string text = scenario_text(kTwoNodes, R"({"preset": "gpt-medium-moe"})", R"({"sequence_length": 1024})",
                                   R"({"name": "ep"})");
  text.insert(text.rfind('}'), R"(, "software": {"dglu_dbias_slowdown": 0.5})");
  expect_rejected_by_run_and_validate("dglu-dbias.json", text, {"$.software.dglu_dbias_slowdown", "use a value >= 1"});
}

TEST_F(BadInput, MultiTokenPredictionOutsideMegatronsSchedule) {
  expect_rejected_by_run_and_validate(
      "mtp-parm.json",
      scenario_text(kTwoNodes, R"({"preset": "gpt-medium-moe", "mtp_layers": 1})", R"({"sequence_length": 1024})",
                    R"({"name": "parm"})"),
      {"$.model.mtp_layers", "strategy ep"});
}

}  // namespace
}  // namespace moesim_cli
