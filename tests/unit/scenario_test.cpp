// Scenario loading: the declared schema's errors, preset resolution, and every shipped preset.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "sim/core/error.hpp"
#include "sim/scenario/scenario_schema.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

const char* kBase = R"({
  "name": "t",
  "cluster": {"gpu": "h100-sxm5-80gb", "levels": [{"name": "gpu", "count": 8, "bandwidth": "450GB/s", "latency": "2us"}]},
  "model": {"preset": "gpt-medium-moe"},
  "training": {"sequence_length": 512},
  "strategy": {"name": "ep"}
})";

// Returns the InputError a scenario raises, after applying `edit` to the base document.
template <typename Edit>
InputError error_of(Edit edit) {
  auto doc = schema::Json::parse(kBase);
  edit(doc);
  try {
    const auto l = test::loader();
    l.build(l.resolve(doc, "s.json"), "s.json");
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no error raised";
  return InputError("", "", "", "");
}

}  // namespace

TEST(Scenario, DefaultsAreFilledIntoTheEffectiveScenario) {
  const auto s = test::scenario_from(kBase);
  EXPECT_EQ(s.gpu_count(), 8u);
  EXPECT_EQ(s.training.micro_batch_size, 1);
  EXPECT_EQ(s.training.dtype, cluster::Dtype::bf16);
  EXPECT_EQ(s.effective["training"]["iterations"], 1);
  EXPECT_EQ(s.effective["strategy"]["pipelining_degree"], 1);
  EXPECT_EQ(s.effective["model"]["experts"], 32);  // from the preset
  EXPECT_FALSE(s.effective["model"].contains("preset"));
  EXPECT_TRUE(s.effective["gpus"].contains("h100-sxm5-80gb"));
  EXPECT_DOUBLE_EQ(s.levels[0].bandwidth.bytes_per_second, 450e9);
}

TEST(Scenario, EffectiveScenarioRebuildsToTheSameScenario) {
  const auto s = test::scenario_from(kBase);
  const auto again = test::scenario_from(s.effective.dump());
  EXPECT_EQ(again.effective.dump(), s.effective.dump());
}

TEST(Scenario, TypoedKeyNamesPathAndSuggestion) {
  const auto e = error_of([](auto& d) { d["cluster"]["levels"][0]["bandwith"] = "1Gbps"; });
  EXPECT_EQ(e.file(), "s.json");
  EXPECT_EQ(e.path(), "$.cluster.levels[0].bandwith");
  EXPECT_NE(e.fix().find("did you mean \"bandwidth\""), std::string::npos) << e.what();
}

TEST(Scenario, AnotherFrameworksNameIsRefusedWithTheKeyItMeans) {
  // Megatron-Core's and Hugging Face's names for keys of this object: the refusal names moesim's.
  const auto megatron = error_of([](auto& d) { d["parallel"] = {{"tensor_model_parallel_size", 2}}; });
  EXPECT_EQ(megatron.path(), "$.parallel.tensor_model_parallel_size");
  EXPECT_TRUE(megatron.fix().starts_with("moesim calls it \"tp\"")) << megatron.what();
  const auto hf = error_of([](auto& d) { d["training"]["seq_length"] = 4096; });
  EXPECT_TRUE(hf.fix().starts_with("moesim calls it \"sequence_length\"")) << hf.what();
  // A name whose moesim key is not allowed here gets the usual answer.
  const auto elsewhere = error_of([](auto& d) { d["training"]["num_experts"] = 8; });
  EXPECT_EQ(elsewhere.fix().find("moesim calls it"), std::string::npos) << elsewhere.what();
}

TEST(Scenario, BandwidthWithoutUnitIsRefused) {
  const auto e = error_of([](auto& d) { d["cluster"]["levels"][0]["bandwidth"] = 10; });
  EXPECT_EQ(e.path(), "$.cluster.levels[0].bandwidth");
  EXPECT_NE(e.problem().find("no unit"), std::string::npos);
  EXPECT_NE(e.fix().find("Gbps"), std::string::npos);
  const auto s = error_of([](auto& d) { d["cluster"]["levels"][0]["bandwidth"] = "10"; });
  EXPECT_EQ(s.path(), "$.cluster.levels[0].bandwidth");
  const auto zero = error_of([](auto& d) { d["cluster"]["levels"][0]["bandwidth"] = "0Gbps"; });
  EXPECT_NE(zero.problem().find("out of range"), std::string::npos);
}

TEST(Scenario, WrongTypesAndImpossibleValues) {
  EXPECT_EQ(error_of([](auto& d) { d["training"]["sequence_length"] = "512"; }).path(), "$.training.sequence_length");
  EXPECT_EQ(error_of([](auto& d) { d["training"]["sequence_length"] = 0; }).path(), "$.training.sequence_length");
  EXPECT_EQ(error_of([](auto& d) { d["training"]["dtype"] = "int4"; }).path(), "$.training.dtype");
  EXPECT_EQ(error_of([](auto& d) { d["model"]["top_k"] = 64; }).path(), "$.model.top_k");
  EXPECT_EQ(error_of([](auto& d) { d["cluster"]["gpu"] = "h100"; }).fix().find("h100-sxm5-80gb") != std::string::npos, true);
  EXPECT_EQ(error_of([](auto& d) { d["strategy"]["name"] = "zebra2"; }).path(), "$.strategy.name");
  EXPECT_EQ(error_of([](auto& d) { d["strategy"]["pipelining"] = 2; }).path(), "$.strategy.pipelining");
  EXPECT_EQ(error_of([](auto& d) { d["model"] = schema::Json{{"preset", "no-such-model"}}; }).path(), "$.model.preset");
  EXPECT_EQ(error_of([](auto& d) { d.erase("training"); }).path(), "$.training");
}

