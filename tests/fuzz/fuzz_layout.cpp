// libFuzzer harness of the parallel layout, run end to end (issue 45: vp > 1 with pp = 1 passed
// `validate` and crashed `run`). The input bytes choose a small scenario field by field (cluster
// shape, a small MoE, the training, every layout size and switch, the software's schedules and
// routing) and it is validated and then run for one iteration: it must run, or end in an
// InputError or InfeasibleError; a crash, a sanitizer report or any other exception is a bug.
// Sizes stay small (at most 32 GPUs, 8 layers, sequences of 512) so that a run takes milliseconds.
#include <cstddef>
#include <cstdint>
#include <fuzzer/FuzzedDataProvider.h>
#include <string>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/sweep/validation.hpp"

namespace {

using moesim::schema::Json;

template <typename T>
T pick(FuzzedDataProvider& in, const std::vector<T>& choices) {
  return choices[in.ConsumeIntegralInRange<std::size_t>(0, choices.size() - 1)];
}

Json scenario(FuzzedDataProvider& in) {
  const int nodes = pick<int>(in, {1, 2, 4});
  const int per_node = pick<int>(in, {1, 2, 4, 8});
  const int heads = pick<int>(in, {1, 2, 4, 8});
  const int experts = pick<int>(in, {1, 2, 4, 8, 16});
  Json model = {{"layers", in.ConsumeIntegralInRange<int>(1, 8)},
                {"dense_layers", in.ConsumeIntegralInRange<int>(0, 1)},
                {"hidden", pick<int>(in, {64, 128, 256})},
                {"ffn_hidden", pick<int>(in, {64, 256})},
                {"experts", experts},
                {"top_k", in.ConsumeIntegralInRange<int>(1, std::min(experts, 4))},
                {"heads", heads},
                {"kv_heads", pick<int>(in, {1, heads})},
                {"vocab", pick<int>(in, {0, 1024})}};
  if (in.ConsumeBool()) model["shared_experts"] = 1;
  if (in.ConsumeBool()) model["mtp_layers"] = 1;
  Json training = {{"sequence_length", pick<int>(in, {128, 256, 512})},
                   {"micro_batch_size", in.ConsumeIntegralInRange<int>(1, 4)},
                   {"microbatches", in.ConsumeIntegralInRange<int>(1, 8)},
                   {"iterations", 1},
                   {"dtype", pick<std::string>(in, {"bf16", "fp8"})},
                   {"recompute", pick<std::string>(in, {"none", "selective", "full"})}};
  Json parallel = {{"tp", pick<int>(in, {1, 2, 4})},  {"cp", pick<int>(in, {1, 2})},  {"pp", pick<int>(in, {1, 2, 4})},
                   {"vp", pick<int>(in, {1, 2, 3})},  {"ep", pick<int>(in, {1, 2, 4, 8})}, {"etp", pick<int>(in, {1, 2})},
                   {"sequence_parallel", in.ConsumeBool()},
                   {"sharding", pick<std::string>(in, {"none", "distributed_optimizer", "fsdp"})}};
  if (in.ConsumeBool()) parallel["schedule"] = pick<std::string>(in, {"1f1b", "interleaved_1f1b", "gpipe"});
  if (in.ConsumeBool()) parallel["first_stage_layers"] = in.ConsumeIntegralInRange<int>(0, 4);
  if (in.ConsumeBool()) parallel["last_stage_layers"] = in.ConsumeIntegralInRange<int>(0, 4);
  if (in.ConsumeBool()) parallel["ep_backend"] = pick<std::string>(in, {"nccl", "deepep", "hybridep"});
  Json doc = {{"name", "fuzz"},
              {"cluster",
               {{"gpu", "h100-sxm5-80gb"},
                {"levels",
                 {{{"name", "node"}, {"count", nodes}, {"bandwidth", "400Gbps"}, {"latency", "5us"}},
                  {{"name", "gpu"}, {"count", per_node}, {"bandwidth", "450GB/s"}, {"latency", "2us"}}}}}},
              {"model", model},
              {"training", training},
              {"parallel", parallel},
              {"routing", {{"sampling", pick<std::string>(in, {"expected", "sampled"})}}},
              {"strategy", {{"name", "ep"}}}};
  if (in.ConsumeBool()) {
    Json software = {{"preset", pick<std::string>(in, {"pytorch-eager", "megatron-bridge-26.04"})}};
    if (in.ConsumeBool()) software["ep_overlap"] = true;
    if (in.ConsumeBool()) software["delay_wgrad"] = true;
    if (in.ConsumeBool()) software["cuda_graphs"] = pick<Json>(in, {Json::array({"attn"}), Json::array({"full_iteration"})});
    doc["software"] = software;
  }
  return doc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const moesim::scenario::Loader loader(moesim::scenario::Loader::default_data_dir());
  FuzzedDataProvider in(data, size);
  const Json doc = scenario(in);
  try {
    moesim::sweep::validate(loader, doc, "fuzz.json");
    moesim::simulation::Simulation sim(loader.build(loader.resolve(doc, "fuzz.json"), "fuzz.json"));
    sim.check();
    sim.run();
  } catch (const moesim::InputError&) {
  } catch (const moesim::InfeasibleError&) {
  }
  return 0;
}
