// The optimizer step on the GPU or on the host (ZeRO-Offload), by hand: the copies over PCIe, the
// CPU step the host's GPUs share, the memory it moves to the host, and the host memory check.
#include <gtest/gtest.h>

#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

// The ep tests' small scenario on 4 H100 (host link 64 GB/s, 2 us) with one host for the 4 GPUs:
// one PCIe switch with a 128 GB/s, 1 us uplink, a CPU optimizer of 45 GB/s; costed by the analytic
// network model (each copy alone).
schema::Json on_host(bool host, const char* memory = "2TiB") {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["cluster"]["hosts"] = {{"memory", memory}, {"switch_uplink", {{"bandwidth", "128GB/s"}, {"latency", "1us"}}}};
  doc["network"] = {{"model", "analytic"}};
  doc["training"]["optimizer"] = host ? "host" : "gpu";
  return doc;
}

std::unique_ptr<simulation::Simulation> run(const schema::Json& doc) {
  auto sim = std::make_unique<simulation::Simulation>(test::scenario_from(doc.dump()));
  sim->check();
  sim->run();
  return sim;
}

}  // namespace

TEST(OptimizerOnHost, AddsTheCopiesAndTheHostsSharedCpuStepAfterTheGradients) {
  // P parameters per GPU (replicated ones and the GPU's expert per layer). On the GPU the step is
  // P·32 B through 3.35 TB/s of HBM. On the host, after the same last gradient collective: the
  // gradients go down, P·2 B over the 64 GB/s PCIe link (the 128 GB/s uplink is faster) after
  // 2 + 1 us; the 4 GPUs' CPU steps run at once on one CPU, each at 1/4 of 45 GB/s: 4·P·32 B / 45
  // GB/s; the weights come back as the gradients went. The iteration grows by exactly that.
  const auto gpu = run(on_host(false));
  const auto host = run(on_host(true));
  const auto& m = gpu->scenario().model;
  const double p = m.replicated_params() + m.moe_layers() * (m.experts / 4) * m.expert_params();
  const compute::ComputeModel cm(gpu->scenario().kinds[0], gpu->scenario().compute);
  const Time gpu_step = cm.optimizer_step(p);
  const Time copy = 3 * kMicrosecond + static_cast<Time>(std::llround(p * 2 * 1e12 / 64e9));
  // Four steps of the same length on one CPU at 1/4 each (the engine rounds a rescheduled end up
  // to the next picosecond: 1 ps at most).
  const Time cpu_step = 4 * compute::host_optimizer_step(p, 32, 45e9);
  EXPECT_NEAR(static_cast<double>(host->metrics().iteration_time[0] - gpu->metrics().iteration_time[0]),
              static_cast<double>(2 * copy + cpu_step - gpu_step), 1.0);
  // The copies and the CPU step are reported as such, not as GPU compute.
  const auto r = host->results_json();
  EXPECT_DOUBLE_EQ(r["network"]["collectives"]["host_copy"]["bytes"].get<double>(), 4 * 2 * p * 2);
  EXPECT_EQ(r["network"]["collectives"]["host_copy"]["count"].get<double>(), 8);
  EXPECT_NEAR(r["busy_ms"]["host_compute"]["mean"].get<double>(), time_to_ms(cpu_step), 2e-9);
  EXPECT_EQ(r["busy_ms"].count("optimizer"), 0u);
  EXPECT_NEAR(r["busy_ms"]["host_copy"]["mean"].get<double>(), time_to_ms(2 * copy), 1e-9);
  EXPECT_EQ(r["busy_ms"]["all_to_all"], gpu->results_json()["busy_ms"]["all_to_all"]);
  EXPECT_DOUBLE_EQ(host->results().metrics.gpus[0].compute, gpu->results().metrics.gpus[0].compute - gpu_step);
}

TEST(OptimizerOnHost, MovesTheOptimizerStateToHostMemoryAndChecksIt) {
  // The Adam state (12 B per parameter in bf16) and a copy of the gradients (2 B) leave the GPU
  // for its host: 14·P per GPU, 4 GPUs on the host.
  const auto gpu = run(on_host(false));
  const auto host = run(on_host(true));
  const auto& g = gpu->memory()[0];
  const auto& h = host->memory()[0];
  EXPECT_DOUBLE_EQ(h.optimizer, 0);
  EXPECT_DOUBLE_EQ(h.host, g.optimizer + g.gradients);
  EXPECT_DOUBLE_EQ(h.total(), g.total() - g.optimizer);
  EXPECT_DOUBLE_EQ(host->results_json()["memory"]["hosts"]["peak_bytes"].get<double>(), 4 * h.host);
  // 10 MiB of host memory holds less than the 4·14·P ≈ 59 MB: refused, naming the host.
  simulation::Simulation small(test::scenario_from(on_host(true, "10MiB").dump(), "small-host.json"));
  try {
    small.check();
    FAIL() << "not refused";
  } catch (const InfeasibleError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit in host memory: host 0 (GPUs 0-3)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("small-host.json"), std::string::npos);
  }
}

