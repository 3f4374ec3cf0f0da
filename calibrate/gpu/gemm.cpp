// moesim-calibrate-gemm: times cuBLASLt matrix multiplications C[M×N] = A[M×K]·B[K×N] (row-major,
// fp32 accumulation) in bf16, fp16, fp32 and tf32 over the GeMM shapes of MoE training (expert FFN
// up/down projections, attention projections, the gate) and a generic M, N, K grid.
//
// Method: cuBLASLt API reference (docs.nvidia.com/cuda/cublas, "cuBLASLt API"): one heuristic
// algorithm per shape (cublasLtMatmulAlgoGetHeuristic, 32 MiB workspace by default, as PyTorch
// gives cuBLASLt on Hopper), warm-up launches, then each timed repetition between its own pair
// of CUDA events on one stream; the median is reported with min, max and the achieved
// TFLOP/s = 2·M·N·K / median. Buffers hold pseudo-random values, never zeros (power draw, and so
// clocks, depend on the data).
#include <algorithm>
#include <cmath>
#include <cublasLt.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "cuda_util.hpp"
#include "kernels.hpp"
#include "lt_matmul.hpp"
#include "options.hpp"
#include "provenance.hpp"

using namespace moesim::calibrate;

namespace {

constexpr const char* kTool = "moesim-calibrate-gemm";
constexpr const char* kUsage = R"(usage: moesim-calibrate-gemm [options]

Times cuBLASLt GeMMs C[M×N] = A[M×K]·B[K×N] (row-major, fp32 accumulation) and writes measurements
JSON for `moesim calibrate fit`. Shapes (--grid):
  moe      tokens T in {128, ..., 16384} and (H, F) in {(4096, 14336) Mixtral-8x7B, (7168, 2048)
           DeepSeek-V3, (2048, 1408) DeepSeek-V2-Lite}: expert_ffn_up (T, F, H), expert_ffn_down
           (T, H, F), attention_qkv (T, 3H, H), attention_out (T, H, H), gate (T, E, H) for E in
           {8, 64, 256}
  generic  every M, N, K in {256, 512, ..., 16384}
  all      both (a generic shape equal to a MoE one is timed once, under its MoE tag)

examples:
  moesim-calibrate-gemm --dry-run
  moesim-calibrate-gemm --dtypes bf16 --grid moe --out gemm.json)";

struct Shape {
  std::int64_t m, n, k;
  std::string tag;
};

struct MoeModel {
  std::int64_t hidden, ffn;
  const char* name;
};

const std::vector<MoeModel> kModels = {{4096, 14336, "Mixtral-8x7B"}, {7168, 2048, "DeepSeek-V3"}, {2048, 1408, "DeepSeek-V2-Lite"}};
const std::vector<std::int64_t> kTokens = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};
const std::vector<std::int64_t> kExperts = {8, 64, 256};
const std::vector<std::int64_t> kGeneric = {256, 512, 1024, 2048, 4096, 8192, 16384};

std::vector<Shape> plan_shapes(const std::string& grid, bool quick) {
  std::vector<Shape> shapes;
  if (grid != "generic") {
    const std::vector<std::int64_t> tokens = quick ? std::vector<std::int64_t>{1024} : kTokens;
    const std::size_t models = quick ? 1 : kModels.size();
    for (std::int64_t t : tokens) {
      for (std::size_t i = 0; i < models; ++i) {
        const std::int64_t h = kModels[i].hidden, f = kModels[i].ffn;
        shapes.push_back({t, f, h, "expert_ffn_up"});
        shapes.push_back({t, h, f, "expert_ffn_down"});
        shapes.push_back({t, 3 * h, h, "attention_qkv"});
        shapes.push_back({t, h, h, "attention_out"});
        for (std::int64_t e : kExperts) shapes.push_back({t, e, h, "gate"});
      }
    }
  }
  if (grid != "moe") {
    const std::vector<std::int64_t> sizes = quick ? std::vector<std::int64_t>{1024, 4096} : kGeneric;
    for (std::int64_t m : sizes)
      for (std::int64_t n : sizes)
        for (std::int64_t k : sizes) shapes.push_back({m, n, k, "generic"});
  }
  // One measurement per (M, N, K): the first tag wins.
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
  std::vector<Shape> unique;
  for (Shape& s : shapes)
    if (seen.insert({s.m, s.n, s.k}).second) unique.push_back(std::move(s));
  return unique;
}

