#include "sim/scenario/scenario.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <map>
#include <cstdlib>
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/scenario/plausibility.hpp"
#include "sim/scenario/scenario_schema.hpp"

namespace moesim::scenario {

namespace fs = std::filesystem;
using schema::Json;

std::uint64_t Scenario::gpu_count() const {
  std::uint64_t n = 1;
  for (const auto& l : levels) n *= l.count;
  return n;
}

fs::path Loader::default_data_dir() {
  if (const char* env = std::getenv("MOESIM_DATA"); env && *env) return env;
  // An installed moesim (`make install`: PREFIX/bin/moesim) reads the presets installed beside it
  // in PREFIX/share/moesim; a build tree's, the source tree's.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "moesim";
    if (fs::is_directory(installed / "models", ec)) return installed;
  }
  return MOESIM_DATA_DIR;
}

Loader::Loader(fs::path data_dir) : data_dir_(std::move(data_dir)) {}

fs::path Loader::data_file(const std::string& name_text, const std::string& file, const std::string& path,
                           const std::string& what, const std::string& example) const {
  const fs::path name = name_text;
  fs::path found = name.is_absolute() ? name : data_dir_ / name;
  std::error_code ec;
  if (!name.is_absolute() && !fs::exists(found, ec)) found = fs::path(file).parent_path() / name;
  if (fs::exists(found, ec) && !fs::is_regular_file(found, ec))
    throw InputError(file, path, fmt::format("{} is not a file", found.string()),
                     fmt::format("name a {}, e.g. \"{}\"", what, example));
  if (!fs::exists(found, ec))
    throw InputError(file, path, fmt::format("no {} {}", what, name.string()),
                     fmt::format("give a path under {} or next to the scenario (e.g. \"{}\")", data_dir_.string(), example));
  return found;
}

Json Loader::read_json(const fs::path& file) const { return read_json_file(file); }

Json Loader::preset(const std::string& folder, const std::string& name, const std::string& file, const std::string& path) const {
  // A preset is named, not a path: letters, digits, '.', '_' and '-', so it can never leave the
  // data folder nor make a file name the system refuses.
  const bool plain = !name.empty() && name.size() <= 128 && name.front() != '.' &&
                     std::all_of(name.begin(), name.end(), [](char ch) {
                       return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
                     });
  if (!plain)
    throw InputError(file, path, fmt::format("{} is not a preset name", schema::show(Json(name))),
                     "name a preset of `moesim presets` (letters, digits, '.', '_', '-'), or write the section inline as "
                     "an object");
  const fs::path p = data_dir_ / folder / (name + ".json");
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    std::vector<std::string> names;
    if (fs::is_directory(data_dir_ / folder, ec))
      for (const auto& e : fs::directory_iterator(data_dir_ / folder, ec))
        if (e.path().extension() == ".json" && e.path().stem() != "gpus" && e.path().stem() != "links") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    throw InputError(file, path, fmt::format("no preset \"{}\" in {}", name, (data_dir_ / folder).string()),
                     fmt::format("use one of: {} (see `moesim presets`)", fmt::join(names, ", ")));
  }
  return read_json(p);
}

Json Loader::catalogue(const char* file, const char* key, const schema::NodePtr& entry, std::optional<Json>& cache,
                       const std::function<void(const std::string&, const Json&, const std::string&)>& check) const {
  const std::lock_guard lock(cache_mu_);
  if (cache) return *cache;
  const fs::path p = data_dir_ / "topologies" / file;
  const Json doc = read_json(p);
  if (!doc.contains(key) || !doc.at(key).is_object())
    throw InputError(p.string(), fmt::format("$.{}", key), fmt::format("missing the \"{}\" object", key), "see docs/presets.md");
  Json entries = schema::validate(schema::map_of(entry), doc.at(key), p.string(), fmt::format("$.{}", key));
  if (check)
    for (auto it = entries.begin(); it != entries.end(); ++it) check(it.key(), it.value(), p.string());
  cache = std::move(entries);
  return *cache;
}

Json Loader::gpu_catalogue() const { return catalogue("gpus.json", "gpus", gpu_schema(), catalogue_); }

Json Loader::resolve(const Json& raw, const std::string& file) const {
  if (!raw.is_object()) throw InputError(file, "", "a scenario must be a JSON object", "write { \"name\": ..., ... }");
  Json out = raw;
  const auto expand = [&](const char* key, const char* folder, const schema::NodePtr& section) {
    if (!out.contains(key)) return;
    Json v = out.at(key);
    if (v.is_string()) v = Json{{"preset", v}};
    if (!v.is_object() || !v.contains("preset")) return;
    const std::string path = fmt::format("$.{}.preset", key);
    if (!v.at("preset").is_string())
      throw InputError(file, path, "a preset is named by a string", "write \"preset\": \"NAME\"");
    const std::string name = v.at("preset").get<std::string>();
    const fs::path pfile = data_dir_ / folder / (name + ".json");
    Json base = preset(folder, name, file, path);
    schema::validate(section, base, pfile.string(), "$");  // the preset file on its own
    // The scenario's keys override the preset's as a JSON merge patch (RFC 7396): an object merges
    // key by key (`"host": {"sync": "0us"}` keeps the preset's other host costs), anything else
    // replaces, and null removes the preset's value so the default applies.
    v.erase("preset");
    base.merge_patch(v);
    out[key] = base;
  };
  expand("cluster", "topologies", cluster_schema());
  expand("model", "models", model_schema());
  expand("software", "software", software_schema());
  return out;
}

