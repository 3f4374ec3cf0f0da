#include "sim/scenario/scenario_schema.hpp"

#include <fmt/format.h>
#include <map>

#include "sim/cluster/fabric.hpp"
#include "sim/core/schema_reference.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/network/collective.hpp"
#include "sim/parallel/layout.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/software/software.hpp"
#include "sim/workload/model_shape.hpp"
#include "sim/workload/popularity_process.hpp"
#include "sim/workload/routing.hpp"

namespace moesim::scenario {

using namespace moesim::schema;

namespace {
// training.recompute_modules' names: workload::RecomputeModule's, and Megatron-Core's "moe" (the
// whole MoE layer), which the loader refuses with its own reason rather than as an unknown name.
std::vector<std::string> recompute_module_choices() {
  std::vector<std::string> names = names_of(workload::kRecomputeModuleNames);
  names.emplace_back("moe");
  return names;
}
}  // namespace

const Options<cluster::MatmulMeasurement>& matmul_options() {
  using T = cluster::MatmulMeasurement;
  static const Options<T> o({
      required_option<T>("flops", &T::flops, flops(), "the best FLOP/s measured, e.g. \"794.5TFLOPS\""),
      required_option<T>("m", &T::m, integer(1), "M of the shape that reached it"),
      required_option<T>("n", &T::n, integer(1), "N of the shape that reached it"),
      required_option<T>("k", &T::k, integer(1), "K of the shape that reached it"),
  });
  return o;
}

const Options<cluster::AttentionMeasurement>& attention_kernel_options() {
  using T = cluster::AttentionMeasurement;
  static const Options<T> o({
      required_option<T>("batch", &T::batch, integer(1), "sequences"),
      required_option<T>("heads", &T::heads, integer(1), "query heads"),
      required_option<T>("seq", &T::seq, integer(1), "sequence length (queries = keys)"),
      required_option<T>("head_dim", &T::head_dim, integer(1), "head size of Q and K"),
      // Absent: head_dim (the loader sets it).
      given_option<T>("head_dim_v", &T::head_dim_v, integer(1), "head size of V and the output (default: head_dim)"),
      required_option<T>("causal", &T::causal, boolean(), "causal mask (else none)"),
      given_option<T>("window", &T::window, integer(1),
                      "keys each query sees (a causal sliding window); absent: all"),
      required_option<T>("forward", &T::forward, time(), "the forward kernel's measured time, e.g. \"0.323ms\""),
      required_option<T>("backward", &T::backward, time(), "the backward kernel's measured time"),
  });
  return o;
}

const Options<cluster::GpuSpec>& gpu_options() {
  using T = cluster::GpuSpec;
  using cluster::Dtype;
  // Per dtype, in the dtype table's order: its peak's help and its matmul measurement's.
  struct DtypeHelp {
    Dtype dtype;
    const char* peak;
    const char* mamf;
  };
  static constexpr DtypeHelp help[] = {
      {Dtype::fp32, "dense FP32 peak", "FP32 measurement"},
      {Dtype::tf32, "dense TF32 tensor-core peak", "TF32 measurement"},
      {Dtype::fp16, "dense FP16 tensor-core peak", "FP16 measurement"},
      {Dtype::bf16, "dense BF16 tensor-core peak", "BF16 measurement"},
      {Dtype::fp8, "dense FP8 tensor-core peak", "FP8 measurement"},
      {Dtype::mxfp8, "dense MXFP8 (block-scaled FP8) tensor-core peak; absent: no MXFP8", "MXFP8 measurement (else FP8's)"},
  };
  // One object of optional per-dtype entries, each filling the dtype's slot of a per-dtype array of
  // the GPU (`option_of(dtype index, name, its help)`).
  const auto per_dtype = [](const auto& option_of) {
    std::vector<Option<T>> options;
    for (const DtypeHelp& h : help) {
      const auto d = static_cast<std::size_t>(h.dtype);
      options.push_back(option_of(d, name_string(cluster::kDtypeNames, h.dtype), h));
    }
    return options;
  };
  static const Options<T> peak(per_dtype([](std::size_t d, std::string name, const DtypeHelp& h) {
    return given_option<T>(std::move(name), [d](T& g) -> double& { return g.peak_flops[d]; }, flops(), h.peak);
  }));
  static const Options<T> mamf(per_dtype([](std::size_t d, std::string name, const DtypeHelp& h) {
    return section_option<T>(std::move(name), [d](T& g) -> cluster::MatmulMeasurement& { return g.mamf[d]; },
                             matmul_options(), h.mamf, Json());
  }));
  static const Options<T> host_link({
      required_option<T>("bandwidth", &T::host_bandwidth, bandwidth(), "per direction, e.g. \"32GB/s\""),
      required_option<T>("latency", &T::host_latency, latency(), "e.g. \"2us\""),
  });
  static const Options<T> sustained_clock({
      required_option<T>("factor", &T::sustained_clock, number(0, 1, true),
                         "the rate a GPU kept busy settles at, over the rate its kernels were measured at in short bursts"),
      required_option<T>("time_constant", &T::sustained_clock_time_constant, time(),
                         "how fast it settles there when busy and recovers when idle, e.g. \"5ms\""),
      declared<T>(optional("source", string(), nullptr, "where the figures come from")),
  });
  static const NodePtr attention_kernels = object({
      required("source", string(), "where the times were measured (kernel library and version, GPU, benchmark)"),
      required("kernels", array_of(attention_kernel_options().node(), 1), "measured BF16 fused attention kernels"),
  });
  static const Options<T> o({
      required_option<T>("name", &T::name, string(), "the vendor's name of the GPU"),
      section_option<T>("peak_flops", itself, peak, "dense peak per dtype, e.g. {\"bf16\": \"989TFLOPS\"}").required(),
      required_option<T>("hbm_bandwidth", &T::hbm_bytes_per_second, bandwidth(), "memory bandwidth, e.g. \"3.35TB/s\""),
      required_option<T>("memory", &T::memory_bytes, bytes(), "memory capacity, e.g. \"80GiB\""),
      given_option<T>("sms", &T::sms, integer(1), "streaming multiprocessors (enables GeMM wave quantization)"),
      option<T>("gemm_efficiency", &T::gemm_efficiency, number(0, 1, true),
                "GeMM ceiling: fraction of peak a tile's main loop sustains, for dtypes without a \"mamf\" measurement"),
      section_option<T>("mamf", itself, mamf,
                        "published maximum achievable matmul FLOPS per dtype and the shape that reached them, e.g. "
                        "{\"bf16\": {\"flops\": \"794.5TFLOPS\", \"m\": 2048, \"n\": 2048, \"k\": 13312}}: the GeMM "
                        "ceiling is derived from them",
                        Json()),
      declared<T>(optional("attention_kernels", attention_kernels, nullptr,
                           "measured BF16 fused attention kernels, forward and backward: the attention FLOP/s by sequence "
                           "length, head size and window where no calibration profile gives them (else the efficiencies "
                           "below)")),
      option<T>("attention_efficiency", &T::attention_efficiency, number(0, 1, true),
                "fraction of peak the fused attention forward reaches"),
      given_option<T>("attention_backward_efficiency", &T::attention_backward_efficiency, number(0, 1, true),
                      "fraction of peak its backward reaches (default: 0.80 × the forward's, as measured on an H100)"),
      option<T>("flash_attention", &T::flash_attention, boolean(), "whether FlashAttention runs on this GPU"),
      section_option<T>("host_link", itself, host_link, "the PCIe link to the host", Json()),
      option<T>("host_launch_factor", &T::host_launch_factor, number(0, std::nullopt, true),
                "host time to issue a kernel on this GPU's system relative to a DGX H100's Xeon Platinum 8480C "
                "(software host costs are given for that host)"),
      section_option<T>("sustained_clock", itself, sustained_clock,
                        "the GPU's clock under sustained load, simulated in a run with a software section (a power limit "
                        "pulls a busy GPU's clock down; absent: its kernels keep their measured rates)",
                        Json()),
      given_option<T>("nvlink", &T::nvlink, bandwidth(),
                      "the GPU's NVLink bandwidth per direction (datasheet total / 2), e.g. \"450GB/s\"; used to catch an "
                      "NVLink level written in Gbps"),
      given_option<T>("source", &T::source, string(), "where the figures come from"),
  });
  return o;
}

NodePtr gpu_schema() { return gpu_options().node(); }

const Options<cluster::LinkTech>& link_options() {
  using P = cluster::ProtocolCost;
  static const Options<P> protocol({
      required_option<P>("base_latency", &P::base, latency(), "once per collective, e.g. \"8.4us\""),
      required_option<P>("hop_latency", &P::hop, latency(), "per step of the algorithm over the link, e.g. \"3.4us\""),
      required_option<P>("efficiency", &P::efficiency, number(0, 1, true), "fraction of the line rate the protocol moves"),
  });
  using T = cluster::LinkTech;
  const auto of = [](cluster::Protocol p) { return [p](T& t) -> P& { return t.protocols[static_cast<std::size_t>(p)]; }; };
  static const Options<T> o({
      // The link's name is its key in links.json (LinkTech::name); this is its description.
      declared<T>(required("name", string(), "what the link is, e.g. \"NVLink 4 through NVSwitch 3\"")),
      section_option<T>("ll", of(cluster::Protocol::LL), protocol, "NCCL's LL protocol over the link").required(),
      section_option<T>("simple", of(cluster::Protocol::Simple), protocol, "NCCL's Simple protocol over the link").required(),
      declared<T>(optional("nvls", nvls_options().node(), nullptr, "NVLink SHARP all-reduce in the NVSwitch (NVSwitch 3 and later)")),
      option<T>("exchange_factor", &T::exchange_factor, number(0, 2, true),
                "what an all-to-all moves relative to the protocols' efficiency (many peers at once; above 1 where "
                "an all-to-all keeps more of the line rate busy than a ring; times each efficiency at most 1)"),
      required_option<T>("source", &T::source, string(), "where the figures come from"),
  });
  return o;
}

const Options<cluster::InSwitchReduction>& nvls_options() {
  using T = cluster::InSwitchReduction;
  static const Options<T> o({
      required_option<T>("latency", &T::latency, latency(), "once per all-reduce"),
      required_option<T>("efficiency", &T::efficiency, number(0, 1, true), "fraction of the line rate"),
      option<T>("tree_efficiency", &T::tree_efficiency, number(0, 1, true),
                "NCCL's NVLS-tree: the efficiency's share left when the all-reduce spans two NVLink domains (racks, "
                "nodes), pipelined with a tree of their NICs"),
      option<T>("beyond_two_domains", &T::beyond_two_domains, number(0, 1, true),
                "NVLS-tree beyond two domains: tree_efficiency scaled again by this (NCCL's perChMaxNVLSTreeBws, more "
                "than two nodes against two)"),
  });
  return o;
}

NodePtr link_schema() { return link_options().node(); }

const Options<cluster::Level>& level_options() {
  using D = cluster::Domains;
  static const Options<D> domains({
      required_option<D>("size", &D::size, integer(1), "consecutive workers of the level that share its fabric"),
      required_option<D>("bandwidth", &D::bandwidth, bandwidth(),
                         "each GPU's own link between domains, per direction, e.g. \"64GB/s\" for PCIe Gen5 x16"),
      required_option<D>("latency", &D::latency, latency(), "one-way GPU-to-GPU latency between domains"),
      declared<D>(optional("link", string(), nullptr, "the link technology between domains (topologies/links.json)")),
  });
  using T = cluster::Level;
  static const Options<T> o({
      required_option<T>("name", &T::name, string(), "a name for the level, e.g. \"dc\", \"node\", \"gpu\""),
      required_option<T>("count", &T::count, integer(1, 1 << 20), "workers of this level inside one worker of the level above"),
      enum_option<T>("fabric", &T::fabric, cluster::kFabricNames, "how the level's workers are joined"),
      required_option<T>("bandwidth", &T::bandwidth, bandwidth(), "per-worker link bandwidth, e.g. \"10Gbps\" or \"450GB/s\""),
      required_option<T>("latency", &T::latency, latency(), "one-way GPU-to-GPU latency across this level, e.g. \"5us\""),
      option<T>("oversubscription", &T::oversubscription, number(1), "switch oversubscription ratio (>= 1)"),
      declared<T>(optional("link", string(), nullptr,
                           "the link technology from topologies/links.json (e.g. \"nvlink4\", \"ib-ndr\"): NCCL's "
                           "protocols and efficiencies over it; without it the level's links are ideal (line rate, its "
                           "latency per step)")),
      option<T>("ports", &T::ports, integer(1),
                "switch levels: links each worker's bandwidth is spread over (a node's NICs: 8 for 8 x 400Gbps with "
                "\"bandwidth\": \"3200Gbps\"); the worker's GPUs spread evenly over them"),
      // Absent: the level is one domain (Domains' size 0).
      section_option<T>("domains", &T::domains, domains,
                        "NVLink domains smaller than the level: workers of different domains reach each other through "
                        "each GPU's own link",
                        nullptr),
  });
  return o;
}

const Options<cluster::HostSpec>& host_options() {
  using T = cluster::HostSpec;
  static const Options<T> uplink({
      required_option<T>("bandwidth", &T::switch_uplink, bandwidth(), "per direction, e.g. \"64GB/s\""),
      required_option<T>("latency", &T::switch_latency, latency(), "e.g. \"1us\""),
  });
  static const Options<T> o({
      // Absent: the GPUs of one worker of the level above the GPUs (the loader writes it in).
      given_option<T>("gpus", &T::gpus, integer(1),
                      "consecutive GPUs per host (default: the GPUs of one worker of the level above the GPUs)"),
      required_option<T>("memory", &T::memory_bytes, bytes(), "host memory, e.g. \"2TiB\""),
      unit_option<T>("optimizer_bandwidth", &T::optimizer_bytes_per_second, bandwidth(), "45GB/s",
                     "bytes per second the CPU optimizer streams (Adam: 32 B per parameter); default from DeepSpeed's "
                     "CPU-Adam stepping an 11.6B-parameter GPT-2 in 8.2 s (deepspeedai/DeepSpeed PR #735)"),
      option<T>("pcie_switches", &T::pcie_switches, integer(1), "PCIe switches per host; its GPUs (and NICs) spread evenly over them"),
      section_option<T>("switch_uplink", itself, uplink, "each PCIe switch's link to the CPU").required(),
      given_option<T>("source", &T::source, string(), "where the figures come from"),
  });
  return o;
}

NodePtr cluster_schema() {
  static const NodePtr level = level_options().node();
  static const NodePtr group = object({
      required("gpu", string(), "a GPU kind from topologies/gpus.json or the scenario's \"gpus\""),
      required("count", integer(1), "how many consecutive GPUs are of this kind"),
  });
  static const NodePtr hosts = host_options().node();
  static const NodePtr s = object({
      optional("name", string(), nullptr, "a name for the cluster"),
      optional("source", string(), nullptr, "where the description comes from"),
      optional("gpu", string(), nullptr, "the GPU kind of every GPU (or use \"groups\")"),
      optional("groups", array_of(group, 1), nullptr, "GPU kinds of consecutive GPUs, for heterogeneous clusters"),
      required("levels", array_of(level, 1), "levels from coarse to fine, the last one joining GPUs"),
      optional("hosts", hosts, nullptr,
               "the hosts: CPU memory, the CPU optimizer's rate, PCIe switches joining GPUs and NICs to the CPU "
               "(each GPU through its kind's host_link)"),
  });
  return s;
}

const Options<workload::ModelShape>& model_options() {
  using L = workload::LatentAttention;
  static const Options<L> mla({
      option<L>("q_lora_rank", &L::q_lora_rank, integer(0, 1 << 20),
                "rank of the query latent (0: queries straight from the hidden state)"),
      required_option<L>("kv_lora_rank", &L::kv_lora_rank, integer(1, 1 << 20), "rank of the key/value latent"),
      required_option<L>("qk_nope_head_dim", &L::qk_nope_head_dim, integer(1, 1 << 16),
                         "per-head query/key width without rotary embedding"),
      required_option<L>("qk_rope_head_dim", &L::qk_rope_head_dim, integer(0, 1 << 16),
                         "per-head query/key width with rotary embedding (the key's shared by heads)"),
      required_option<L>("v_head_dim", &L::v_head_dim, integer(1, 1 << 16), "per-head value width"),
  });
  using T = workload::ModelShape;
  static const Options<T> window({
      required_option<T>("tokens", &T::sliding_window, integer(1, 1 << 24), "the keys each query attends to, itself included"),
      option<T>("every", &T::window_period, integer(1, 65536),
                "which layers: those whose index is a multiple of it (2: layers 0, 2, 4, ...; 1: all)"),
  });
  static const Options<T> o({
      given_option<T>("name", &T::name, string(), "model name"),
      declared<T>(optional("source", string(), nullptr, "where the shape comes from")),
      required_option<T>("layers", &T::layers, integer(1, 65536), "transformer blocks")
          .also({"num_layers", "num_hidden_layers", "n_layers"}),
      option<T>("dense_layers", &T::dense_layers, integer(0, 65536), "leading blocks with a dense FFN instead of MoE"),
      option<T>("mtp_layers", &T::mtp_layers, integer(0, 64),
                "multi-token prediction modules after the last block (DeepSeek-V3 section 2.2, Megatron-Core's "
                "mtp_num_layers): each an MoE block with the embedding of the next tokens, two norms and a 2H x H "
                "projection before it and a second pass of the LM head and loss after it, on the last pipeline "
                "stage (strategy ep; not counted in layers)"),
      required_option<T>("hidden", &T::hidden, integer(1, 1 << 20), "hidden size H").also({"hidden_size", "dim"}),
      required_option<T>("ffn_hidden", &T::ffn_hidden, integer(1, 1 << 22), "expert FFN size M")
          .also({"ffn_hidden_size", "intermediate_size", "moe_ffn_hidden_size", "moe_intermediate_size"}),
      // Absent: ffn_hidden (the loader writes it in before reading).
      given_option<T>("dense_ffn_hidden", &T::dense_ffn_hidden, integer(1, 1 << 22),
                      "FFN size of dense blocks (default: ffn_hidden)"),
      required_option<T>("experts", &T::experts, integer(1, 1 << 16), "routed experts per MoE layer E")
          .also({"num_experts", "num_moe_experts", "num_local_experts", "n_routed_experts"}),
      required_option<T>("top_k", &T::top_k, integer(1, 1 << 16), "experts per token")
          .also({"moe_router_topk", "num_experts_per_tok", "topk"}),
      option<T>("shared_experts", &T::shared_experts, integer(0, 1 << 10), "shared experts every token visits"),
      enum_option<T>("expert_kind", &T::expert_kind, workload::kExpertKindNames,
                     "2-GeMM MLP, 3-GeMM SwiGLU, or 3-GeMM clamped quick-GeGLU (GPT-OSS) experts"),
      required_option<T>("heads", &T::heads, integer(1, 1 << 16), "attention heads").also({"num_attention_heads", "n_heads"}),
      // Absent: heads (the loader writes it in before reading).
      given_option<T>("kv_heads", &T::kv_heads, integer(1, 1 << 16), "key/value heads (default: heads)")
          .also({"num_query_groups", "num_key_value_heads", "n_kv_heads"}),
      given_option<T>("head_dim", &T::explicit_head_dim, integer(1, 1 << 16),
                      "width of one attention head (default: hidden / heads)")
          .also({"kv_channels"}),
      section_option<T>("mla", &T::mla, mla,
                        "multi-head latent attention (DeepSeek-V2/V3) instead of multi-head attention; kv_heads = heads",
                        Json()),
      section_option<T>("sliding_window", itself, window,
                        "sliding-window (banded causal) attention, e.g. GPT-OSS's {\"tokens\": 128, \"every\": 2}; "
                        "absent: full attention in every layer",
                        Json()),
      option<T>("linear_bias", &T::linear_bias, boolean(),
                "the linear layers carry biases (GPT-OSS; Megatron-Core's add_bias_linear): the routed experts' output "
                "bias is added per expert in fp32 after fc2 (Megatron-Core's TEGroupedMLP._apply_bias), the others in "
                "their GeMMs' epilogues"),
      option<T>("rotary", &T::rotary, boolean(),
                "rotary position embeddings applied to the queries and keys after their projection in every layer "
                "(Mixtral, Qwen3, GPT-OSS, DeepSeek-V3's rope dims); false: learned or absolute positions (GPT, BERT)"),
      option<T>("qk_norm", &T::qk_norm, boolean(),
                "an RMSNorm over each query and key head before the attention (Qwen3's q_norm/k_norm, Megatron-Core's "
                "qk_layernorm)"),
      option<T>("vocab", &T::vocab, integer(0, 1 << 26), "vocabulary size (embedding and LM head)")
          .also({"vocab_size", "padded_vocab_size"}),
      option<T>("attention", &T::attention, boolean(),
                "false: a bare MoE layer without attention and norms, as the layer benchmarks of Parm Table III"),
  });
  return o;
}

NodePtr model_schema() { return model_options().node(); }

const Options<software::Software>& software_options() {
  using H = software::HostCosts;
  static const Options<H> host({
      unit_option<H>("launch", &H::launch, time(), "0us",
                     "host time per kernel launched eagerly in a forward, its recomputation and the optimizer step (the "
                     "framework's Python thread, PyTorch's dispatcher and the driver), on a DGX H100's Xeon host; the GPU "
                     "kind's host_launch_factor scales it"),
      unit_option<H>("backward_launch", &H::backward_launch, time(), "0us",
                     "host time per kernel launched eagerly in a backward (autograd's thread)"),
      unit_option<H>("graph_launch", &H::graph_launch, time(), "0us", "host time per CUDA graph replay, whatever it holds"),
      unit_option<H>("sync", &H::sync, time(), "0us",
                     "after a device-to-host read returns (a blocking EP dispatch's split sizes), how long the host waits "
                     "before it launches anything more"),
  });
  using T = software::Software;
  static const Options<T> o({
      given_option<T>("name", &T::name, string(), "what trains the model, e.g. \"Megatron-Bridge 26.04 (NeMo container)\""),
      declared<T>(optional("source", string(), nullptr, "the recipe files and measurements the values come from")),
      section_option<T>("host", &T::host, host, "what driving each GPU costs its host's launch thread (0: not modelled)"),
      declared<T>(optional("cuda_graphs", array_of(enumeration(names_of(software::kGraphScopeNames))), Json::array(),
                           "Megatron-Core's cuda_graph_scope: the modules captured in a CUDA graph per layer, microbatch "
                           "and direction (attn, moe_router, moe_preprocess, moe, mlp), or full_iteration (the whole "
                           "forward-backward as one graph); empty: every kernel launched eagerly")),
      option<T>("router_kernels", &T::router_kernels, integer(1, 100000),
                "kernels the router launches per MoE layer and microbatch in a forward (Megatron-Core: 72, 31 with "
                "moe_router_fusion; moesim's own model: the router GeMM and the top-k)"),
      option<T>("ep_overlap", &T::ep_overlap, boolean(),
                "Megatron-Core's overlap_moe_expert_parallel_comm: the steady state runs one microbatch's forward and "
                "another's backward together, layer by layer, each one's EP all-to-alls beside the other's compute "
                "(strategy ep; with one pipeline stage a second microbatch's forward starts before the first's "
                "backward)"),
      option<T>("delay_wgrad", &T::delay_wgrad, boolean(),
                "Megatron-Core's delay_wgrad_compute (needs ep_overlap): the experts' backward computes the data "
                "gradients first, so that the all-to-all back leaves with them, and the weight gradients beside it"),
      option<T>("shared_expert_overlap", &T::shared_expert_overlap, boolean(),
                "Megatron-Core's moe_shared_expert_overlap: the shared experts run beside the dispatch all-to-all on "
                "a side stream; false (Megatron-Core's default, and its presets'): before the router, on the compute "
                "stream, with nothing beside them"),
      enum_option<T>("grouped_gemm", &T::grouped_gemm, compute::kGroupedGemmNames,
                     "how the local experts' GeMMs run: one grouped kernel at cuBLAS's rate (moesim's idealised kernel), a "
                     "GeMM kernel per expert (Transformer Engine's GroupedLinear over cuBLAS), or PyTorch's "
                     "torch._grouped_mm (its preparation kernel and one CUTLASS grouped kernel: PyTorch's tile for the "
                     "shape, no split-K, 0.80 of cuBLAS's ceiling as measured)"),
      enum_option<T>("permute", &T::permute, compute::kPermuteNames,
                     "the kernels that permute token copies into expert order and un-permute and sum them: fused "
                     "(Transformer Engine's moe_permute/moe_unpermute, Megatron-Core's moe_permute_fusion), megatron "
                     "(Megatron-Core's unfused PyTorch path: argsort of the routing map, index_select, probabilities "
                     "multiplied, scatter_add) or torchtitan (argsort of the expert ids, a row gather; outputs scaled in "
                     "fp32 and summed by a sort-based deterministic scatter_add)"),
      option<T>("router_fusion", &T::fused_router, boolean(),
                "the router's softmax and top-k as one fused kernel (Megatron-Core's moe_router_fusion); false: "
                "torch.topk after the softmax, at its measured rate (eager PyTorch, torchtitan)"),
      option<T>("rope_fusion", &T::fused_rope, boolean(),
                "the rotary embedding as one kernel a tensor (Megatron-Core's apply_rope_fusion, Transformer Engine's "
                "fused_rope); false: torchtitan's eager CosSinRoPE in fp32, seven kernels a tensor"),
      option<T>("activation_fusion", &T::fused_activation, boolean(),
                "the gated experts' activation as one kernel (Megatron-Core's bias_activation_fusion); false: SiLU "
                "and the product as two eager PyTorch kernels (torchtitan)"),
      option<T>("dglu_dbias_slowdown", &T::dglu_dbias_slowdown, number(1),
                "for a model with linear biases whose experts run as one grouped kernel (grouped_gemm grouped): "
                "the time of the fused dGLU backward kernel (fc2's data gradient and the activation's backward) "
                "with fc1's bias gradient in its epilogue over the same kernel without it; 1: no cost (a "
                "library release's measured ratio, e.g. cudnn-frontend 1.24-1.25 under CUTLASS DSL 4.5: 9.78)"),
      enum_option<T>("cross_entropy", &T::cross_entropy, compute::kCrossEntropyNames,
                     "the loss's kernels: te (Transformer Engine's fused cross entropy, Megatron-Core's "
                     "cross_entropy_loss_fusion with cross_entropy_fusion_impl te), megatron (Megatron-Core's unfused "
                     "vocab_parallel_cross_entropy in fp32) or pytorch (F.cross_entropy over an fp32 copy, torchtitan)"),
      enum_option<T>("optimizer", &T::optimizer, compute::kOptimizerKernelNames,
                     "the optimizer step's kernels: fused (one pass of Adam over its state, moesim's idealised step), "
                     "megatron (Megatron-Core's distributed optimizer: the gradient norm, Transformer Engine's FusedAdam, "
                     "the master weights copied into the 16-bit weights, the whole gradient buffer zeroed) or torch "
                     "(clip_grad_norm_'s norm and scale, then AdamW(fused=True) over fp32 weights; torchtitan)"),
  });
  return o;
}

NodePtr software_schema() { return software_options().node(); }

namespace {

// A dtype, one of `dtypes`, filling a member with its bytes per value; its default (absent: none,
// the member's initializer meaning "not given") is checked to be the member's initializer.
template <class T>
Option<T> dtype_bytes_option(std::string key, double T::*member, std::initializer_list<cluster::Dtype> dtypes,
                             std::optional<cluster::Dtype> default_dtype, std::string help) {
  const auto bytes = [](const std::string& name) { return cluster::dtype_bytes(read_name(cluster::kDtypeNames, name)); };
  Json def;
  if (default_dtype) {
    def = name_string(cluster::kDtypeNames, *default_dtype);
    if (bytes(def.get<std::string>()) != T{}.*member)
      invariant_failed("option \"" + key + "\": its default " + def.dump() + " is not the member's initializer");
  }
  return Option<T>{Field{std::move(key), enumeration(names_of(cluster::kDtypeNames, dtypes)), false, std::move(def),
                         std::move(help), {}},
                   [member, bytes](const Json& v, T& out) { out.*member = bytes(v.get<std::string>()); }};
}

}  // namespace

const Options<workload::TrainingConfig>& training_options() {
  using T = workload::TrainingConfig;
  // The optimizer's state dtypes: some of the training dtypes (Megatron-Core's precision-aware
  // optimizer takes these).
  using cluster::Dtype;
  using S = workload::OptimizerStates;
  const auto moments = {Dtype::fp32, Dtype::bf16, Dtype::fp16, Dtype::fp8};
  static const Options<S> states({
      dtype_bytes_option<S>("main_params", &S::main_params, {Dtype::fp32, Dtype::bf16, Dtype::fp16}, Dtype::fp32,
                            "the master copy of the weights (16-bit training)"),
      dtype_bytes_option<S>("exp_avg", &S::exp_avg, moments, Dtype::fp32, "Adam's first moment"),
      dtype_bytes_option<S>("exp_avg_sq", &S::exp_avg_sq, moments, Dtype::fp32, "Adam's second moment"),
      dtype_bytes_option<S>("main_grads", &S::main_grads, {Dtype::fp32, Dtype::bf16}, std::nullopt,
                            "the main gradients accumulated over the microbatches (default: the training's dtype)"),
  });
  // Written: the optimizer keeps the state it names (OptimizerStates::given).
  static const Option<T> given_states = [] {
    auto o = section_option<T>("optimizer_states", &T::optimizer_states, states,
                               "Megatron-Core's precision-aware optimizer (use_precision_aware_optimizer with "
                               "main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype, main_grads_dtype): the dtypes the "
                               "optimizer keeps its state in; absent: FP32 master weights and moments",
                               Json());
    o.read = [read = o.read](const Json& v, T& out) {
      read(v, out);
      out.optimizer_states.given = true;
    };
    return o;
  }();
  static const Options<T> o({
      required_option<T>("sequence_length", &T::sequence_length, integer(1, 1 << 24), "tokens per sequence")
          .also({"seq_length", "seq_len"}),
      option<T>("micro_batch_size", &T::micro_batch_size, integer(1, 1 << 16), "sequences per GPU per microbatch"),
      option<T>("microbatches", &T::microbatches, integer(1, 1 << 16), "gradient-accumulation microbatches per iteration"),
      declared<T>(optional("global_batch_size", integer(1), nullptr,
                           "sequences per iteration over all data-parallel ranks; sets microbatches = global_batch_size / "
                           "(micro_batch_size x dp)")),
      option<T>("iterations", &T::iterations, integer(1, 65535), "training iterations to simulate"),
      enum_option<T>("dtype", &T::dtype, cluster::kDtypeNames, "training data type"),
      declared<T>(optional("fp8_scaling", enumeration(names_of(workload::kFp8ScalingNames)),
                           name_string(workload::kFp8ScalingNames, workload::Fp8Scaling::Delayed),
                           "how FP8 (dtype fp8) tensors get their scale: delayed (from the amax history of earlier "
                           "iterations, Transformer Engine's DelayedScaling) or current (per-tensor current scaling, "
                           "Megatron-Core's fp8_recipe tensorwise: each cast first reads its tensor for the amax)")),
      option<T>("capacity_factor", &T::capacity_factor, number(0), "expert capacity factor f (0: no capacity limit, no drops)"),
      option<T>("causal", &T::causal, boolean(), "causal attention mask"),
      enum_option<T>("recompute", &T::recompute, workload::kRecomputeNames,
                     "activation recomputation: none; selective (the attention core, Korthikanti et al. 2022; free with "
                     "FlashAttention, which recomputes it anyway); full (each layer's forward, its all-to-alls included, "
                     "run again before its backward; only layer inputs kept)")
          .also({"recompute_granularity"}),
      declared<T>(optional("recompute_modules", array_of(enumeration(recompute_module_choices())), nullptr,
                           "under selective recomputation, the modules recomputed, as Megatron-Core's recompute_modules "
                           "(default [\"core_attn\"]): each frees the activations its forward keeps and runs that forward "
                           "again before its backward; \"moe\" (the whole MoE layer) is not modelled")),
      declared<T>(optional("offload_modules", array_of(enumeration(names_of(workload::kOffloadModuleNames))), nullptr,
                           "fine-grained activation offloading, as Megatron-Core's offload_modules (with "
                           "fine_grained_activation_offloading): each module's saved activations copy to host memory over "
                           "PCIe after its forward and come back before its backward (default: none)")),
      given_states,
      declared<T>(optional("optimizer", enumeration({"gpu", "host"}), "gpu",
                           "where the optimizer state lives and steps: on each GPU, or on its host's CPU (ZeRO-Offload: "
                           "gradients copied over PCIe, CPU Adam, weights copied back; needs cluster.hosts)")),
  });
  return o;
}

const Options<parallel::ParallelConfig>& parallel_options() {
  using T = parallel::ParallelConfig;
  static const Options<T> o({
      option<T>("tp", [](T& c) -> int& { return c.sizes.tp; }, integer(1, 1 << 16),
                "tensor-parallel size: attention heads, projections, dense FFN and LM head split")
          .also({"tensor_model_parallel_size"}),
      option<T>("cp", [](T& c) -> int& { return c.sizes.cp; }, integer(1, 1 << 16),
                "context-parallel size: each sequence split over this many GPUs (ring K/V exchange)")
          .also({"context_parallel_size"}),
      option<T>("pp", [](T& c) -> int& { return c.sizes.pp; }, integer(1, 1 << 16), "pipeline-parallel stages")
          .also({"pipeline_model_parallel_size"}),
      option<T>("vp", [](T& c) -> int& { return c.sizes.vp; }, integer(1, 1 << 10),
                "virtual stages (model chunks) per pipeline rank; above 1 runs the interleaved 1F1B schedule")
          .also({"virtual_pipeline_model_parallel_size"}),
      // 0, not LayoutSizes' 1: a scenario that leaves ep out takes the strategy's size.
      option<T>("ep", [](T& c) -> int& { return c.sizes.ep; }, integer(0, 1 << 16),
                "expert-parallel size of the MoE blocks, folded over the GPUs of a stage (0: the strategy's, e.g. "
                "strategy.ep_size, else every GPU of a stage)")
          .defaults_to(0)
          .also({"expert_model_parallel_size"}),
      option<T>("etp", [](T& c) -> int& { return c.sizes.etp; }, integer(1, 1 << 16),
                "expert tensor-parallel size (each expert's FFN columns split)")
          .also({"expert_tensor_parallel_size"}),
      option<T>("sequence_parallel", &T::sequence_parallel, boolean(),
                "with tp > 1: all-gather / reduce-scatter around the TP blocks with the norms and MoE on s/tp tokens "
                "(Megatron-Core requires it for MoE with TP, so false is refused with tp > 1)"),
      declared<T>(optional("schedule", enumeration(names_of(parallel::kPipelineScheduleNames)), nullptr,
                           "pipeline schedule (default: interleaved_1f1b when vp > 1, else 1f1b); dualpipev: DeepSeek's "
                           "DualPipe cut in half (deepseek-ai/DualPipe dualpipev.py), vp 2 in a V, each forward of one "
                           "chunk written with a backward of the other, at least 2 x pp microbatches")),
      enum_option<T>("sharding", &T::sharding, parallel::kShardingNames,
                     "none: parameters, gradients and optimizer state replicated over dp (gradients all-reduced); "
                     "distributed_optimizer: Megatron-Core's distributed optimizer / ZeRO-1 (gradients reduce-scattered, "
                     "optimizer state split over dp, and over edp for experts; parameters all-gathered before each "
                     "layer's first forward)"),
      given_option<T>("first_stage_layers", &T::first_stage_layers, integer(0, 65536),
                      "layers of the first (virtual) pipeline stage; the rest split evenly (Megatron's "
                      "decoder_first_pipeline_num_layers)")
          .also({"num_layers_in_first_pipeline_stage", "decoder_first_pipeline_num_layers"}),
      given_option<T>("last_stage_layers", &T::last_stage_layers, integer(0, 65536),
                      "layers of the last (virtual) pipeline stage (Megatron's decoder_last_pipeline_num_layers)")
          .also({"num_layers_in_last_pipeline_stage", "decoder_last_pipeline_num_layers"}),
      declared<T>(optional("ep_backend", enumeration(names_of(parallel::kEpBackendNames)), "nccl",
                           "the MoE blocks' dispatch/combine: nccl (all-to-all with separate permute and un-permute "
                           "kernels), deepep or hybridep (fused dispatch+permute and un-permute+combine, tokens "
                           "de-duplicated per rank, kernels holding their SMs, an all-to-all buffer and permuted buffers "
                           "in memory)")),
      declared<T>(optional("ep_non_blocking", boolean(), false,
                           "hybridep only: no device-to-host sync; the permuted buffer is sized by ep_capacity_factor and "
                           "rows beyond it are dropped")),
      declared<T>(optional("ep_capacity_factor", number(0, 1, true), nullptr,
                           "with ep_non_blocking: the permuted buffer is roundup(N x EP x min(K, local experts) x this) "
                           "rows (Megatron's moe_expert_capacity_factor, in (0, 1])")),
      declared<T>(optional("ep_sms", integer(1, 1024), nullptr,
                           "SMs each fused dispatch and combine kernel holds (default: 16 for hybridep, 20 for deepep)")),
      declared<T>(optional("ep_host_sync", time(), nullptr,
                           "how long the host waits after the device-to-host read of a blocking dispatch (nccl, deepep, "
                           "blocking hybridep) returns, in the forward and its recomputation, before it launches what "
                           "follows (default: the software's host.sync)")),
  });
  return o;
}

const Options<workload::RoutingConfig>& routing_options() {
  using P = workload::PopularityProcessParams;
  static const Options<P> process({
      option<P>("spread", &P::spread, number(0), "long-run gate logits: spread x the standard normal quantiles (the static skew)"),
      option<P>("volatility", &P::volatility, number(0), "standard deviation of a logit's step per iteration"),
      option<P>("reversion", &P::reversion, number(0, 1, true), "share of a logit's gap to its long-run level closed per iteration"),
      option<P>("spike_probability", &P::spike_probability, number(0, 1), "chance per expert and iteration that its logit jumps"),
      option<P>("spike_size", &P::spike_size, number(0), "logit a spike adds"),
  });
  using T = workload::RoutingConfig;
  static const Options<T> o({
      enum_option<T>("kind", &T::kind, workload::kRoutingKindNames,
                     "token routing: uniform, skewed (Zipf), a popularity process that moves every iteration (adaptive "
                     "expert replication, Table 1), or a trace of a real run's gate counts"),
      section_option<T>("process", &T::process, process,
                        "the popularity process (kind process; defaults fitted to the adaptive expert replication paper's "
                        "Table 1)"),
      declared<T>(optional("trace", string(), nullptr,
                           "kind trace: a CSV with columns iteration,layer,expert,tokens (found in the data folder, else "
                           "next to the scenario)")),
      option<T>("zipf_exponent", &T::zipf_exponent, number(0), "Zipf exponent s of expert popularity (zipf only)"),
      option<T>("resample_each_iteration", &T::resample_each_iteration, boolean(), "draw a new hot-expert ranking every iteration"),
      enum_option<T>("sampling", &T::sampling, workload::kRoutingSamplingNames,
                     "per-source multinomial draws at every scale (sampled), or every source sending its expected shares "
                     "(expected); auto is sampled (older scenarios)"),
      option<T>("repeat_microbatches", &T::repeat_microbatches, boolean(),
                "every microbatch of an iteration routes as its first does (sampled: one draw and one matrix per layer, "
                "reused; the routing cost grows with layers, not microbatches)"),
  });
  return o;
}

const Options<Scenario>& network_options() {
  using T = Scenario;
  static const Options<T> o({
      option<T>("model", &T::network_model, enumeration({"flow", "analytic"}),
                "communication model: analytic α-β, or flow (links shared max-min fairly: contention)"),
      enum_option<T>("all_reduce", &T::all_reduce, network::kAlgorithmNames,
                     "gradient all-reduce algorithm: auto (as NCCL's tuner: the cheapest of ring, hierarchical and NVLS); "
                     "ring; hierarchical (reduce-scatter inside nodes, all-reduce across, all-gather inside, pipelined; "
                     "NVLS inside nodes whose links have it); tree (as hierarchical, with NCCL-like trees across nodes: "
                     "2*ceil(log2 n) latency steps); nvls (NVLink SHARP inside one NVSwitch, else ring); direct"),
  });
  return o;
}

const Options<compute::ComputeOptions>& compute_options() {
  using T = compute::ComputeOptions;
  static const Options<T> o({
      option<T>("launch_overhead", &T::launch_overhead, time(),
                "fixed cost of every kernel (default: 5.3us for modelled GeMM and attention kernels, 2.34us for "
                "memory-bound ones, none added to a calibration profile's measured times)"),
      option<T>("backward_factor", &T::backward_factor, number(0, std::nullopt, true),
                "backward compute / forward compute of every kernel (absent: 2, and the experts' grouped GeMMs "
                "costed by the shapes of their data and weight gradients)"),
      option<T>("gemm_efficiency", &T::gemm_efficiency, number(0, 1, true), "override every GPU's GeMM ceiling"),
      option<T>("attention_efficiency", &T::attention_efficiency, number(0, 1, true), "override every GPU's attention efficiency"),
  });
  return o;
}

NodePtr scenario_schema() {
  static const NodePtr training = training_options().node();
  static const NodePtr parallel = parallel_options().node();
  static const NodePtr routing = routing_options().node();
  static const NodePtr network = network_options().node();
  static const NodePtr compute = compute_options().node();
  // An axis has exactly one of "path" and "paths" and, with "paths", values that are arrays of one
  // entry per path: the DSL has no "one of two shapes" node, so sweep::parse_axes checks those.
  static const NodePtr axis = object({
      optional("path", string(), nullptr, "the scenario value to vary, e.g. \"cluster.levels[0].bandwidth\""),
      optional("paths", array_of(string(), 1), nullptr,
               "scenario values that move together (a zipped axis), e.g. [\"cluster.levels[0].count\", \"model.experts\"]"),
      required("values", array_of(any(), 1),
               "the values it takes; with \"paths\", arrays of one value per path, e.g. [[2, 16], [4, 32]]"),
  });
  static const NodePtr sweep = object({
      required("axes", array_of(axis, 1), "grid axes; the first varies slowest; a zipped axis is one dimension"),
  });
  static const NodePtr s = object({
      required("name", string(), "a name for the scenario (default output folder out/NAME)"),
      optional("description", string(), nullptr, "what the scenario shows"),
      optional("seed", integer(0, 9007199254740992.0), 1, "seed of every random stream (up to 2^53)"),
      optional("gpus", map_of(gpu_schema()), nullptr, "extra GPU kinds, added to topologies/gpus.json"),
      required("cluster", cluster_schema(), "the cluster, or {\"preset\": \"NAME\"} from topologies/"),
      required("model", model_schema(), "the MoE model, or {\"preset\": \"NAME\"} from models/"),
      required("training", training, "sequence length, batch, microbatches, dtype"),
      optional("parallel", parallel, Json::object(),
               "the parallel layout: tp, cp, pp (with vp), ep and etp folded over the GPUs in Megatron-Core's rank "
               "order; dp is what is left"),
      optional("routing", routing, Json::object(), "token routing"),
      required("strategy", any(), "the parallel strategy, e.g. {\"name\": \"ep\"}"),
      optional("network", network, Json::object(), "communication model"),
      optional("compute", compute, Json::object(), "compute model"),
      optional("software", software_schema(), Json::object(),
               "the software that trains the model (host launches, CUDA graphs, kernel backends), or {\"preset\": "
               "\"NAME\"} from software/; without it the host is not modelled"),
      optional("sweep", sweep, nullptr, "parameter grid for `moesim sweep`"),
      optional("calibration", string(), nullptr,
               "a calibration profile, e.g. \"calibrations/parm-testbed-a.json\" (found in the data folder, "
               "else next to the scenario)"),
  });
  return s;
}

Json scenario_json_schema() {
  Json out = Json::object();
  out["$schema"] = "https://json-schema.org/draft/2020-12/schema";
  out["title"] = "moesim scenario";
  out["description"] =
      "A moesim scenario (docs/scenario.md). Generated from moesim's declared schema by `moesim schema`; "
      "`moesim validate` checks what a schema cannot (rules across keys, the bounds of unit values).";
  Json body = to_json_schema(*scenario_schema());
  for (auto& [key, p] : body.at("properties").items()) {
    if (key == "cluster" || key == "model" || key == "software") {
      // A preset section: written whole, named ("NAME"), or a preset with overrides merged on top.
      Json whole = p;
      whole.erase("description");
      whole.erase("default");
      Json named = Json::object();
      named["anyOf"] = Json::array(
          {whole, Json{{"type", "string"}, {"description", "a preset's name (`moesim presets`)"}},
           Json{{"type", "object"},
                {"required", Json::array({"preset"})},
                {"properties", Json{{"preset", Json{{"type", "string"}, {"description", "a preset's name (`moesim presets`)"}}}}},
                {"description", "a preset, its keys overridden by the others (a JSON merge patch, RFC 7396)"}}});
      named["description"] = p.at("description");
      if (p.contains("default")) named["default"] = p.at("default");
      p = std::move(named);
    } else if (key == "strategy") {
      Json one_of = Json::array();
      for (const auto& info : strategies::registry()) {
        Json o = to_json_schema(*info.options);
        o["description"] = info.description;
        one_of.push_back(std::move(o));
      }
      p["oneOf"] = std::move(one_of);
    }
  }
  for (auto& [key, v] : body.items()) out[key] = std::move(v);
  return out;
}

std::string scenario_reference_markdown() {
  std::string out =
      "# Scenario reference, key by key\n\n"
      "Generated by `moesim schema --markdown` from the options as moesim declares them "
      "(`sim/scenario/scenario_schema.cpp`, each strategy's folder); [scenario.md](scenario.md) explains the "
      "sections, the presets and the rules across keys. A default in backquotes is written into "
      "`scenario.effective.json`; \"—\" has none (the key stays absent unless written); \"also\" lists other "
      "frameworks' names for a key, which moesim refuses with the key they mean. Times, bandwidths, sizes and "
      "FLOP/s carry their unit (\"5us\", \"400Gbps\", \"80GiB\", \"989TFLOPS\"). A section written "
      "`{\"preset\": \"NAME\", ...}` (cluster, model, software) takes the preset's keys first.\n\n"
      "## The scenario\n\n";
  out += schema::markdown_reference(*scenario_schema(), "");
  out += "## Strategies\n\n`strategy` is one of these objects, named by its `name`.\n\n";
  for (const auto& info : strategies::registry())
    out += schema::markdown_reference(*info.options, fmt::format("strategy ({})", info.name));
  return out;
}

namespace {
void collect_synonyms(const Node& n, std::map<std::string, std::string>& out) {
  for (const Field& f : n.fields) {
    for (const auto& name : f.synonyms) out.emplace(name, f.key);
    if (f.node) collect_synonyms(*f.node, out);
  }
  if (n.items) collect_synonyms(*n.items, out);
}
}  // namespace

const std::string* moesim_name_of(const std::string& foreign) {
  static const std::map<std::string, std::string> names = [] {
    std::map<std::string, std::string> m;
    collect_synonyms(*scenario_schema(), m);
    return m;
  }();
  const auto it = names.find(foreign);
  return it == names.end() ? nullptr : &it->second;
}

}  // namespace moesim::scenario