struct Plan {
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  std::size_t workspace = 0;
  int device = 0;
  bool quick = false;
};

// Largest A, B and C of the plan, in elements.
std::tuple<std::int64_t, std::int64_t, std::int64_t> largest(const std::vector<Shape>& shapes) {
  std::int64_t a = 0, b = 0, c = 0;
  for (const Shape& s : shapes) {
    a = std::max(a, s.m * s.k);
    b = std::max(b, s.k * s.n);
    c = std::max(c, s.m * s.n);
  }
  return {a, b, c};
}

int dry_run(const Plan& plan, const CommonOptions& common) {
  std::string dtypes;
  for (DType t : plan.dtypes) dtypes += std::string(dtypes.empty() ? "" : ", ") + name(t);
  std::cout << fmt::format("{} --dry-run: would time {} shapes x {} dtypes ({}) = {} GeMMs\n", kTool, plan.shapes.size(),
                           plan.dtypes.size(), dtypes, plan.shapes.size() * plan.dtypes.size());
  std::cout << fmt::format("  C[M x N] = A[M x K] * B[K x N], row-major, fp32 accumulation; cuBLASLt heuristic algorithm, "
                           "{} workspace; device {}\n",
                           format_bytes(plan.workspace), plan.device);
  std::cout << fmt::format("  per GeMM: {} warm-up + {} timed runs (cudaEvent pair each), median/min/max in us, TFLOP/s\n",
                           common.warmup, common.reps);
  if (plan.quick) {
    std::cout << "  --quick: MoE shapes of Mixtral-8x7B at T = 1024 only, generic M, N, K in {1024, 4096}\n";
  } else if (plan.shapes.front().tag != "generic") {
    std::string models;
    for (const MoeModel& m : kModels) models += fmt::format("{}{} (H {}, F {})", models.empty() ? "" : ", ", m.name, m.hidden, m.ffn);
    std::cout << fmt::format("  MoE shapes: {}; tokens T in {{{}}}; gate experts E in {{{}}}\n", models,
                             fmt::join(kTokens, ", "), fmt::join(kExperts, ", "));
  }
  const auto [a, b, c] = largest(plan.shapes);
  std::size_t widest = 0;
  for (DType t : plan.dtypes) widest = std::max(widest, element_size(t));
  std::cout << fmt::format("  buffers: A {}, B {}, C {}\n", format_bytes(a * widest), format_bytes(b * widest),
                           format_bytes(c * widest));
  std::map<std::string, int> per_tag;
  for (const Shape& s : plan.shapes) ++per_tag[s.tag];
  std::cout << "  shapes by tag:";
  for (const auto& [tag, count] : per_tag) std::cout << " " << tag << " " << count;
  std::cout << "\n  " << fmt::format("{:<16} {:>6} {:>6} {:>6}", "tag", "M", "N", "K") << "\n";
  for (const Shape& s : plan.shapes) std::cout << "  " << fmt::format("{:<16} {:>6} {:>6} {:>6}", s.tag, s.m, s.n, s.k) << "\n";
  return 0;
}