TEST(OptimizerOnHost, NeedsHostsInTheCluster) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["training"]["optimizer"] = "host";
  try {
    test::scenario_from(doc.dump(), "no-hosts.json");
    FAIL() << "not refused";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "$.training.optimizer");
    EXPECT_NE(e.fix().find("\"hosts\""), std::string::npos);
  }
}

TEST(OptimizerStates, PrecisionAwareStatesSetTheStateTheGradientsAndTheStepsBytes) {
  // The small scenario in BF16 on 4 H100, P parameters per GPU. Default: FP32 master weights and
  // moments, 12 B per parameter; gradients in BF16, 2 B; the step streams 32 B per parameter.
  // DeepSeek-V3's recipe (Megatron-Bridge deepseek_v3.py: use_precision_aware_optimizer with BF16
  // exp_avg, exp_avg_sq and main_grads): 4 + 2 + 2 = 8 B of state, 2 B of gradients, and a step
  // of 2 · 8 + 2 + 4 = 22 B. FP32 main gradients: 4 B of gradients and a step of 2 · 12 + 4 + 4 =
  // 32 B, the default's; FP8 moments 1 B each.
  const auto footprint = [](const schema::Json& states) {
    auto doc = schema::Json::parse(test::kSmallEp);
    doc["network"] = {{"model", "analytic"}};
    if (!states.is_null()) doc["training"]["optimizer_states"] = states;
    auto sim = std::make_unique<simulation::Simulation>(test::scenario_from(doc.dump()));
    sim->check();
    sim->run();
    return sim;
  };
  const auto plain = footprint(nullptr);
  const auto& m = plain->scenario().model;
  const double p = m.replicated_params() + m.moe_layers() * (m.experts / 4) * m.expert_params();
  const auto memory = [](const simulation::Simulation& s) { return s.results_json()["memory"]["breakdown_bytes"]; };
  EXPECT_DOUBLE_EQ(memory(*plain)["optimizer"].get<double>(), 12 * p);
  EXPECT_DOUBLE_EQ(memory(*plain)["gradients"].get<double>(), 2 * p);
  EXPECT_EQ(plain->scenario().compute.optimizer_bytes_per_param, 32);

  const auto dsv3 = footprint({{"exp_avg", "bf16"}, {"exp_avg_sq", "bf16"}, {"main_grads", "bf16"}});
  EXPECT_DOUBLE_EQ(memory(*dsv3)["optimizer"].get<double>(), 8 * p);
  EXPECT_DOUBLE_EQ(memory(*dsv3)["gradients"].get<double>(), 2 * p);
  EXPECT_EQ(dsv3->scenario().compute.optimizer_bytes_per_param, 22);
  // The step on the GPU is memory-bound over those bytes: the iteration is shorter by the
  // difference, 10 B per parameter through HBM (the kernel's fixed cost is the same).
  const compute::ComputeModel cm(plain->scenario().kinds[0], plain->scenario().compute);
  const compute::ComputeModel cm22(dsv3->scenario().kinds[0], dsv3->scenario().compute);
  EXPECT_EQ(plain->metrics().iteration_time[0] - dsv3->metrics().iteration_time[0], cm.optimizer_step(p) - cm22.optimizer_step(p));
  EXPECT_NEAR(time_to_seconds(cm.optimizer_step(p) - cm22.optimizer_step(p)), 10 * p / (0.814 * 3.35e12), 1e-11);

  const auto fp32_grads = footprint({{"main_grads", "fp32"}});
  EXPECT_DOUBLE_EQ(memory(*fp32_grads)["optimizer"].get<double>(), 12 * p);
  EXPECT_DOUBLE_EQ(memory(*fp32_grads)["gradients"].get<double>(), 4 * p);
  EXPECT_EQ(fp32_grads->scenario().compute.optimizer_bytes_per_param, 32);
  const auto fp8 = footprint({{"exp_avg", "fp8"}, {"exp_avg_sq", "fp8"}, {"main_params", "fp16"}});
  EXPECT_DOUBLE_EQ(memory(*fp8)["optimizer"].get<double>(), 4 * p);
}
