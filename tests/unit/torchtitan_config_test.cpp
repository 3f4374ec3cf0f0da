// `moesim import torchtitan`: a torchtitan training configuration as a scenario's sections
// (sim/scenario/torchtitan_config.hpp), on real files of pytorch/torchtitan (tests/data/torchtitan,
// SOURCES.md) and on the keys' defaults (torchtitan/config/job_config.py).
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/core/error.hpp"
#include "sim/scenario/torchtitan_config.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

scenario::TorchtitanImport import(const std::string& text) { return scenario::from_torchtitan_toml(text, "cfg.toml"); }

scenario::TorchtitanImport file(const std::string& name) { return import(test::repository_file("tests/data/torchtitan/" + name)); }

bool listed(const scenario::TorchtitanImport& i, const std::string& key) {
  return std::find(i.not_imported.begin(), i.not_imported.end(), key) != i.not_imported.end();
}

std::string refused_at(const std::string& text) {
  try {
    import(text);
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "cfg.toml");
    return e.path();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

const std::string kQwen = "[model]\nname = \"qwen3\"\nflavor = \"30B-A3B\"\n";

}  // namespace

TEST(TorchtitanConfig, Qwen3MoeFileGivesItsModelLayoutTrainingAndSoftware) {
  // qwen3_30b_a3b.toml: local batch 2, global 128, seq 4096, EP 2, FSDP over every GPU left
  // (data_parallel_shard_degree -1), full activation checkpointing, no converter (BF16).
  const auto i = file("qwen3_30b_a3b.toml");
  EXPECT_EQ(i.model, schema::Json({{"preset", "qwen3-30b-a3b"}}));
  EXPECT_EQ(i.parallel, schema::Json({{"tp", 1}, {"pp", 1}, {"cp", 1}, {"ep", 2}, {"etp", 1}, {"sharding", "fsdp"}}));
  EXPECT_EQ(i.training, schema::Json({{"sequence_length", 4096}, {"micro_batch_size", 2}, {"global_batch_size", 128},
                                      {"dtype", "bf16"}, {"recompute", "full"}}));
  EXPECT_EQ(i.software, schema::Json({{"preset", "torchtitan"}}));
  EXPECT_EQ(i.layers_per_stage, 0);
  // What has no moesim key is listed, what was mapped is not.
  for (const char* key : {"checkpoint.interval", "optimizer.lr", "training.steps", "compile.enable", "metrics.log_freq"})
    EXPECT_TRUE(listed(i, key)) << key;
  for (const char* key : {"parallelism.expert_parallel_degree", "training.local_batch_size", "model.flavor", "training.max_norm"})
    EXPECT_FALSE(listed(i, key)) << key;
}

TEST(TorchtitanConfig, DeepSeekV3FileRecomputesTheRoutedExperts) {
  // deepseek_v3_671b.toml: selective checkpointing by the op policy, which saves the GeMMs on its
  // list and not torch._grouped_mm (the torchtitan preset's routed_experts); no global batch: each
  // rank's local batch of 4 once a step; its Interleaved1F1B has no effect without pipeline stages.
  const auto i = file("deepseek_v3_671b.toml");
  EXPECT_EQ(i.model, schema::Json({{"preset", "deepseek-v3"}}));
  EXPECT_EQ(i.training.at("recompute"), "selective");
  EXPECT_EQ(i.training.at("recompute_modules"), schema::Json::array({"routed_experts"}));
  EXPECT_EQ(i.training.at("micro_batch_size"), 4);
  EXPECT_EQ(i.training.at("microbatches"), 1);
  EXPECT_FALSE(i.training.contains("global_batch_size"));
  EXPECT_EQ(i.parallel.at("ep"), 1);
  EXPECT_FALSE(i.parallel.contains("schedule"));
  EXPECT_FALSE(listed(i, "parallelism.pipeline_parallel_schedule"));
}

