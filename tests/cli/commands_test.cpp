// The command line itself: usage, unknown commands, `presets`, `--version`.
#include <fstream>
#include <iterator>
#include <map>
#include <regex>

#include "cli_test_support.hpp"

namespace moesim_cli {
namespace {

using Commands = CliTest;

// `moesim presets`: "HEADING:" lines, then "  NAME  DESCRIPTION" entries.
std::map<std::string, std::map<std::string, std::string>> parse_presets(const std::string& text) {
  std::map<std::string, std::map<std::string, std::string>> sections;
  std::string heading;
  for (const auto& line : split_lines(text)) {
    if (line.empty()) continue;
    if (line[0] != ' ') {
      heading = line.back() == ':' ? line.substr(0, line.size() - 1) : line;
      sections[heading];
      continue;
    }
    const std::size_t start = line.find_first_not_of(' ');
    const std::size_t end = line.find(' ', start);
    const std::string name = line.substr(start, end - start);
    const std::size_t desc = end == std::string::npos ? std::string::npos : line.find_first_not_of(' ', end);
    sections[heading][name] = desc == std::string::npos ? "" : line.substr(desc);
  }
  return sections;
}

// Every NAME in the section, whatever the heading is called.
std::map<std::string, std::string> all_entries(const std::map<std::string, std::map<std::string, std::string>>& sections) {
  std::map<std::string, std::string> all;
  for (const auto& [heading, entries] : sections) all.insert(entries.begin(), entries.end());
  return all;
}

TEST_F(Commands, PresetsListsModelsTopologiesGpusAndStrategies) {
  const Result r = moesim({"presets"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  const auto entries = all_entries(parse_presets(r.out));
  for (const char* name : {"mixtral-8x7b", "deepseek-v3", "gpt-medium-moe", "hybridep-1000dc", "dgx-h100-2node",
                           "h100-sxm5-80gb", "t4-16gb", "ep"})
    EXPECT_TRUE(entries.count(name)) << name << " not listed\n" << r.out;
  // Descriptions come from the preset files.
  const auto description = [&](const std::string& name) { return entries.count(name) ? entries.at(name) : ""; };
  EXPECT_EQ(description("mixtral-8x7b"), "Mixtral-8x7B");
  EXPECT_EQ(description("h100-sxm5-80gb"), "NVIDIA H100 SXM5 80GB");
  EXPECT_NE(description("ep").find("expert parallelism"), std::string::npos);
  // Every file of models/ and topologies/ is listed (gpus.json and links.json are the GPU and link
  // catalogues, not topologies).
  for (const char* folder : {"models", "topologies"}) {
    for (const auto& e : fs::directory_iterator(kSourceDir / folder)) {
      if (e.path().extension() == ".json" && e.path().stem() != "gpus" && e.path().stem() != "links") {
        EXPECT_TRUE(entries.count(e.path().stem().string())) << e.path() << " not listed";
      }
    }
  }
  EXPECT_TRUE(listing(work_).empty());
}

TEST_F(Commands, PresetsSectionsAreNamedAndHoldTheirKinds) {
  const Result r = moesim({"presets"});
  ASSERT_EQ(r.code, 0) << describe(r);
  const auto sections = parse_presets(r.out);
  std::set<std::string> headings;
  for (const auto& [h, e] : sections) headings.insert(h);
  EXPECT_EQ(headings, (std::set<std::string>{"models", "topologies", "software", "gpus", "strategies"})) << r.out;
  const auto has = [&](const std::string& heading, const std::string& name) {
    return sections.count(heading) && sections.at(heading).count(name);
  };
  EXPECT_TRUE(has("models", "mixtral-8x7b"));
  EXPECT_TRUE(has("models", "deepseek-v3"));
  EXPECT_TRUE(has("models", "gpt-medium-moe"));
  EXPECT_TRUE(has("topologies", "hybridep-1000dc"));
  EXPECT_TRUE(has("gpus", "h100-sxm5-80gb"));
  EXPECT_TRUE(has("strategies", "ep"));
}

TEST_F(Commands, NoArgumentsPrintsUsageAndExits2) {
  const Result r = moesim({});
  EXPECT_EQ(r.code, 2) << describe(r);
  const std::string all = r.out + r.err;
  EXPECT_NE(all.find("usage: moesim COMMAND"), std::string::npos) << describe(r);
  for (const char* cmd : {"run SCENARIO.json", "validate SCENARIO.json", "sweep SCENARIO.json", "presets"})
    EXPECT_NE(all.find(cmd), std::string::npos) << cmd << "\n" << describe(r);
  EXPECT_TRUE(listing(work_).empty());
}

TEST_F(Commands, HelpExits0) {
  const Result r = moesim({"--help"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("usage: moesim COMMAND"), std::string::npos) << describe(r);
}

TEST_F(Commands, ACommandsHelpShowsItsUsageAlone) {
  // `moesim COMMAND --help`: that command's lines of the usage and the options it takes, exit 0,
  // whatever else is on the line; nothing run, nothing written.
  const Result r = moesim({"run", kQuickstart.string(), "--help"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(r.out.starts_with("usage: moesim run SCENARIO.json")) << describe(r);
  EXPECT_NE(r.out.find("--compare-uncalibrated runs it again"), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("--threads N"), std::string::npos) << describe(r);
  EXPECT_EQ(r.out.find("sweep SCENARIO.json"), std::string::npos) << describe(r);  // not another command's
  EXPECT_EQ(r.out.find("calibrate fit INPUT"), std::string::npos) << describe(r);
  EXPECT_TRUE(listing(work_).empty());
  // Options the command does not take are left out: presets takes --data, not --threads.
  const Result p = moesim({"presets", "-h"});
  EXPECT_EQ(p.code, 0) << describe(p);
  EXPECT_TRUE(p.out.starts_with("usage: moesim presets [--json]")) << describe(p);
  EXPECT_NE(p.out.find("--data DIR"), std::string::npos) << describe(p);
  EXPECT_EQ(p.out.find("--threads"), std::string::npos) << describe(p);
  for (const char* command : {"validate", "sweep", "collective", "calibrate"}) {
    const Result c = moesim({command, "--help"});
    EXPECT_EQ(c.code, 0) << describe(c);
    EXPECT_TRUE(c.out.starts_with(fmt::format("usage: moesim {} ", command))) << describe(c);
  }
  // An unknown command is still refused.
  EXPECT_EQ(moesim({"frobnicate", "--help"}).code, 2);
}

TEST_F(Commands, OutHasAShortForm) {
  // -o is --out for run and sweep, as for calibrate fit.
  const Result r = moesim({"run", kQuickstart.string(), "-o", (work_ / "short").string(), "--quiet"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(fs::exists(work_ / "short" / "results.json"));
  EXPECT_EQ(moesim({"validate", kQuickstart.string(), "-o", (work_ / "v").string()}).code, 2);  // validate writes nothing
}

TEST_F(Commands, ImportHfWritesAModelAScenarioTakes) {
  // `moesim import hf CONFIG.json -o MODEL.json`: the model object (sim/scenario/hf_config.hpp),
  // written whole; a scenario with it as its "model" validates. A config moesim cannot express
  // exits 2 naming its field and writes nothing.
  // A Mixtral-shaped config small enough for the quickstart's 16 H100s.
  const fs::path config = scenario("config.json", std::string(R"({"model_type": "mixtral", "hidden_size": 1024,
      "intermediate_size": 3584, "num_attention_heads": 16, "num_experts_per_tok": 2, "num_hidden_layers": 4,
      "num_key_value_heads": 8, "num_local_experts": 8, "rope_theta": 1000000.0, "vocab_size": 32000})"));
  const fs::path model = work_ / "small-mixtral.json";
  const Result r = moesim({"import", "hf", config.string(), "--name", "small-mixtral", "-o", model.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  const auto imported = OrderedJson::parse(read_text(model));
  EXPECT_EQ(imported.at("name"), "small-mixtral");
  EXPECT_EQ(imported.at("experts"), 8);
  OrderedJson doc = quickstart();
  doc["model"] = imported;
  doc["strategy"]["ep_size"] = 8;  // the quickstart's 16 over Mixtral's 8 experts
  const Result v = moesim({"validate", scenario("with-import.json", doc).string()});
  EXPECT_EQ(v.code, 0) << describe(v);
  const fs::path bad = scenario("bad.json", std::string(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "moe_intermediate_size": 1408,
      "shared_expert_intermediate_size": 3000, "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 24,
      "num_attention_heads": 16})"));
  const Result b = moesim({"import", "hf", bad.string(), "-o", (work_ / "never.json").string()});
  EXPECT_EQ(b.code, 2) << describe(b);
  EXPECT_TRUE(b.err.starts_with(fmt::format("moesim: error: {}: $.shared_expert_intermediate_size: is 3000", bad.string()))) << describe(b);
  EXPECT_FALSE(fs::exists(work_ / "never.json"));
}

TEST_F(Commands, ImportMegatronWritesAScenarioThatRuns) {
  // `moesim import megatron --cluster PRESET -o SCENARIO.json -- ARGS...`: a scenario that runs, the
  // flags moesim has no key for listed on stderr.
  const fs::path out = work_ / "imported.json";
  const Result r = moesim({"import", "megatron", "--cluster", "dgx-h100-2node", "--name", "small", "-o", out.string(), "--",
                           "--num-layers", "4", "--hidden-size", "1024", "--ffn-hidden-size", "3584", "--num-attention-heads",
                           "16", "--num-experts", "8", "--moe-router-topk", "2", "--swiglu", "--disable-bias-linear",
                           "--seq-length", "1024", "--micro-batch-size", "2", "--global-batch-size", "64", "--bf16",
                           "--expert-model-parallel-size", "8", "--train-iters", "1"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.err, "moesim: not imported (no moesim key): --train-iters\n") << describe(r);
  const auto doc = OrderedJson::parse(read_text(out));
  EXPECT_EQ(doc.at("parallel").at("ep"), 8);
  const Result run = moesim({"run", out.string(), "-o", (work_ / "run").string(), "--quiet"});
  EXPECT_EQ(run.code, 0) << describe(run);
  // Without --cluster: refused, nothing written.
  const Result bad = moesim({"import", "megatron", "-o", (work_ / "never.json").string(), "--", "--num-layers", "4"});
  EXPECT_EQ(bad.code, 2) << describe(bad);
  EXPECT_FALSE(fs::exists(work_ / "never.json"));
}

TEST_F(Commands, ImportMegatronBridgeConfigWritesAScenarioThatRuns) {
  // `moesim import megatron CONFIG.yaml --cluster CLUSTER.json --model PRESET --software PRESET`:
  // Megatron-Bridge's GPT-OSS GB300 recipe (tests/data/megatron_bridge) on 64 GB300 of one NVLink
  // domain, the model preset the file's shape agrees with, a release's software under the file's
  // switches; what is approximated and what has no moesim key on stderr.
  const fs::path config = kSourceDir / "tests" / "data" / "megatron_bridge" / "gpt_oss_120b_pretrain_gb300_fp8_mx_v2.yaml";
  const fs::path cluster = scenario("gb300-64.json", std::string(R"({"gpu": "gb300-nvl72", "levels": [{"name": "gpu", "count": 64,
      "bandwidth": "900GB/s", "latency": "1us", "link": "nvlink5"}]})"));
  const fs::path out = work_ / "gpt-oss.json";
  const Result r = moesim({"import", "megatron", config.string(), "--cluster", cluster.string(), "--model", "gpt-oss-120b",
                           "--software", "megatron-bridge-26.04", "-o", out.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(r.err.starts_with("moesim: approximated: model.softmax_type learnable")) << describe(r);
  EXPECT_NE(r.err.find("moesim: not imported (no moesim key): "), std::string::npos) << describe(r);
  const auto doc = OrderedJson::parse(read_text(out));
  EXPECT_EQ(doc.at("model"), OrderedJson::parse(R"({"preset": "gpt-oss-120b"})"));
  EXPECT_EQ(doc.at("software"), OrderedJson::parse(R"({"cuda_graphs": ["attn", "moe_router", "moe_preprocess"],
                                                       "preset": "megatron-bridge-26.04"})"));
  EXPECT_EQ(doc.at("parallel").at("ep"), 64);
  const Result run = moesim({"run", out.string(), "-o", (work_ / "run").string(), "--quiet"});
  EXPECT_EQ(run.code, 0) << describe(run);
  // A preset of another model, and FP4 training: refused in one line naming the field, nothing written.
  const Result other = moesim({"import", "megatron", config.string(), "--cluster", cluster.string(), "--model", "qwen3-30b-a3b",
                               "-o", (work_ / "never.json").string()});
  EXPECT_EQ(other.code, 2) << describe(other);
  EXPECT_EQ(other.err, fmt::format("moesim: error: {}: model.num_layers: is 36, where model preset qwen3-30b-a3b has 48; name the "
                                   "preset of this model, or import without a model preset\n", config.string()));
  // A scenario the cluster refuses (MXFP8 on H100s, which have no MXFP8 units): one line, the
  // unmapped fields unsaid.
  const fs::path mxfp8 = kSourceDir / "tests" / "data" / "megatron_bridge" / "deepseek_v3_pretrain_vr200_fp8_mx_v2.yaml";
  const Result h100 = moesim({"import", "megatron", mxfp8.string(), "--cluster", "dgx-h100", "-o", (work_ / "never.json").string()});
  EXPECT_EQ(h100.code, 2) << describe(h100);
  EXPECT_EQ(std::count(h100.err.begin(), h100.err.end(), '\n'), 1) << describe(h100);
  EXPECT_NE(h100.err.find("$.training.dtype"), std::string::npos) << describe(h100);
  const fs::path fp4 = kSourceDir / "tests" / "data" / "megatron_bridge" / "qwen3_235b_a22b_pretrain_gb200_nvfp4_v2.yaml";
  const Result bad = moesim({"import", "megatron", fp4.string(), "--cluster", "nvl72", "-o", (work_ / "never.json").string()});
  EXPECT_EQ(bad.code, 2) << describe(bad);
  EXPECT_TRUE(bad.err.starts_with(fmt::format("moesim: error: {}: mixed_precision.fp4: ", fp4.string()))) << describe(bad);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << describe(bad);
  EXPECT_FALSE(fs::exists(work_ / "never.json"));
}

TEST_F(Commands, ImportTorchtitanWritesAScenarioThatRuns) {
  // `moesim import torchtitan CONFIG.toml --cluster PRESET -o SCENARIO.json`: torchtitan's own
  // Qwen3-30B-A3B configuration (tests/data/torchtitan) on the 8 H100 its note names; the keys
  // moesim has no counterpart for listed on stderr.
  const fs::path out = work_ / "qwen.json";
  const fs::path config = kSourceDir / "tests" / "data" / "torchtitan" / "qwen3_30b_a3b.toml";
  const Result r = moesim({"import", "torchtitan", config.string(), "--cluster", "dgx-h100", "-o", out.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(r.err.starts_with("moesim: not imported (no moesim key): ")) << describe(r);
  EXPECT_NE(r.err.find(" checkpoint.interval "), std::string::npos) << describe(r);
  const auto doc = OrderedJson::parse(read_text(out));
  EXPECT_EQ(doc.at("software").at("preset"), "torchtitan");
  EXPECT_EQ(doc.at("training").at("global_batch_size"), 128);
  const Result run = moesim({"run", out.string(), "-o", (work_ / "run").string(), "--quiet"});
  EXPECT_EQ(run.code, 0) << describe(run);
  // Interleaved1F1B over 2 pipeline ranks, 6 layers a virtual stage: Qwen3-30B-A3B's 48 layers
  // are 4 virtual stages a rank.
  const fs::path piped = scenario("piped.toml", read_text(config) + "\n");
  std::string text = read_text(piped);
  text.replace(text.find("tensor_parallel_degree = 1"), 26,
               "tensor_parallel_degree = 1\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
               "pipeline_parallel_layers_per_stage = 6");
  write_text(piped, text);
  const Result p = moesim({"import", "torchtitan", piped.string(), "--cluster", "dgx-h100"});
  ASSERT_EQ(p.code, 0) << describe(p);
  EXPECT_EQ(OrderedJson::parse(p.out).at("parallel").at("vp"), 4) << p.out;
  // A flavor without a moesim model: refused naming the key, nothing written.
  const fs::path small = scenario("small.toml", std::string("[model]\nname = \"deepseek_v3\"\nflavor = \"16B\"\n"));
  const Result bad = moesim({"import", "torchtitan", small.string(), "--cluster", "dgx-h100", "-o", (work_ / "never.json").string()});
  EXPECT_EQ(bad.code, 2) << describe(bad);
  EXPECT_TRUE(bad.err.starts_with(fmt::format("moesim: error: {}: model.flavor: ", small.string()))) << describe(bad);
  EXPECT_FALSE(fs::exists(work_ / "never.json"));
}

TEST_F(Commands, SchemaPrintsOrWritesTheScenarioJsonSchema) {
  // `moesim schema`: the scenario file's JSON Schema on stdout, or in FILE with -o (and nothing
  // printed); a scenario argument is refused with exit code 2 and nothing written.
  const Result printed = moesim({"schema"});
  ASSERT_EQ(printed.code, 0) << describe(printed);
  const auto s = nlohmann::json::parse(printed.out);
  EXPECT_EQ(s.at("$schema"), "https://json-schema.org/draft/2020-12/schema");
  EXPECT_EQ(s.at("required"), nlohmann::json::array({"name", "cluster", "model", "training", "strategy"}));
  EXPECT_EQ(s.at("properties").at("training").at("properties").at("micro_batch_size").at("default"), 1);
  const fs::path file = work_ / "scenario.schema.json";
  const Result written = moesim({"schema", "-o", file.string()});
  ASSERT_EQ(written.code, 0) << describe(written);
  EXPECT_EQ(written.out, "");
  std::ifstream in(file);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), printed.out);
  // --markdown: the same declarations as a reference, a table per section.
  const Result reference = moesim({"schema", "--markdown"});
  ASSERT_EQ(reference.code, 0) << describe(reference);
  EXPECT_TRUE(reference.out.starts_with("# Scenario reference, key by key\n")) << describe(reference);
  EXPECT_NE(reference.out.find("| `micro_batch_size` | integer, between 1 and 65536 | `1` |"), std::string::npos);
  const Result bad = moesim({"schema", "scenarios/quickstart.json", "-o", (work_ / "never.json").string()});
  EXPECT_EQ(bad.code, 2) << describe(bad);
  EXPECT_FALSE(fs::exists(work_ / "never.json"));
}

TEST_F(Commands, PresetsAsJson) {
  // `moesim presets --json`: one array of {kind, name, description}, the listing's entries.
  const Result r = moesim({"presets", "--json"});
  ASSERT_EQ(r.code, 0) << describe(r);
  const auto all = nlohmann::json::parse(r.out);
  ASSERT_TRUE(all.is_array());
  const auto sections = parse_presets(moesim({"presets"}).out);
  const std::map<std::string, std::string> heading{
      {"model", "models"}, {"topology", "topologies"}, {"software", "software"}, {"gpu", "gpus"}, {"strategy", "strategies"}};
  std::size_t listed = 0;
  for (const auto& [h, entries] : sections) listed += entries.size();
  EXPECT_EQ(all.size(), listed);
  std::set<std::string> kinds;
  for (const auto& p : all) {
    const std::string kind = p.at("kind"), name = p.at("name");
    kinds.insert(kind);
    ASSERT_TRUE(heading.count(kind)) << kind;
    const auto& entries = sections.at(heading.at(kind));
    ASSERT_TRUE(entries.count(name)) << kind << " " << name;
    EXPECT_EQ(entries.at(name), p.at("description").get<std::string>()) << name;
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"model", "topology", "software", "gpu", "strategy"}));
}

TEST_F(Commands, UnknownCommandExits2) {
  const Result r = moesim({"frobnicate"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(r.out, "") << describe(r);
  EXPECT_EQ(r.err, "moesim: error: unknown command \"frobnicate\"; use run, validate, sweep, search, presets, schema, collective, calibrate or import "
                   "(`moesim --help` shows the usage)\n");
  EXPECT_TRUE(listing(work_).empty());
}

TEST_F(Commands, RunWithoutScenarioExits2) {
  const Result r = moesim({"run"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("missing SCENARIO.json"), std::string::npos) << describe(r);
  EXPECT_TRUE(listing(work_).empty());
}

TEST_F(Commands, AFlagTheCommandDoesNotTakeIsRefused) {
  // Accepted and ignored before (issue 45): run --jobs, validate --out, sweep --trace, collective
  // --table without a log to read.
  const std::string q = kQuickstart.string(), sweep = (kSourceDir / "scenarios" / "sweep-interdc.json").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"run", q, "--jobs", "2"}, "run does not take --jobs"},
      {{"validate", q, "--out", "x"}, "validate does not take --out"},
      {{"validate", q, "--trace"}, "validate does not take --trace"},
      {{"sweep", sweep, "--trace"}, "sweep does not take --trace"},
      {{"presets", q}, "presets takes no SCENARIO.json"},
      {{"collective", "all_reduce", "--cluster", "dgx-h100", "--table", "0"}, "--table reads the log of --compare; give --compare LOG"},
      {{"collective", "all_reduce", "--cluster", "dgx-h100", "--gpus-per-node", "4"}, "--gpus-per-node reads the log of --compare; give --compare LOG"}};
  for (const auto& [args, message] : cases) {
    const Result r = moesim(args);
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_EQ(r.err, fmt::format("moesim: error: {}; `moesim --help` shows the usage\n", message)) << describe(r);
    EXPECT_EQ(r.out, "");
  }
  EXPECT_TRUE(listing(work_).empty());
}

TEST_F(Commands, Version) {
  const Result r = moesim({"--version"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.out.rfind("moesim ", 0), 0u) << describe(r);
}

TEST_F(Commands, ValidateGoodScenario) {
  const Result r = moesim({"validate", kQuickstart.string()});
  EXPECT_EQ(r.code, 0) << describe(r);
  // Peak memory as results.json's memory.peak_bytes (12843204608 B = 11.96 GiB, pinned in
  // tests/golden/quickstart.json; of it the vocabulary ends' activations of one microbatch of 8192
  // tokens, 8192 · (8 + 1024 + 4 · 1024 + 2 · 50257) = 865419264 B: Megatron-LM's estimate with the
  // logits in BF16, as Transformer Engine's fused cross entropy keeps them). The
  // run's memory, term by term as tests/unit/memory_estimate_test.cpp (QuickstartTermByTerm)
  // derives it: the task program of two iterations of 7328 tasks, 3296 members and 206
  // collectives is 2538221.7 B = 2.421 MiB where the tasks' chunk gets huge pages, else 1227501.7
  // B = 1.171 MiB; sampled routing 196608 B = 192 KiB; the run state 16 GPUs' (88898 B:
  // memory_estimate_test.cpp's terms, a launch thread of 72 B and a sustained-clock state of 40 B per
  // GPU among them; and what the flow model keeps for reuse, the link demands of 64 collectives
  // over every GPU of 2 tiers, 64 · 2 · 3 · 16 of 16 B = 98304 B, and 64 dense matrices over the
  // 16 GPUs, 64 · 16² · 8 B = 131072 B): 310.8 KiB, 2.912 MiB in all, else 1.662 MiB. The peak
  // adds what the process holds already, which depends on the machine: checked by pattern.
  const std::string head = kQuickstart.string() +
                           ": valid (ep on 16 GPUs, HybridEP GPT-Medium MoE, 2 iteration(s); peak GPU memory 11.96 GiB, "
                           "run memory about ";
  ASSERT_EQ(r.out.substr(0, head.size()), head) << r.out;
  EXPECT_TRUE(std::regex_match(r.out.substr(head.size()),
                               std::regex(R"((2\.912 MiB \(task program 2\.421|1\.662 MiB \(task program 1\.171) MiB, )"
                                          R"(sampled routing 192 KiB, run state 310\.8 KiB\); )"
                                          R"(peak memory about [0-9.]+ MiB with the [0-9.]+ MiB moesim holds\)\n)"
                                          R"(  time: about 0\.0062 s of CPU for its 1\.47e\+04 tasks \(at 0\.42 us a task, .*\)\n)")))
      << r.out;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(listing(work_).empty());
}

// A sweep's CPU time up front (simulation/time_estimate.hpp): every point that can run, at the
// measured rate a task. sweep-interdc's base point, 2 datacenters of 8 GPUs, writes about 3.8e3
// tasks (its engine ran 3744); the grid's 2, 4 and 8 datacenters hold 1, 2 and 4 times its GPUs,
// each task count growing with them, at 3 bandwidths and 2 expert counts: 6 · (1 + 2 + 4) · 3.8e3
// tasks, 67 ms at 0.42 us.
TEST_F(Commands, ValidateEstimatesASweepsTime) {
  const Result r = moesim({"validate", (kSourceDir / "scenarios" / "sweep-interdc.json").string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  std::smatch m;
  const std::string out = r.out;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(sweep time: its 18 points that can run take about ([0-9.e-]+) s of CPU in all)")))
      << r.out;
  EXPECT_NEAR(std::stod(m[1]), 6 * 7 * 3.8e3 * 0.42e-6, 0.1 * 6 * 7 * 3.8e3 * 0.42e-6) << r.out;
}

// ranked.csv's rows as fields, the header left out.
std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  const auto lines = split_lines(text);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f;
    std::stringstream line(lines[i]);
    for (std::string x; std::getline(line, x, ',');) f.push_back(x);
    rows.push_back(f);
  }
  return rows;
}

// `moesim search`: the layouts of a small model on 16 H100s, global batch 256 (the grid of
// LayoutSpace.MegatronsDivisibilityRules at 4× its batch: TP 1 PP 1 takes both micro-batches now,
// 12 layouts), ranked by simulated throughput, the scenario's own layout marked, and the fastest
// written as a scenario that runs to the same figure. The screening (2 and 4 microbatches, the line
// through them) ranks as running every layout in full does: with expected routing every
// microbatch after the pipeline fills repeats the same step, so the line is exact.
TEST_F(Commands, SearchRanksTheLayoutsAndWritesTheFastest) {
  OrderedJson doc = {{"name", "search-small"},
                     {"cluster", {{"preset", "dgx-h100-2node"}}},
                     {"model", {{"preset", "gpt-medium-moe"}}},
                     {"training", {{"sequence_length", 1024}, {"micro_batch_size", 4}, {"global_batch_size", 256}, {"dtype", "bf16"}}},
                     {"routing", {{"sampling", "expected"}}},
                     {"parallel", {{"ep", 16}}},
                     {"strategy", {{"name", "ep"}}}};
  const fs::path sc = scenario("search.json", doc);
  const std::vector<std::string> grid{"--tp", "1,2", "--pp", "1,2", "--vp", "1", "--ep", "8,16", "--mbs", "4,8"};
  std::vector<std::string> args{"search", sc.string(), "-o", (root_ / "s").string(), "--finalists", "3"};
  args.insert(args.end(), grid.begin(), grid.end());
  const Result r = moesim(args);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("search search-small: 12 layouts on 16 GPUs"), std::string::npos) << r.out;
  const auto ranked = csv_rows(read_text(root_ / "s" / "ranked.csv"));
  const auto refused = split_lines(read_text(root_ / "s" / "refused.csv"));
  ASSERT_GE(ranked.size(), 4u);
  EXPECT_EQ(ranked.size() + refused.size() - 1, 12u);  // every layout ranked or set aside with its reason
  double previous = 1e300;
  std::size_t own = 0, in_full = 0;
  for (const auto& f : ranked) {
    ASSERT_EQ(f.size(), 21u);  // rank, 13 layout columns, 4 figures, simulated, screened figure, own
    const double tps = std::stod(f[14]);
    EXPECT_LE(tps, previous) << "ranked.csv is fastest first";
    previous = tps;
    in_full += f[18] == "in full" ? 1 : 0;
    if (f[20] == "yes") {
      ++own;
      // TP, PP, VP, CP, EP, ETP, the stages' layers, micro-batch, recompute, sharding, dispatcher.
      EXPECT_EQ(std::vector<std::string>(f.begin() + 1, f.begin() + 13),
                (std::vector<std::string>{"1", "1", "1", "1", "16", "1", "12", "12", "4", "none", "none", "nccl"}));
    }
  }
  EXPECT_EQ(own, 1u);
  EXPECT_GE(in_full, 3u);  // the finalists (and the scenario's own layout)
  // Every layout in full ranks them the same, with the same figures.
  args[3] = (root_ / "full").string();
  args.push_back("--no-screening");
  ASSERT_EQ(moesim(args).code, 0);
  const auto full = csv_rows(read_text(root_ / "full" / "ranked.csv"));
  ASSERT_EQ(full.size(), ranked.size());
  for (std::size_t i = 0; i < full.size(); ++i) {
    EXPECT_EQ(std::vector<std::string>(full[i].begin() + 1, full[i].begin() + 13),
              std::vector<std::string>(ranked[i].begin() + 1, ranked[i].begin() + 13));
    EXPECT_NEAR(std::stod(ranked[i][14]), std::stod(full[i][14]), 1e-3 * std::stod(full[i][14])) << "rank " << i + 1;
  }
  // best.json is the scenario of rank 1, and runs to its throughput.
  const Result best = moesim({"run", (root_ / "s" / "best.json").string(), "-o", (root_ / "best").string(), "--quiet"});
  ASSERT_EQ(best.code, 0) << describe(best);
  const Json results = Json::parse(read_text(root_ / "best" / "results.json"));
  EXPECT_NEAR(results.at("tokens_per_second").get<double>(), std::stod(ranked[0][14]), 1e-6 * std::stod(ranked[0][14]));
}

TEST_F(Commands, SearchRefusesABadListNamingTheFlag) {
  const Result r = moesim({"search", kQuickstart.string(), "--tp", "1,0", "-o", (root_ / "s").string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_char(r.err, '\n'), 1u) << r.err;
  EXPECT_NE(r.err.find("--tp: 1,0: has \"0\", not a whole number of at least 1; give a comma-separated list, e.g. --tp 1,2,4"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(root_ / "s"));
}

TEST_F(Commands, SearchRefusesAScenarioWithASweepOfItsOwn) {
  OrderedJson doc = quickstart();
  doc["sweep"] = {{"axes", OrderedJson::array({{{"path", "model.experts"}, {"values", {16, 32}}}})}};
  const Result r = moesim({"search", scenario("with-sweep.json", doc).string(), "-o", (root_ / "s").string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("$.sweep"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("remove the sweep block"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root_ / "s"));
}

TEST_F(Commands, RunWithoutOutWritesToOutName) {
  // The documented default: out/NAME under the current folder.
  const Result r = moesim({"run", kQuickstart.string(), "--quiet"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(listing(work_ / "out" / "quickstart"), (std::set<std::string>{"results.json", "scenario.effective.json"}));
}

// A run says whether the host was simulated, on the terminal and in results.json: without a
// software section every kernel starts when its GPU can run it, and the summary says so.
TEST_F(Commands, ARunSaysWhetherItsHostWasSimulated) {
  const fs::path out = root_ / "out";
  Result r = moesim({"run", kQuickstart.string(), "--out", out.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("  software                   none: the host is not modelled"), std::string::npos) << r.out;
  Json results = Json::parse(read_text(out / "results.json"));
  EXPECT_TRUE(results.at("software").at("name").is_null());
  EXPECT_FALSE(results.at("software").at("host_modelled").get<bool>());
  OrderedJson doc = quickstart();
  doc["software"] = {{"preset", "pytorch-eager"}};
  r = moesim({"run", scenario("eager.json", doc.dump(2)).string(), "--out", out.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("  software                   Eager PyTorch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the host's launches simulated"), std::string::npos) << r.out;
  results = Json::parse(read_text(out / "results.json"));
  EXPECT_TRUE(results.at("software").at("host_modelled").get<bool>());
}

// A trace that cannot be written whole (the file-size limit, as a full disk would) exits 1 naming
// it and leaves no trace.json and no results.json: results.json is written last, only after all
// else is on disk. The quickstart's trace is megabytes; 64 blocks of 512 B hold the effective
// scenario and results but not the trace.
TEST_F(Commands, TraceThatCannotBeWrittenExits1AndLeavesNoResults) {
  const fs::path out = root_ / "out";
  const Result r = moesim({"run", kQuickstart.string(), "--out", out.string(), "--trace", "--quiet"},
                          "trap '' XFSZ; ulimit -f 64; exec");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(r.err, fmt::format("moesim: error: cannot write {}: File too large\n", (out / "trace.json").string()))
      << describe(r);
  EXPECT_TRUE(listing(out).empty()) << describe(r);
}

// Progress on stderr when it is a terminal (script(1) gives moesim one; MOESIM_PROGRESS_SECONDS
// makes the reports frequent), never when it is a file or a pipe (every other test: stderr empty).
TEST_F(Commands, ProgressOnATerminalOnly) {
  OrderedJson doc = quickstart();
  doc["training"]["iterations"] = 6;
  const fs::path file = scenario("six.json", doc.dump(2));
  const fs::path log = root_ / "terminal.txt";
  const std::string inner = fmt::format("MOESIM_PROGRESS_SECONDS=0.000001 {} run {} --out {}", shell_quote(kBinary.string()),
                                        shell_quote(file.string()), shell_quote((root_ / "out").string()));
  const std::string cmd = fmt::format("cd {} && script -qec {} /dev/null > {} 2>&1 </dev/null", shell_quote(work_.string()),
                                      shell_quote(inner), shell_quote(log.string()));
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(log);
  const std::string terminal = read_text(log);
  EXPECT_NE(terminal.find("\rmoesim: iteration "), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("/6, "), std::string::npos) << terminal;
  EXPECT_NE(terminal.find(" tasks/s, simulated "), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("iteration time"), std::string::npos) << terminal;  // the summary follows
  // The same run into a file: no progress.
  const Result quiet = moesim({"run", file.string(), "--out", (root_ / "out2").string()});
  EXPECT_EQ(quiet.code, 0) << describe(quiet);
  EXPECT_EQ(quiet.err, "");
}

}  // namespace
}  // namespace moesim_cli
