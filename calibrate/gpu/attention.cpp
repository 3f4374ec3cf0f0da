// moesim-calibrate-attention: times the forward and the backward pass of scaled-dot-product
// attention, softmax(Q·Kᵀ/√d [+ causal mask])·V, in bf16 and fp16, over sequence lengths, head
// dimensions and masks.
//
// Method: there is no fused kernel here (no cuDNN/FlashAttention), so attention is the unfused
// "math" implementation of PyTorch's scaled_dot_product_attention: strided-batched cuBLASLt GeMMs
// over the batch·heads matrices (lt_matmul.hpp) around row-wise softmax kernels (kernels.cu),
// with the L×L score matrix materialised in the input dtype. Forward: S = Q·Kᵀ/√d, P = softmax(S),
// O = P·V. Backward (P kept from the forward): dV = Pᵀ·dO, dP = dO·Vᵀ,
// dS = P∘(dP − rowsum(dO∘O))/√d, dQ = dS·K, dK = dSᵀ·Q. The causal mask zeroes P above the
// diagonal but the GeMMs stay full, as in the unfused implementation. Each pass of each repetition
// is timed between its own pair of CUDA events; the medians are reported, tagged
// "implementation": "cublas-unfused" so the profile does not pass for FlashAttention.
#include <algorithm>
#include <cmath>
#include <cublasLt.h>
#include <fmt/format.h>
#include <iostream>

#include "cuda_util.hpp"
#include "kernels.hpp"
#include "lt_matmul.hpp"
#include "options.hpp"
#include "provenance.hpp"

using namespace moesim::calibrate;

namespace {

constexpr const char* kTool = "moesim-calibrate-attention";
constexpr const char* kUsage = R"(usage: moesim-calibrate-attention [options]

Times the forward and backward pass of scaled-dot-product attention, unfused (cuBLASLt strided-
batched GeMMs and softmax kernels, the L x L scores in memory; not FlashAttention), and writes
measurements JSON for `moesim calibrate fit`. Q, K, V are [batch * heads, L, d] with
batch = tokens / L, so every sequence length processes the same number of tokens.

examples:
  moesim-calibrate-attention --dry-run
  moesim-calibrate-attention --dtypes bf16 --seq 2048,4096 --out attention.json)";

struct Config {
  DType dtype;
  std::int64_t batch, heads, seq, head_dim;
  bool causal;

  std::int64_t matrices() const { return batch * heads; }
  // Q, K, V, O, dO, dQ, dK, dV, and the scores S (= P) and dP (= dS).
  std::size_t bytes() const {
    return element_size(dtype) * static_cast<std::size_t>(matrices() * seq * (8 * head_dim + 2 * seq));
  }
  // Two GeMMs of 2·L²·d FLOPs per matrix forward (four backward).
  double forward_flops() const { return 4.0 * static_cast<double>(matrices()) * static_cast<double>(seq * seq * head_dim); }
};

struct Plan {
  std::vector<Config> configs;
  std::size_t workspace = 0;
  int device = 0;
};

std::string describe(const Config& c) {
  return fmt::format("{} B={} h={} L={} d={} {}", name(c.dtype), c.batch, c.heads, c.seq, c.head_dim,
                     c.causal ? "causal" : "full");
}

int dry_run(const Plan& plan, const CommonOptions& common) {
  std::cout << fmt::format("{} --dry-run: would time {} attention configurations, forward and backward, "
                           "implementation cublas-unfused (cuBLASLt GeMMs + softmax kernels); device {}\n",
                           kTool, plan.configs.size(), plan.device);
  std::cout << fmt::format("  per pass: {} warm-up + {} timed runs (cudaEvent pair each), median in us; "
                           "cuBLASLt workspace {}\n",
                           common.warmup, common.reps, format_bytes(plan.workspace));
  std::cout << "  " << fmt::format("{:<5} {:>5} {:>5} {:>6} {:>8} {:<6} {:>10}", "dtype", "batch", "heads", "seq", "head_dim", "mask", "memory") << "\n";
  for (const Config& c : plan.configs)
    std::cout << "  " << fmt::format("{:<5} {:>5} {:>5} {:>6} {:>8} {:<6} {:>10}", name(c.dtype), c.batch, c.heads, c.seq,
                                     c.head_dim, c.causal ? "causal" : "full", format_bytes(c.bytes()))
              << "\n";
  return 0;
}