TEST(TorchtitanConfig, DefaultsConvertersAndPipelines) {
  // Nothing but the model: torchtitan's defaults, local batch 8 of 2048 tokens, FSDP, selective
  // checkpointing every 2nd layer (not modelled: refused, see below), so mode none here.
  auto i = import(kQwen + "[activation_checkpoint]\nmode = \"none\"\n");
  EXPECT_EQ(i.training, schema::Json({{"sequence_length", 2048}, {"micro_batch_size", 8}, {"microbatches", 1}, {"dtype", "bf16"}}));
  EXPECT_EQ(i.parallel.at("sharding"), "fsdp");
  // A shard degree of 1 is no sharding; TP is sequence-parallel.
  i = import(kQwen + "[parallelism]\ndata_parallel_shard_degree = 1\ntensor_parallel_degree = 2\n[activation_checkpoint]\nmode = \"full\"\n");
  EXPECT_EQ(i.parallel.at("sharding"), "none");
  EXPECT_EQ(i.parallel.at("sequence_parallel"), true);
  // Converters: Float8 linears train in FP8, MX ones in MXFP8.
  EXPECT_EQ(import(kQwen + "converters = [\"float8\"]\n[activation_checkpoint]\nmode = \"full\"\n").training.at("dtype"), "fp8");
  EXPECT_EQ(import(kQwen + "converters = [\"mx\"]\n[activation_checkpoint]\nmode = \"full\"\n").training.at("dtype"), "mxfp8");
  // Pipeline stages: the local batch of 8 in microbatches of 2, the schedule by its moesim name,
  // Interleaved1F1B's layers per virtual stage handed on (the importer divides the model's layers).
  i = import(kQwen + "[training]\nlocal_batch_size = 8\n[parallelism]\npipeline_parallel_degree = 2\n"
                     "pipeline_parallel_microbatch_size = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
                     "pipeline_parallel_layers_per_stage = 6\n[activation_checkpoint]\nmode = \"full\"\n");
  EXPECT_EQ(i.training.at("micro_batch_size"), 2);
  EXPECT_EQ(i.training.at("microbatches"), 4);
  EXPECT_EQ(i.parallel.at("schedule"), "interleaved_1f1b");
  EXPECT_EQ(i.layers_per_stage, 6);
}

TEST(TorchtitanConfig, RefusesWhatItCannotExpressNamingTheKey) {
  const std::string full = "[activation_checkpoint]\nmode = \"full\"\n";
  EXPECT_EQ(refused_at("[model]\nname = \"deepseek_v3\"\nflavor = \"16B\"\n"), "model.flavor");
  EXPECT_EQ(refused_at(kQwen), "activation_checkpoint.selective_ac_option");  // the default: every 2nd layer whole
  EXPECT_EQ(refused_at(kQwen + "[optimizer]\nname = \"Muon\"\n" + full), "optimizer.name");
  EXPECT_EQ(refused_at(kQwen + "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"ZBVZeroBubble\"\n" + full),
            "parallelism.pipeline_parallel_schedule");
  EXPECT_EQ(refused_at(kQwen + "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n" + full),
            "parallelism.pipeline_parallel_layers_per_stage");
  EXPECT_EQ(refused_at(kQwen + "[training]\nlocal_batch_size = 3\n[parallelism]\npipeline_parallel_degree = 2\n"
                               "pipeline_parallel_microbatch_size = 2\n" + full),
            "parallelism.pipeline_parallel_microbatch_size");
  EXPECT_EQ(refused_at(kQwen + "[parallelism]\ntensor_parallel_degree = 0\n" + full), "parallelism.tensor_parallel_degree");
  EXPECT_EQ(refused_at(kQwen + "[training]\nseq_len = \"long\"\n" + full), "training.seq_len");
  EXPECT_EQ(refused_at("[model\nname = 1"), "line 1");
  // Tables nested deeper than any configuration's: refused at the 17th, not recursed into.
  std::string deep = "a", seventeenth = "a";
  for (int i = 0; i < 20; ++i) deep += ".b";
  for (int i = 0; i < 16; ++i) seventeenth += ".b";
  EXPECT_EQ(refused_at(deep + " = 1\n" + kQwen + full), seventeenth);
}