TEST(Scenario, CurrentScalingScalesFp8TensorsOnly) {
  // MXFP8 scales each block of 32 elements, BF16 nothing: per-tensor current scaling is refused.
  for (const char* dtype : {"mxfp8", "bf16"}) {
    const auto e = error_of([&](auto& d) {
      d["training"]["dtype"] = dtype;
      d["training"]["fp8_scaling"] = "current";
    });
    EXPECT_EQ(e.path(), "$.training.fp8_scaling");
    EXPECT_NE(e.fix().find("\"fp8\""), std::string::npos) << e.what();
  }
  auto doc = schema::Json::parse(kBase);
  doc["training"]["dtype"] = "fp8";
  doc["training"]["fp8_scaling"] = "current";
  const auto s = test::scenario_from(doc.dump());
  EXPECT_TRUE(s.compute.fp8_current_scaling);
  EXPECT_FALSE(test::scenario_from(kBase).compute.fp8_current_scaling);
}

TEST(Scenario, HeterogeneousGroupsMustCoverTheCluster) {
  const auto e = error_of([](auto& d) {
    d["cluster"].erase("gpu");
    d["cluster"]["groups"] = schema::Json::parse(R"([{"gpu": "a40-48gb", "count": 4}, {"gpu": "v100-sxm2-16gb", "count": 3}])");
  });
  EXPECT_EQ(e.path(), "$.cluster.groups");
  auto doc = schema::Json::parse(kBase);
  doc["cluster"].erase("gpu");
  doc["cluster"]["groups"] = schema::Json::parse(R"([{"gpu": "a40-48gb", "count": 4}, {"gpu": "v100-sxm2-16gb", "count": 4}])");
  doc["training"]["dtype"] = "fp16";  // V100 has no bf16
  const auto s = test::scenario_from(doc.dump());
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(s.kind_of_gpu[3], 0);
  EXPECT_EQ(s.kind_of_gpu[4], 1);
}

TEST(Scenario, EveryShippedPresetLoads) {
  // Each model and topology preset builds into a scenario (their own files are validated too).
  namespace fs = std::filesystem;
  int models = 0, topologies = 0;
  for (const auto& f : fs::directory_iterator(fs::path(MOESIM_SOURCE_DIR) / "models")) {
    auto doc = schema::Json::parse(kBase);
    doc["model"] = schema::Json{{"preset", f.path().stem().string()}};
    EXPECT_NO_THROW(test::scenario_from(doc.dump())) << f.path();
    ++models;
  }
  for (const auto& f : fs::directory_iterator(fs::path(MOESIM_SOURCE_DIR) / "topologies")) {
    if (f.path().stem() == "gpus" || f.path().stem() == "links") continue;  // the catalogues
    auto doc = schema::Json::parse(kBase);
    doc["cluster"] = schema::Json{{"preset", f.path().stem().string()}};
    doc["training"]["dtype"] = "fp16";  // supported by every GPU of the catalogue
    EXPECT_NO_THROW(test::scenario_from(doc.dump())) << f.path();
    ++topologies;
  }
  EXPECT_GE(models, 6);
  EXPECT_GE(topologies, 10);
}

TEST(Scenario, CatalogueHasTheRequiredGpus) {
  const auto l = test::loader();
  std::set<std::string> gpus;
  for (const auto& p : l.presets())
    if (p.kind == "gpu") gpus.insert(p.name);
  for (const char* g : {"a100-sxm4-80gb", "a800-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb", "b200-sxm-180gb",
                        "a40-48gb", "v100-sxm2-16gb", "l40s-48gb", "t4-16gb", "rtx4090-24gb", "rtx2080ti-11gb"})
    EXPECT_TRUE(gpus.count(g)) << g;
}

TEST(Scenario, ModelPresetsHaveTheirPublishedSizes) {
  // Mixtral 8x7B: 46.7B parameters (Mixtral paper); DeepSeek-V3: 671B (technical report);
  // HybridEP Table II: P_E of GPT-Medium 8.4M = 2·1024·4096.
  auto doc = schema::Json::parse(kBase);
  doc["model"] = schema::Json{{"preset", "mixtral-8x7b"}};
  EXPECT_NEAR(test::scenario_from(doc.dump()).model.total_params() / 1e9, 46.7, 0.5);
  doc["model"] = schema::Json{{"preset", "deepseek-v3"}};
  const auto ds = test::scenario_from(doc.dump()).model;
  EXPECT_NEAR(ds.total_params() / 1e9, 671, 1);
  // Its latent attention per layer: query down 7168·1536 and its norm 1536, query up
  // 1536·(128 heads · 192); key/value down 7168·(512 + 64) and its norm 512, up 512·(128 · 256);
  // output 128·128 · 7168.
  EXPECT_DOUBLE_EQ(ds.attention_params(), 7168.0 * 1536 + 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512 +
                                              512.0 * 128 * 256 + 128.0 * 128 * 7168);
  EXPECT_DOUBLE_EQ(ds.attention_params(), 187107328.0);
  EXPECT_DOUBLE_EQ(test::scenario_from(kBase).model.expert_params(), 2.0 * 1024 * 4096);
}