namespace {

// `file`: where the entry was written (gpus.json or the scenario's "gpus"), for its errors.
cluster::GpuSpec gpu_from(const std::string& key, const Json& g, const std::string& file) {
  cluster::GpuSpec s;
  s.key = key;
  gpu_options().read(g, s);
  if (g.contains("attention_kernels")) {
    const Json& a = g.at("attention_kernels");
    s.attention_kernels_source = a.at("source").get<std::string>();
    for (std::size_t i = 0; i < a.at("kernels").size(); ++i) {
      const Json& k = a.at("kernels").at(i);
      const std::string at = fmt::format("$.gpus.{}.attention_kernels.kernels[{}]", key, i);
      cluster::AttentionMeasurement m;
      attention_kernel_options().read(k, m);
      if (!k.contains("head_dim_v")) m.head_dim_v = m.head_dim;
      if (m.forward <= 0 || m.backward <= 0)
        throw InputError(file, at + (m.forward <= 0 ? ".forward" : ".backward"), "a measured kernel takes no time",
                         "give the kernel's measured time, e.g. \"0.323ms\"");
      if (m.window > 0 && (!m.causal || m.window >= m.seq))
        throw InputError(file, at + ".window",
                         m.causal ? fmt::format("a window of {:.0f} keys is no window at sequence length {:.0f}", m.window, m.seq)
                                  : std::string("a sliding window needs the causal mask"),
                         m.causal ? "leave \"window\" out" : "set \"causal\": true, or leave \"window\" out");
      s.attention_kernels.push_back(m);
    }
  }
  return s;
}

// Link technology `key` of `file` (topologies/links.json), whose entry the schema has checked; an
// exchange factor that would have an all-to-all move more than the line rate is refused here.
cluster::LinkTechPtr link_from(const std::string& key, const Json& l, const std::string& file) {
  auto t = std::make_shared<cluster::LinkTech>();
  link_options().read(l, *t);
  t->name = key;
  if (l.contains("nvls")) nvls_options().read(l.at("nvls"), t->nvls.emplace());
  for (cluster::Protocol p : cluster::kAllProtocols)
    if (t->protocol(p).efficiency * t->exchange_factor > 1.0)
      throw InputError(file, fmt::format("$.links.{}.exchange_factor", key),
                       fmt::format("an all-to-all would move {:.3g} of the line rate ({} efficiency {} x exchange_factor {})",
                                   t->protocol(p).efficiency * t->exchange_factor,
                                   cluster::to_string(p), t->protocol(p).efficiency, t->exchange_factor),
                       fmt::format("lower it to at most {:.3g}", 1.0 / t->protocol(p).efficiency));
  return t;
}

std::string nearest(const std::string& name, const Json& map) {
  std::string best;
  long best_d = LONG_MAX;
  for (auto it = map.begin(); it != map.end(); ++it) {
    // A key that contains the name ("h100" in "h100-sxm5-80gb") beats any edit distance.
    const long d = static_cast<long>(schema::edit_distance(name, it.key())) - (it.key().find(name) != std::string::npos ? 1000 : 0);
    if (d < best_d) best_d = d, best = it.key();
  }
  return best;
}

}  // namespace

// Every entry is built once as a scenario would use it (link_from), so a bound the schema cannot
// state (the exchange factor against each protocol's efficiency) holds for the links no scenario
// names too.
Json Loader::link_catalogue() const {
  return catalogue("links.json", "links", link_schema(), links_,
                   [](const std::string& key, const Json& entry, const std::string& file) { link_from(key, entry, file); });
}