int measure(const Plan& plan, const CommonOptions& common) {
  Output output(common.out);
  select_device(plan.device, "--device");
  Provenance provenance = local_provenance(plan.device, common.command);
  provenance.cublas = library_version_string(static_cast<long long>(cublasLtGetVersion()));

  const LtHandle handle;
  const Stream stream;
  const DeviceBuffer workspace(plan.workspace);
  EventTimer timer(common.reps);
  const auto [max_a, max_b, max_c] = largest(plan.shapes);
  Json entries = Json::array();
  const std::size_t total = plan.shapes.size() * plan.dtypes.size();
  std::size_t done = 0, skipped = 0;
  for (DType dtype : plan.dtypes) {
    const std::size_t size = element_size(dtype);
    const DeviceBuffer a(max_a * size), b(max_b * size), c(max_c * size);
    fill_uniform(a.get(), dtype, max_a, 1, 1.0f, stream.get());
    fill_uniform(b.get(), dtype, max_b, 2, 1.0f, stream.get());
    check_cuda(cudaMemsetAsync(c.get(), 0, max_c * size, stream.get()), "cudaMemsetAsync");
    for (const Shape& s : plan.shapes) {
      ++done;
      const LtMatmul matmul(handle, dtype, MatmulShape{s.m, s.n, s.k}, 1.0f, plan.workspace);
      if (!matmul.ok()) {
        ++skipped;
        std::cerr << fmt::format("{}: skipped {} {}x{}x{}: {}\n", kTool, name(dtype), s.m, s.n, s.k, matmul.why_not());
        continue;
      }
      for (int i = 0; i < common.warmup; ++i) matmul.run(a.get(), b.get(), c.get(), workspace.get(), stream.get());
      // Without it, a GeMM shorter than its launch leaves the GPU idle at start(i), and the pair
      // times the host's cublasLtMatmul call too (about 50 us per repetition is ample to enqueue).
      hold_stream(std::min(50.0 * common.reps, 100000.0), stream.get());
      for (int i = 0; i < common.reps; ++i) {
        timer.start(i, stream.get());
        matmul.run(a.get(), b.get(), c.get(), workspace.get(), stream.get());
        timer.stop(i, stream.get());
      }
      const Stats t = summarize(timer.elapsed_us());
      const double tflops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) / t.median / 1e6;
      entries.push_back({{"dtype", name(dtype)}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"time", round_us(t.median)},
                         {"min", round_us(t.min)}, {"max", round_us(t.max)}, {"tflops", std::round(tflops * 100) / 100},
                         {"tag", s.tag}});
      if (!common.quiet)
        std::cerr << fmt::format("[{}/{}] {} {}x{}x{} {}: {:.2f} us, {:.1f} TFLOP/s\n", done, total, name(dtype), s.m, s.n,
                                 s.k, s.tag, t.median, tflops);
    }
  }
  Json document = measurement_document(kTool, provenance, common);
  document["gemm"] = std::move(entries);
  output.write(document);
  if (skipped) std::cerr << fmt::format("{}: {} of {} GeMMs had no cuBLASLt algorithm and are not in the output\n", kTool, skipped, total);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run_tool(kTool, [&] {
    CommandLine cli(kTool, kUsage);
    std::string dtypes, grid, workspace;
    cli.options().add_options()
        ("dtypes", boost::program_options::value(&dtypes)->default_value("bf16,fp16,fp32"),
         "comma list of bf16, fp16, fp32, tf32 (fp32 data on tensor cores)")
        ("grid", boost::program_options::value(&grid)->default_value("all"), "moe, generic or all")
        ("quick", "a small subset (T = 1024 for Mixtral-8x7B; M, N, K in {1024, 4096}) for smoke runs")
        ("workspace", boost::program_options::value(&workspace)->default_value("32MiB"), "cuBLASLt workspace limit")
        ("device", boost::program_options::value<int>()->default_value(0), "CUDA device to time on");
    if (!cli.parse(argc, argv)) return 0;
    if (grid != "moe" && grid != "generic" && grid != "all")
      throw UsageError(fmt::format("--grid \"{}\": use moe, generic or all", grid));
    Plan plan;
    plan.dtypes = parse_dtypes(dtypes, {DType::bf16, DType::fp16, DType::fp32, DType::tf32}, "--dtypes");
    plan.quick = cli.values().count("quick") > 0;
    plan.shapes = plan_shapes(grid, plan.quick);
    plan.workspace = parse_bytes(workspace, "--workspace");
    plan.device = cli.values()["device"].as<int>();
    if (plan.device < 0) throw UsageError(fmt::format("--device {}: must be 0 or more", plan.device));
    return cli.common().dry_run ? dry_run(plan, cli.common()) : measure(plan, cli.common());
  });
}