// Times one configuration; false (with a warning) when it does not fit or has no cuBLASLt algorithm.
bool time_config(const Config& c, const Plan& plan, const CommonOptions& common, const LtHandle& handle,
                 const Stream& stream, const DeviceBuffer& workspace, double& forward, double& backward) {
  std::size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  if (c.bytes() > free / 10 * 9) {
    std::cerr << fmt::format("{}: skipped {}: needs {}, {} free\n", kTool, describe(c), format_bytes(c.bytes()),
                             format_bytes(free));
    return false;
  }
  const std::int64_t bh = c.matrices(), L = c.seq, d = c.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Row-major [L, d] per matrix and [L, L] per score matrix, batched over batch·heads.
  const MatmulShape scores{L, L, d, false, true, static_cast<int>(bh), L * d, L * d, L * L};    // Q·Kᵀ, dO·Vᵀ
  const MatmulShape apply{L, d, L, false, false, static_cast<int>(bh), L * L, L * d, L * d};    // P·V, dS·K
  const MatmulShape apply_t{L, d, L, true, false, static_cast<int>(bh), L * L, L * d, L * d};   // Pᵀ·dO, dSᵀ·Q
  const LtMatmul qk(handle, c.dtype, scores, scale, plan.workspace), dp_gemm(handle, c.dtype, scores, 1.0f, plan.workspace);
  const LtMatmul nn(handle, c.dtype, apply, 1.0f, plan.workspace), tn(handle, c.dtype, apply_t, 1.0f, plan.workspace);
  for (const LtMatmul* m : {&qk, &dp_gemm, &nn, &tn}) {
    if (!m->ok()) {
      std::cerr << fmt::format("{}: skipped {}: {}\n", kTool, describe(c), m->why_not());
      return false;
    }
  }
  const std::size_t vec = static_cast<std::size_t>(bh * L * d), mat = static_cast<std::size_t>(bh * L * L);
  const std::size_t size = element_size(c.dtype);
  const DeviceBuffer q(vec * size), k(vec * size), v(vec * size), o(vec * size), d_o(vec * size);
  const DeviceBuffer dq(vec * size), dk(vec * size), dv(vec * size), s(mat * size), dp(mat * size);
  std::uint64_t seed = 1;
  for (const DeviceBuffer* b : {&q, &k, &v, &d_o}) fill_uniform(b->get(), c.dtype, vec, seed++, 1.0f, stream.get());

  void* ws = workspace.get();
  cudaStream_t st = stream.get();
  const auto forward_pass = [&] {
    qk.run(q.get(), k.get(), s.get(), ws, st);
    softmax_forward(s.get(), c.dtype, bh * L, static_cast<int>(L), c.causal, st);
    nn.run(s.get(), v.get(), o.get(), ws, st);
  };
  const auto backward_pass = [&] {
    tn.run(s.get(), d_o.get(), dv.get(), ws, st);
    dp_gemm.run(d_o.get(), v.get(), dp.get(), ws, st);
    softmax_backward(s.get(), dp.get(), o.get(), d_o.get(), c.dtype, bh * L, static_cast<int>(L), static_cast<int>(d), scale, st);
    nn.run(dp.get(), k.get(), dq.get(), ws, st);
    tn.run(dp.get(), q.get(), dk.get(), ws, st);
  };
  for (int i = 0; i < common.warmup; ++i) {
    forward_pass();
    backward_pass();
  }
  EventTimer fwd(common.reps), bwd(common.reps);
  // The host enqueues the timed passes while the GPU waits (kernels.hpp): small configurations
  // would otherwise time launch gaps as well.
  hold_stream(std::min(200.0 * common.reps, 100000.0), st);
  for (int i = 0; i < common.reps; ++i) {
    fwd.start(i, st);
    forward_pass();
    fwd.stop(i, st);
    bwd.start(i, st);
    backward_pass();
    bwd.stop(i, st);
  }
  forward = summarize(fwd.elapsed_us()).median;
  backward = summarize(bwd.elapsed_us()).median;
  return true;
}