namespace {

// The scenario's "parallel" (the layout's sizes, the pipeline's schedule and layer split) and
// training.global_batch_size, which sets the microbatches per data-parallel rank. Checks what the
// model and cluster decide; the expert-parallel size is the strategy's to check.
// `microbatches_given`: whether the scenario wrote training.microbatches (before defaults).
// The MoE blocks' communication backend (parallel.ep_*): torchtitan's options and their rules
// (spec 001.A.5, A.6): non-blocking is HybridEP's alone and needs its capacity factor, which has no
// meaning when blocking.
parallel::EpBackend read_ep_backend(const Json& p, const std::string& file) {
  parallel::EpBackend b;
  const std::string kind = p.at("ep_backend").get<std::string>();
  b.kind = read_name(parallel::kEpBackendNames, kind);
  b.non_blocking = p.at("ep_non_blocking").get<bool>();
  if (b.non_blocking && b.kind != parallel::EpBackendKind::HybridEp)
    throw InputError(file, "$.parallel.ep_non_blocking",
                     fmt::format("the {} backend has no non-blocking dispatch (only HybridEP sizes its permuted buffer "
                                 "without a device-to-host sync)",
                                 kind),
                     "set \"ep_backend\": \"hybridep\", or remove ep_non_blocking");
  if (p.contains("ep_capacity_factor")) {
    if (!b.non_blocking)
      throw InputError(file, "$.parallel.ep_capacity_factor",
                       "a capacity factor sizes only a non-blocking dispatch's permuted buffer; a blocking one is "
                       "sized exactly and never drops",
                       "set \"ep_non_blocking\": true (with ep_backend hybridep), or remove ep_capacity_factor");
    b.capacity_factor = p.at("ep_capacity_factor").get<double>();
  } else if (b.non_blocking) {
    throw InputError(file, "$.parallel.ep_capacity_factor",
                     "a non-blocking dispatch needs its permuted buffer's size (HybridEP asserts on None)",
                     "give ep_capacity_factor in (0, 1]; K / (EP x min(K, local experts)) holds balanced routing");
  }
  if (p.contains("ep_sms")) {
    if (!b.fused())
      throw InputError(file, "$.parallel.ep_sms", "NCCL's all-to-all holds no SMs in moesim's model",
                       "remove ep_sms, or choose ep_backend deepep or hybridep");
    b.dispatch_sms = b.combine_sms = p.at("ep_sms").get<int>();
  } else {
    b.dispatch_sms = b.combine_sms = parallel::default_backend_sms(b.kind);
  }
  if (p.contains("ep_host_sync")) {
    if (!b.syncs_host() && schema::as_time(p.at("ep_host_sync")) > 0)
      throw InputError(file, "$.parallel.ep_host_sync", "a non-blocking dispatch does not sync with the host",
                       "remove ep_host_sync, or set ep_non_blocking false");
    b.host_sync = schema::as_time(p.at("ep_host_sync"));
  }
  return b;
}

// training.recompute_modules (workload::RecomputeModule), given: under selective recomputation
// only; Megatron's "moe" is not modelled, and mla_up_proj needs MLA.
std::uint8_t read_recompute_modules(const Json& t, const Scenario& s, const std::string& file) {
  if (s.training.recompute != workload::Recompute::Selective)
    throw InputError(file, "$.training.recompute_modules",
                     "recompute_modules chooses what selective recomputation recomputes, but training.recompute is " +
                         t.at("recompute").get<std::string>(),
                     "set training.recompute to \"selective\", or remove recompute_modules");
  std::uint8_t bits = 0;
  for (const Json& j : t.at("recompute_modules")) {
    const std::string name = j.get<std::string>();
    if (name == "moe")
      throw InputError(file, "$.training.recompute_modules",
                       "recomputing the whole MoE layer with its all-to-alls (Megatron's \"moe\") is not modelled",
                       "use training.recompute \"full\" (whole layers), or the MoE layer's parts: moe_act, shared_experts, "
                       "layernorm");
    if (name == "mla_up_proj" && !s.model.mla)
      throw InputError(file, "$.training.recompute_modules",
                       fmt::format("mla_up_proj recomputes MLA's up projections, and model {} has no MLA", s.model.name),
                       "remove mla_up_proj, or give the model an \"mla\" section");
    bits |= static_cast<std::uint8_t>(1u << static_cast<int>(read_name(workload::kRecomputeModuleNames, name)));
  }
  return bits;
}

// training.offload_modules (workload::OffloadModule), given: not beside full recomputation, which
// keeps only each layer's input.
std::uint8_t read_offload_modules(const Json& t, const Scenario& s, const std::string& file) {
  if (s.training.recompute == workload::Recompute::Full)
    throw InputError(file, "$.training.offload_modules",
                     "offload_modules moves the activations a layer keeps to the host, and training.recompute \"full\" "
                     "keeps only each layer's input",
                     "remove offload_modules, or set training.recompute to \"selective\" or \"none\"");
  std::uint8_t bits = 0;
  for (const Json& j : t.at("offload_modules"))
    bits |= static_cast<std::uint8_t>(1u << static_cast<int>(read_name(workload::kOffloadModuleNames, j.get<std::string>())));
  const auto has = [&](workload::OffloadModule m) { return (bits >> static_cast<int>(m) & 1u) != 0; };
  // Megatron-Core refuses it too (TransformerConfig.__post_init__, core_v0.17.0).
  if (has(workload::OffloadModule::AttnProj) && !has(workload::OffloadModule::CoreAttn))
    throw InputError(file, "$.training.offload_modules",
                     "attn_proj offloads the attention core's output, which the core's backward needs as well",
                     "add core_attn to offload_modules, or remove attn_proj");
  return bits;
}

// The software section (software/software.hpp). A full-iteration CUDA graph cannot hold the
// device-to-host read of a blocking EP dispatch (Megatron-Core refuses to capture it).
software::Software read_software(const Json& doc, const Scenario& s, const std::string& file) {
  const Json& sw = doc.at("software");
  software::Software out;
  software_options().read(sw, out);
  for (const Json& scope : sw.at("cuda_graphs")) software::parse_graph_scope(scope.get<std::string>(), out.graphs);
  if (out.delay_wgrad && !out.ep_overlap)
    throw InputError(file, "$.software.delay_wgrad",
                     "delaying the experts' weight gradients needs EP overlap (Megatron-Core's delay_wgrad_compute "
                     "requires overlap_moe_expert_parallel_comm)",
                     "set \"ep_overlap\": true, or remove delay_wgrad");
  const bool moe = s.model.experts > 1;
  if (out.graphs.full_iteration && moe && s.parallel.ep_backend.syncs_host())
    throw InputError(file, "$.software.cuda_graphs",
                     fmt::format("a full-iteration CUDA graph cannot capture the device-to-host read of the blocking "
                                 "{} dispatch",
                                 parallel::to_string(s.parallel.ep_backend.kind)),
                     "capture per-layer modules instead (e.g. [\"attn\", \"moe_router\"]), or dispatch without a "
                     "read (\"ep_backend\": \"hybridep\" with \"ep_non_blocking\": true)");
  return out;
}

parallel::ParallelConfig read_parallel(Json& doc, Scenario& s, const std::string& file, bool microbatches_given) {
  const Json& p = doc.at("parallel");
  parallel::ParallelConfig c;
  parallel_options().read(p, c);
  c.schedule = p.contains("schedule")
                   ? read_name(parallel::kPipelineScheduleNames, p.at("schedule").get<std::string>())
                   : (c.sizes.vp > 1 ? parallel::PipelineSchedule::Interleaved : parallel::PipelineSchedule::OneFOneB);
  // The MTP modules follow the last stage's decoder layers there (Megatron-Core places them on
  // the last pipeline stage).
  if (c.last_stage_layers >= 0) c.last_stage_layers += s.model.mtp_layers;
  c.ep_backend = read_ep_backend(p, file);
  const auto& m = s.model;
  const std::uint64_t gpus = s.gpu_count();
  const std::uint64_t model_parallel = static_cast<std::uint64_t>(c.sizes.tp) * c.sizes.cp * c.sizes.pp;
  if (gpus % model_parallel != 0)
    throw InputError(file, "$.parallel", fmt::format("tp {} x cp {} x pp {} = {} does not divide the cluster's {} GPUs",
                                                     c.sizes.tp, c.sizes.cp, c.sizes.pp, model_parallel, gpus),
                     "choose tp, cp and pp whose product divides the GPU count (dp is the GPUs left)");
  if (m.heads % c.sizes.tp != 0 || m.kv_heads % c.sizes.tp != 0)
    throw InputError(file, "$.parallel.tp",
                     fmt::format("{} heads ({} key/value heads) do not split over tp {}", m.heads, m.kv_heads, c.sizes.tp),
                     "choose a tp dividing model.heads and model.kv_heads");
  if (c.sizes.tp > 1 && !c.sequence_parallel)
    throw InputError(file, "$.parallel.sequence_parallel",
                     "MoE layers with tensor parallelism need sequence parallelism (Megatron-Core's MoELayer refuses "
                     "to train without it: every TP rank would route the same tokens)",
                     "set \"sequence_parallel\": true, or tp 1");
  const int seq = s.training.sequence_length;
  if (c.sizes.cp > 1 && seq % (2 * c.sizes.cp) != 0)
    throw InputError(file, "$.parallel.cp",
                     fmt::format("a sequence of {} tokens does not split into 2 x cp = {} chunks", seq, 2 * c.sizes.cp),
                     "choose a cp with sequence_length divisible by 2·cp (each GPU takes two chunks to balance the "
                     "causal mask, as Megatron-Core)");
  if (c.sizes.cp > 1 && m.sliding_window > 0)
    throw InputError(file, "$.parallel.cp",
                     fmt::format("context parallelism over model {}'s sliding-window attention is not modelled (its ring "
                                 "would pass key/value chunks no query of a window sees)",
                                 m.name),
                     "use cp 1 with sliding_window");
  if (c.schedule == parallel::PipelineSchedule::Interleaved && c.sizes.vp == 1)
    throw InputError(file, "$.parallel.schedule", "the interleaved schedule needs virtual stages",
                     "set \"vp\" above 1, or use \"1f1b\"");
  // DualPipeV cuts the model into 2·pp virtual stages, two per rank in a V (dualpipev.py).
  if (c.schedule == parallel::PipelineSchedule::DualPipeV && c.sizes.vp != 2)
    throw InputError(file, "$.parallel.vp", fmt::format("the dualpipev schedule holds two chunks per rank, not vp {}", c.sizes.vp),
                     "set \"vp\": 2 with \"schedule\": \"dualpipev\"");
  if (c.schedule != parallel::PipelineSchedule::Interleaved && c.schedule != parallel::PipelineSchedule::DualPipeV &&
      c.sizes.vp > 1)
    throw InputError(file, "$.parallel.vp",
                     fmt::format("vp {} needs the interleaved schedule, not {}", c.sizes.vp, parallel::to_string(c.schedule)),
                     "use \"schedule\": \"interleaved_1f1b\" or vp 1");
  // Megatron-Core refuses it too (parallel_state.initialize_model_parallel: "pipeline-model-parallel
  // size should be greater than 1 with interleaved schedule").
  if (c.sizes.vp > 1 && c.sizes.pp == 1)
    throw InputError(file, "$.parallel.vp", fmt::format("vp {} needs pipeline stages, but pp is 1", c.sizes.vp),
                     "set parallel.pp above 1, or vp 1");
  std::string why;
  if (parallel::stage_layers(m.layers, c.sizes.pp * c.sizes.vp, c.first_stage_layers, c.last_stage_layers, &why).empty())
    throw InputError(file, "$.parallel.pp",
                     fmt::format("the model's {} layers do not fit pp {} x vp {}: {}", m.layers, c.sizes.pp, c.sizes.vp, why),
                     "set first_stage_layers and last_stage_layers so the other virtual stages get equal layers "
                     "(e.g. 61 layers over 16: first 3, last 2, 4 each), or change pp/vp");

  // Microbatches per data-parallel rank from the global batch.
  Json& t = doc.at("training");
  if (t.contains("global_batch_size")) {
    const std::uint64_t dp = gpus / model_parallel;
    const std::uint64_t gbs = t.at("global_batch_size").get<std::uint64_t>();
    const std::uint64_t per_step = dp * static_cast<std::uint64_t>(s.training.micro_batch_size);
    if (gbs % per_step != 0 || gbs / per_step > 65536)
      throw InputError(file, "$.training.global_batch_size",
                       fmt::format("a global batch of {} sequences is not a whole number of microbatches of {} "
                                   "sequences on {} data-parallel ranks (up to 65536 each)",
                                   gbs, s.training.micro_batch_size, dp),
                       fmt::format("use a multiple of micro_batch_size x dp = {}", per_step));
    const int derived = static_cast<int>(gbs / per_step);
    if (microbatches_given && s.training.microbatches != derived)
      throw InputError(file, "$.training.microbatches",
                       fmt::format("{} microbatches disagree with global_batch_size {} ({} on {} data-parallel ranks)",
                                   s.training.microbatches, gbs, derived, dp),
                       "give one of microbatches and global_batch_size");
    s.training.microbatches = derived;
    t["microbatches"] = derived;
  }
  // DualPipeV's step asserts num_chunks >= num_ranks * 2: its warm-up alone feeds 2·pp microbatches.
  if (c.schedule == parallel::PipelineSchedule::DualPipeV && s.training.microbatches < 2 * c.sizes.pp)
    throw InputError(file, "$.training.microbatches",
                     fmt::format("the dualpipev schedule needs at least 2 x pp = {} microbatches, not {}", 2 * c.sizes.pp,
                                 s.training.microbatches),
                     fmt::format("use {} microbatches or more (or a global batch of {} sequences or more)", 2 * c.sizes.pp,
                                 2 * static_cast<std::uint64_t>(c.sizes.pp) * s.training.micro_batch_size * (gpus / model_parallel)));
  if (c.schedule == parallel::PipelineSchedule::Interleaved && s.training.microbatches % c.sizes.pp != 0)
    throw InputError(file, "$.training.microbatches",
                     fmt::format("the interleaved schedule runs microbatches in groups of pp = {}; {} is not a multiple",
                                 c.sizes.pp, s.training.microbatches),
                     fmt::format("use a multiple of {} microbatches (or of {} sequences of global batch)", c.sizes.pp,
                                 static_cast<std::uint64_t>(c.sizes.pp) * s.training.micro_batch_size * (gpus / model_parallel)));
  return c;
}

}  // namespace

Scenario Loader::build(const Json& resolved, const std::string& file) const {
  Json doc = schema::validate(scenario_schema(), resolved, file);
  Scenario s;
  s.file = file;
  s.name = doc.at("name").get<std::string>();
  // The name is the default output folder's last component (out/NAME): never a path.
  // A letter or digit first: not ".", not a hidden folder, not an option ("-rf") to a shell tool.
  const auto plain = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; };
  const bool component = !s.name.empty() && s.name.size() <= 128 && plain(s.name.front()) &&
                         s.name.find("..") == std::string::npos &&
                         std::all_of(s.name.begin(), s.name.end(), [&](char ch) { return plain(ch) || ch == '-' || ch == '_' || ch == '.'; });
  if (!component)
    throw InputError(file, "$.name", fmt::format("{} is not a file name", schema::show(Json(s.name))),
                     "name the scenario with up to 128 letters, digits, '-', '_' or '.', a letter or digit first (no "
                     "'..'): it is the default output folder out/NAME");
  s.seed = doc.at("seed").get<std::uint64_t>();

  // GPU kinds: the catalogue plus the scenario's own.
  Json catalogue = gpu_catalogue();
  if (doc.contains("gpus"))
    for (auto it = doc.at("gpus").begin(); it != doc.at("gpus").end(); ++it) catalogue[it.key()] = it.value();

  // Cluster.
  Json& c = doc.at("cluster");
  std::map<std::string, cluster::LinkTechPtr> links;
  const auto link_named = [&](const Json& name, const std::string& path) -> cluster::LinkTechPtr {
    const std::string key = name.get<std::string>();
    if (auto it = links.find(key); it != links.end()) return it->second;
    const Json known = link_catalogue();
    if (!known.contains(key))
      throw InputError(file, path, fmt::format("unknown link technology \"{}\"", key),
                       fmt::format("did you mean \"{}\"? (see topologies/links.json, or leave \"link\" out for ideal links)",
                                   nearest(key, known)));
    return links[key] = link_from(key, known.at(key), (data_dir_ / "topologies" / "links.json").string());
  };
  for (const Json& l : c.at("levels")) {
    cluster::Level level;
    level_options().read(l, level);
    if (l.contains("domains") && l.at("domains").contains("link"))
      level.domains.link = link_named(l.at("domains").at("link"), fmt::format("$.cluster.levels[{}].domains.link", s.levels.size()));
    if (l.contains("link")) level.link = link_named(l.at("link"), fmt::format("$.cluster.levels[{}].link", s.levels.size()));
    s.levels.push_back(level);
    // Checked level by level: every count is below 2^31, so the product cannot wrap before it is refused.
    // 2^20 GPUs: the largest clusters built have a few hundred thousand, and validating 2^20 takes
    // seconds (the per-GPU tables of the topology and the memory check), 2^23 half a minute.
    if (s.gpu_count() > (1ULL << 20))
      throw InputError(file, fmt::format("$.cluster.levels[{}].count", s.levels.size() - 1),
                       fmt::format("the levels up to {} make {} GPUs, more than moesim simulates (1,048,576)", level.name,
                                   s.gpu_count()),
                       "reduce the level counts");
  }
  const std::uint64_t gpus = s.gpu_count();
  // Links inside a level: ports on switches, spread evenly; domains that cut the level evenly.
  std::uint64_t below = 1;  // GPUs inside one worker of the level
  for (std::size_t i = s.levels.size(); i-- > 0;) {
    const cluster::Level& lv = s.levels[i];
    const std::string at = fmt::format("$.cluster.levels[{}]", i);
    if (lv.ports > 1 && lv.fabric != cluster::Fabric::Switch)
      throw InputError(file, at + ".ports",
                       fmt::format("ports split a switch level's bandwidth, but level {} is a {} with links of its own "
                                   "between workers",
                                   lv.name, cluster::to_string(lv.fabric)),
                       "use \"fabric\": \"switch\" for the level, or leave ports out");
    if (lv.ports > 1 && below % lv.ports != 0)
      throw InputError(file, at + ".ports",
                       fmt::format("the {} GPUs of a {} do not spread evenly over {} ports", below, lv.name, lv.ports),
                       fmt::format("use a number of ports dividing {}", below));
    if (lv.domains.size > 0 && (lv.domains.size >= lv.count || lv.count % lv.domains.size != 0))
      throw InputError(file, at + ".domains.size",
                       fmt::format("domains of {} do not cut level {}'s {} workers into several equal domains",
                                   lv.domains.size, lv.name, lv.count),
                       fmt::format("use a divisor of {} smaller than it, or leave domains out (the level is one domain)",
                                   lv.count));
    below *= lv.count;
  }
  const auto kind_named = [&](const std::string& name, const std::string& path) -> std::uint16_t {
    if (!catalogue.contains(name))
      throw InputError(file, path, fmt::format("unknown GPU kind \"{}\"", name),
                       fmt::format("did you mean \"{}\"? (see `moesim presets`, or define it under \"gpus\")",
                                   nearest(name, catalogue)));
    for (std::size_t i = 0; i < s.kinds.size(); ++i)
      if (s.kinds[i].key == name) return static_cast<std::uint16_t>(i);
    const bool own = doc.contains("gpus") && doc.at("gpus").contains(name);
    s.kinds.push_back(gpu_from(name, catalogue.at(name), own ? file : (data_dir_ / "topologies" / "gpus.json").string()));
    return static_cast<std::uint16_t>(s.kinds.size() - 1);
  };
  if (c.contains("groups") == c.contains("gpu"))
    throw InputError(file, "$.cluster", "give exactly one of \"gpu\" and \"groups\"",
                     "\"gpu\": \"h100-sxm5-80gb\" for a homogeneous cluster, \"groups\" for mixed GPU kinds");
  if (c.contains("gpu")) {
    kind_named(c.at("gpu").get<std::string>(), "$.cluster.gpu");
  } else {
    std::uint64_t total = 0;
    const Json& groups = c.at("groups");
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const auto k = kind_named(groups[i].at("gpu").get<std::string>(), fmt::format("$.cluster.groups[{}].gpu", i));
      const auto count = groups[i].at("count").get<std::uint64_t>();
      total += count;
      if (total > gpus) break;
      s.kind_of_gpu.insert(s.kind_of_gpu.end(), count, k);
    }
    if (total != gpus)
      throw InputError(file, "$.cluster.groups", fmt::format("the groups hold {} GPUs but the levels make {}", total, gpus),
                       "make the group counts add up to the product of the level counts");
    if (s.kinds.size() == 1) s.kind_of_gpu.clear();
  }
  Json used = Json::object();
  for (const auto& k : s.kinds) used[k.key] = catalogue.at(k.key);
  doc["gpus"] = used;
  if (c.contains("hosts")) {
    Json& h = c.at("hosts");
    cluster::HostSpec spec;
    // By default a host is a worker of the level above the GPUs (a node); one level: every GPU.
    const std::uint64_t node = s.levels.size() > 1 ? s.levels.back().count : gpus;
    if (!h.contains("gpus")) h["gpus"] = node;
    host_options().read(h, spec);
    if (gpus % spec.gpus != 0)
      throw InputError(file, "$.cluster.hosts.gpus", fmt::format("{} GPUs do not split into hosts of {}", gpus, spec.gpus),
                       fmt::format("use a number of GPUs per host that divides {} (e.g. {})", gpus, node));
    if (spec.gpus % spec.pcie_switches != 0)
      throw InputError(file, "$.cluster.hosts.pcie_switches",
                       fmt::format("a host's {} GPUs do not spread evenly over {} PCIe switches", spec.gpus, spec.pcie_switches),
                       fmt::format("use a number of switches dividing {}", spec.gpus));
    s.hosts = spec;
  }

  // Model.
  Json& m = doc.at("model");
  if (!m.contains("dense_ffn_hidden")) m["dense_ffn_hidden"] = m.at("ffn_hidden");
  if (!m.contains("kv_heads")) m["kv_heads"] = m.at("heads");
  model_options().read(m, s.model);
  if (!m.contains("name")) s.model.name = "model";
  // The MTP modules are layers after the decoder's (ModelShape::is_mtp).
  s.model.layers += s.model.mtp_layers;
  if (s.model.mtp_layers > 0 && (s.model.vocab <= 0 || !s.model.attention))
    throw InputError(file, "$.model.mtp_layers",
                     "multi-token prediction embeds the next tokens and predicts them through the LM head, and this "
                     "model has no vocabulary or no attention",
                     "give the model a vocab and attention, or remove mtp_layers");
  if (s.model.top_k > s.model.experts)
    throw InputError(file, "$.model.top_k", fmt::format("top_k {} exceeds the {} experts", s.model.top_k, s.model.experts),
                     "use top_k <= experts");
  if (m.contains("sliding_window")) {
    if (!s.model.attention)
      throw InputError(file, "$.model.sliding_window", "a model without attention has no attention window",
                       "remove sliding_window, or give the model attention");
  }
  if (m.contains("mla")) {
    if (m.contains("head_dim"))
      throw InputError(file, "$.model.head_dim", "a model with latent attention (mla) has no single head_dim",
                       "give the head widths in model.mla (qk_nope_head_dim, qk_rope_head_dim, v_head_dim) only");
    if (s.model.kv_heads != s.model.heads)
      throw InputError(file, "$.model.kv_heads",
                       fmt::format("latent attention up-projects keys and values for every head: kv_heads {} is not "
                                   "heads {}", s.model.kv_heads, s.model.heads),
                       "leave kv_heads out (or equal to heads) with mla");
  }
  if (!m.contains("head_dim") && !s.model.mla && static_cast<int>(s.model.hidden) % s.model.heads != 0)
    throw InputError(file, "$.model.heads", fmt::format("hidden size {} is not divisible by {} heads", s.model.hidden, s.model.heads),
                     "choose heads dividing hidden, or give model.head_dim");
  if (s.model.heads % s.model.kv_heads != 0)
    throw InputError(file, "$.model.kv_heads", fmt::format("{} heads are not divisible by {} kv_heads", s.model.heads, s.model.kv_heads),
                     "choose kv_heads dividing heads");
  if (s.model.dense_layers >= s.model.layers)
    throw InputError(file, "$.model.dense_layers", fmt::format("{} dense layers leave no MoE layer of {}", s.model.dense_layers, s.model.layers),
                     "use fewer dense_layers than layers");

  // Training, routing, compute, network.
  const Json& t = doc.at("training");
  training_options().read(t, s.training);
  if (read_name(workload::kFp8ScalingNames, t.at("fp8_scaling").get<std::string>()) == workload::Fp8Scaling::Current) {
    if (s.training.dtype != cluster::Dtype::fp8)
      throw InputError(file, "$.training.fp8_scaling",
                       fmt::format("per-tensor current scaling scales FP8 tensors, and training.dtype is {}{}",
                                   t.at("dtype").get<std::string>(),
                                   s.training.dtype == cluster::Dtype::mxfp8 ? " (MXFP8 scales each block of 32)" : ""),
                       "set training.dtype to \"fp8\", or remove fp8_scaling");
    s.training.fp8_current_scaling = true;
  }
  if (s.model.sliding_window > 0 && !s.training.causal)
    throw InputError(file, "$.training.causal",
                     fmt::format("model {} attends within a sliding window of its past tokens, which needs the causal mask",
                                 s.model.name),
                     "leave training.causal true, or remove model.sliding_window");
  s.training.optimizer_on_host = t.at("optimizer") == "host";
  if (t.contains("recompute_modules")) s.training.recompute_modules = read_recompute_modules(t, s, file);
  if (t.contains("offload_modules")) s.training.offload_modules = read_offload_modules(t, s, file);
  if (s.training.optimizer_on_host && !s.hosts)
    throw InputError(file, "$.training.optimizer",
                     "the optimizer steps on the host, but the cluster describes no hosts (memory, CPU optimizer rate, "
                     "PCIe switches)",
                     "add \"hosts\" to the cluster, e.g. {\"memory\": \"2TiB\", \"switch_uplink\": {\"bandwidth\": "
                     "\"64GB/s\", \"latency\": \"1us\"}}, or use \"optimizer\": \"gpu\"");
  for (const auto& k : s.kinds)
    if (k.peak(s.training.dtype) <= 0)
      throw InputError(file, "$.training.dtype",
                       fmt::format("{} has no {} units in the catalogue", k.key, cluster::to_string(s.training.dtype)),
                       "pick a dtype every GPU of the cluster supports (e.g. fp16 on V100)");
  s.parallel = read_parallel(doc, s, file, resolved.at("training").contains("microbatches"));
  const Json& r = doc.at("routing");
  routing_options().read(r, s.routing);
  const std::string routing_kind = r.at("kind").get<std::string>();
  if (s.routing.kind == workload::RoutingKind::Trace) {
    if (!r.contains("trace"))
      throw InputError(file, "$.routing.trace", "routing kind \"trace\" names no trace file",
                       "add \"trace\": \"traces/NAME.csv\" (columns iteration,layer,expert,tokens)");
    const fs::path trace = data_file(r.at("trace").get<std::string>(), file, "$.routing.trace", "routing trace",
                                     "traces/gate-counts.csv");
    std::vector<int> moe_layers;
    for (int l = 0; l < s.model.layers; ++l)
      if (s.model.is_moe(l)) moe_layers.push_back(l);
    s.routing.trace = std::make_shared<const workload::PopularityTable>(workload::read_popularity_trace(
        trace.string(), s.model.experts, s.model.layers, s.training.iterations, moe_layers));
  } else if (r.contains("trace")) {
    throw InputError(file, "$.routing.trace", fmt::format("a trace is given but routing.kind is \"{}\"", routing_kind),
                     "set routing.kind to \"trace\", or remove routing.trace");
  }
  const Json& cp = doc.at("compute");
  s.compute.dtype = s.training.dtype;
  s.compute.fp8_current_scaling = s.training.fp8_current_scaling;
  if (const auto& st = s.training.optimizer_states; st.given)
    s.compute.optimizer_bytes_per_param = st.step_bytes(cluster::storage_bytes(s.training.dtype));
  {
    // The multi-tensor kernels' bytes per parameter (compute::OptimizerBytes): Adam updates the
    // master weights (or the FP32 weights themselves) and both moments and reads the main gradient,
    // FP32 unless the precision-aware optimizer says otherwise (Megatron-Bridge's recipes reduce
    // gradients in FP32, DistributedDataParallelConfig.grad_reduce_in_fp32; torchtitan's FSDP2
    // reduces in FP32, its mixed_precision_reduce default).
    const auto& st = s.training.optimizer_states;
    const double storage = cluster::storage_bytes(s.training.dtype), master = st.master(storage);
    auto& b = s.compute.optimizer_bytes;
    b.main_grad = st.main_grads > 0 ? st.main_grads : 4.0;
    b.adam = 2 * ((master > 0 ? master : storage) + st.exp_avg + st.exp_avg_sq) + b.main_grad;
    b.master_copy = master > 0 ? master + storage : 0.0;
  }
  compute_options().read(cp, s.compute);
  s.software = read_software(doc, s, file);
  s.compute.grouped_gemm_kernels = s.software.grouped_gemm;
  s.compute.permute_kernels = s.software.permute;
  s.compute.fused_activation = s.software.fused_activation;
  s.compute.dglu_dbias_slowdown = s.software.dglu_dbias_slowdown;
  s.compute.fused_rope = s.software.fused_rope;
  s.compute.fused_router = s.software.fused_router;
  s.compute.cross_entropy = s.software.cross_entropy;
  s.compute.optimizer_kernels = s.software.optimizer;
  s.training.logits_in_storage_dtype = s.software.cross_entropy == compute::CrossEntropyKernels::TransformerEngine;
  network_options().read(doc.at("network"), s);

  if (doc.contains("calibration")) {
    const fs::path path = data_file(doc.at("calibration").get<std::string>(), file, "$.calibration",
                                    "calibration profile", "calibrations/parm-testbed-a.json");
    s.calibration = std::make_shared<const calibration::Profile>(calibration::parse_profile(read_json(path), path.string()));
  }

  // Strategy: its own schema.
  const Json& st = doc.at("strategy");
  if (!st.is_object() || !st.contains("name") || !st.at("name").is_string()) {
    std::vector<std::string> names;
    for (const auto& i : strategies::registry()) names.push_back(i.name);
    throw InputError(file, "$.strategy.name", "missing the strategy name",
                     fmt::format("write \"strategy\": {{\"name\": \"{}\"}} (known: {})", names.front(), fmt::join(names, ", ")));
  }
  s.strategy = strategies::find_strategy(st.at("name").get<std::string>());
  if (!s.strategy) {
    std::vector<std::string> names;
    for (const auto& i : strategies::registry()) names.push_back(i.name);
    throw InputError(file, "$.strategy.name", fmt::format("unknown strategy \"{}\"", st.at("name").get<std::string>()),
                     fmt::format("use one of: {}", fmt::join(names, ", ")));
  }
  s.strategy_options = schema::validate(s.strategy->options, st, file, "$.strategy");
  if (!s.strategy->refuses_global_batch.empty() && resolved.at("training").contains("global_batch_size"))
    throw InputError(file, "$.training.global_batch_size", s.strategy->refuses_global_batch,
                     "give training.microbatches (and micro_batch_size) instead");
  if (!s.strategy->takes_layout && (!s.parallel.trivial() || s.parallel.sizes.ep > 0)) {
    std::vector<std::string> takes;
    for (const auto& i : strategies::registry())
      if (i.takes_layout) takes.push_back(i.name);
    throw InputError(file, "$.parallel",
                     fmt::format("strategy {} runs as its paper does, without a parallel layout (tp, cp, pp, vp, ep, "
                                 "etp)",
                                 s.strategy->name),
                     fmt::format("remove \"parallel\" (or set every size to 1), or use a strategy that takes one: {}",
                                 fmt::join(takes, ", ")));
  }
  if (s.parallel.ep_backend.kind != parallel::EpBackendKind::Nccl && !s.strategy->takes_ep_backend) {
    std::vector<std::string> takes;
    for (const auto& i : strategies::registry())
      if (i.takes_ep_backend) takes.push_back(i.name);
    throw InputError(file, "$.parallel.ep_backend",
                     fmt::format("strategy {} exchanges its tokens as its paper does, with NCCL", s.strategy->name),
                     fmt::format("remove ep_backend (or set \"nccl\"), or use a strategy that takes one: {}",
                                 fmt::join(takes, ", ")));
  }
  if (s.model.mtp_layers > 0 && s.strategy->name != "ep")
    throw InputError(file, "$.model.mtp_layers",
                     fmt::format("multi-token prediction is modelled in Megatron-Core's schedule (strategy ep); strategy "
                                 "{} runs its paper's",
                                 s.strategy->name),
                     "remove mtp_layers, or use strategy ep");
  if (s.software.ep_overlap) {
    // Megatron-Core's own conditions (TransformerConfig.__post_init__ with
    // overlap_moe_expert_parallel_comm), where moesim follows them.
    if (s.strategy->name != "ep")
      throw InputError(file, "$.software.ep_overlap",
                       fmt::format("EP overlap is Megatron-Core's schedule; strategy {} runs its paper's", s.strategy->name),
                       "remove ep_overlap, or use strategy ep");
    if (s.training.recompute == workload::Recompute::Full)
      throw InputError(file, "$.software.ep_overlap", "EP overlap does not run with full recomputation (Megatron-Core refuses it)",
                       "set training.recompute to \"none\" or \"selective\", or remove ep_overlap");
    if (s.parallel.sizes.pp > 1 && s.parallel.sizes.vp == 1)
      throw InputError(file, "$.software.ep_overlap",
                       "EP overlap with pipeline stages needs virtual stages (Megatron-Core pairs a forward and a backward "
                       "of different model chunks)",
                       "set parallel.vp > 1, or remove ep_overlap");
  }
  doc["strategy"] = s.strategy_options;
  // Re-validating puts every key in schema order, so an effective scenario rebuilds identically.
  s.effective = schema::validate(scenario_schema(), doc, file);
  s.warnings = plausibility_warnings(s);
  if (s.calibration)
    if (auto w = profile_gpu_warning(s, *s.calibration)) s.warnings.push_back(*w);
  return s;
}

std::vector<PresetEntry> Loader::presets() const {
  std::vector<PresetEntry> out;
  const auto folder = [&](const char* dir, const char* kind) {
    std::vector<fs::path> files;
    if (fs::is_directory(data_dir_ / dir))
      for (const auto& e : fs::directory_iterator(data_dir_ / dir))
        if (e.path().extension() == ".json" && e.path().stem() != "gpus" && e.path().stem() != "links") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const Json j = read_json(f);
      out.push_back({kind, f.stem().string(), j.value("name", std::string()) + (j.contains("source") ? "" : "")});
    }
  };
  folder("models", "model");
  folder("topologies", "topology");
  folder("software", "software");
  const Json gpus = gpu_catalogue();
  for (auto it = gpus.begin(); it != gpus.end(); ++it) out.push_back({"gpu", it.key(), it.value().at("name").get<std::string>()});
  for (const auto& s : strategies::registry()) out.push_back({"strategy", s.name, s.description});
  return out;
}

}  // namespace moesim::scenario