int measure(const Plan& plan, const CommonOptions& common) {
  Output output(common.out);
  select_device(plan.device, "--device");
  Provenance provenance = local_provenance(plan.device, common.command);
  provenance.cublas = library_version_string(static_cast<long long>(cublasLtGetVersion()));

  const LtHandle handle;
  const Stream stream;
  const DeviceBuffer workspace(plan.workspace);
  Json entries = Json::array();
  std::size_t done = 0, skipped = 0;
  for (const Config& c : plan.configs) {
    ++done;
    double forward = 0, backward = 0;
    if (!time_config(c, plan, common, handle, stream, workspace, forward, backward)) {
      ++skipped;
      continue;
    }
    entries.push_back({{"dtype", name(c.dtype)}, {"batch", c.batch}, {"heads", c.heads}, {"seq", c.seq},
                       {"head_dim", c.head_dim}, {"causal", c.causal}, {"forward", round_us(forward)},
                       {"backward", round_us(backward)}, {"implementation", "cublas-unfused"}});
    if (!common.quiet)
      std::cerr << fmt::format("[{}/{}] {}: forward {:.1f} us ({:.1f} TFLOP/s), backward {:.1f} us\n", done,
                               plan.configs.size(), describe(c), forward, c.forward_flops() / forward / 1e6, backward);
  }
  Json document = measurement_document(kTool, provenance, common);
  document["attention"] = std::move(entries);
  output.write(document);
  if (skipped)
    std::cerr << fmt::format("{}: {} of {} configurations were skipped and are not in the output\n", kTool, skipped,
                             plan.configs.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  return run_tool(kTool, [&] {
    CommandLine cli(kTool, kUsage);
    std::string dtypes, seqs, head_dims, masks, workspace;
    std::int64_t tokens = 0, heads = 0;
    int device = 0;
    cli.options().add_options()
        ("dtypes", po::value(&dtypes)->default_value("bf16,fp16"), "comma list of bf16, fp16")
        ("seq", po::value(&seqs)->default_value("512,1024,2048,4096,8192"), "sequence lengths L (multiples of 8)")
        ("head-dims", po::value(&head_dims)->default_value("64,128"), "head dimensions d (multiples of 8, at most 512)")
        ("masks", po::value(&masks)->default_value("causal,full"), "causal, full (no mask), or both")
        ("tokens", po::value(&tokens)->default_value(16384), "tokens per configuration: batch = tokens / L (at least 1)")
        ("heads", po::value(&heads)->default_value(16), "attention heads h")
        ("quick", "a small subset (L = 1024, d = 128) for smoke runs")
        ("workspace", po::value(&workspace)->default_value("32MiB"), "cuBLASLt workspace limit")
        ("device", po::value(&device)->default_value(0), "CUDA device to time on");
    if (!cli.parse(argc, argv)) return 0;
    const bool quick = cli.values().count("quick") > 0;
    if (tokens < 1) throw UsageError(fmt::format("--tokens {}: must be 1 or more", tokens));
    if (heads < 1 || heads > 1024) throw UsageError(fmt::format("--heads {}: must be in [1, 1024]", heads));
    if (device < 0) throw UsageError(fmt::format("--device {}: must be 0 or more", device));
    Plan plan;
    plan.workspace = parse_bytes(workspace, "--workspace");
    plan.device = device;
    const std::vector<DType> types = parse_dtypes(dtypes, {DType::bf16, DType::fp16}, "--dtypes");
    const std::vector<std::int64_t> lengths =
        quick && !cli.given("seq") ? std::vector<std::int64_t>{1024} : parse_int_list(seqs, "--seq", 8, 1 << 20);
    const std::vector<std::int64_t> dims =
        quick && !cli.given("head-dims") ? std::vector<std::int64_t>{128} : parse_int_list(head_dims, "--head-dims", 8, 512);
    for (std::int64_t l : lengths)
      if (l % 8) throw UsageError(fmt::format("--seq {}: must be a multiple of 8", l));
    for (std::int64_t d : dims)
      if (d % 8) throw UsageError(fmt::format("--head-dims {}: must be a multiple of 8", d));
    std::vector<bool> causal;
    for (const std::string& m : split_list(masks, "--masks")) {
      if (m != "causal" && m != "full") throw UsageError(fmt::format("--masks: unknown mask \"{}\" (causal or full)", m));
      if (std::find(causal.begin(), causal.end(), m == "causal") == causal.end()) causal.push_back(m == "causal");
    }
    for (DType t : types)
      for (std::int64_t l : lengths)
        for (std::int64_t d : dims)
          for (bool c : causal) {
            const Config config{t, std::max<std::int64_t>(1, tokens / l), heads, l, d, c};
            if (config.matrices() * l > (1ll << 31) - 1 || config.matrices() > (1ll << 31) - 1)
              throw UsageError(fmt::format("--tokens/--heads/--seq: {} has too many softmax rows", describe(config)));
            plan.configs.push_back(config);
          }
    return cli.common().dry_run ? dry_run(plan, cli.common()) : measure(plan, cli.common());
  });
}
