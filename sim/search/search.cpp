#include "sim/search/search.hpp"

#include <algorithm>
#include <fstream>
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/output_file.hpp"
#include "sim/report/results.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/simulation/time_estimate.hpp"
#include "sim/sweep/grid.hpp"

namespace moesim::search {

using schema::Json;

namespace {

Json values_of(const Layout& l) {
  Json v = Json::array({l.tp, l.pp, l.vp, l.cp, l.ep, l.etp, l.first_stage_layers, l.last_stage_layers, l.mbs, l.recompute,
                        l.sharding, l.dispatcher});
  if (l.capacity_factor > 0) v.push_back(l.capacity_factor);
  return v;
}

std::vector<std::string> paths_of(const Layout& l) {
  std::vector<std::string> p = kLayoutPaths;
  if (l.capacity_factor > 0) p.push_back(kCapacityPath);
  return p;
}

// The scenario's own layout as the search writes layouts (none when the strategy picks EP).
std::optional<Layout> own_layout(const scenario::Scenario& sc, int decoder_layers) {
  const auto& s = sc.parallel.sizes;
  const int ep = s.ep > 0 ? s.ep : sc.strategy_options.value("ep_size", 0);  // strategy.ep_size: the other place EP is given
  if (ep <= 0) return std::nullopt;
  const Json& parallel = sc.effective.at("parallel");
  Layout l{s.tp, s.pp, s.vp, ep, sc.training.micro_batch_size, sc.effective.at("training").at("recompute").get<std::string>(),
           s.cp, s.etp, parallel.at("sharding").get<std::string>(), parallel.at("ep_backend").get<std::string>()};
  const auto [first, last] = stage_split(decoder_layers, s.pp * s.vp);
  l.first_stage_layers = sc.parallel.first_stage_layers >= 0 ? sc.parallel.first_stage_layers : first;
  l.last_stage_layers = sc.parallel.last_stage_layers >= 0 ? sc.parallel.last_stage_layers - sc.model.mtp_layers : last;
  return l;
}

bool same_layout(const Layout& a, const Layout& b) {
  return a.tp == b.tp && a.pp == b.pp && a.vp == b.vp && a.cp == b.cp && a.ep == b.ep && a.etp == b.etp && a.mbs == b.mbs &&
         a.recompute == b.recompute && a.sharding == b.sharding && a.dispatcher == b.dispatcher;
}

}  // namespace

Json with_layout(Json raw, const Layout& layout, const std::string& file) {
  for (const char* block : {"parallel", "training"})
    if (!raw.contains(block)) raw[block] = Json::object();
  const Json values = values_of(layout);
  const auto paths = paths_of(layout);
  for (std::size_t i = 0; i < paths.size(); ++i) sweep::set_path(raw, paths[i], values[i], file, "$");
  return raw;
}

SearchPlan plan_search(const scenario::Loader& loader, Json raw, const std::string& file, const SearchSpace& space) {
  if (raw.contains("sweep"))
    throw InputError(file, "$.sweep", "is set: search builds its own grid of layouts", "remove the sweep block to search");
  // The schedule follows VP (1f1b or interleaved) unless the scenario asks for another.
  if (raw.contains("parallel") && raw["parallel"].is_object()) {
    const std::string schedule = raw["parallel"].value("schedule", std::string());
    if (schedule == "1f1b" || schedule == "interleaved_1f1b") raw["parallel"].erase("schedule");
  }
  const scenario::Scenario first = loader.build(loader.resolve(raw, file), file);
  if (first.strategy->name != "ep")
    throw InputError(file, "$.strategy.name",
                     fmt::format("is \"{}\": search varies the parallel layout, which only the ep strategy takes", first.strategy->name),
                     "set \"strategy\": {\"name\": \"ep\"} to search layouts");
  // The global batch stays; the microbatches follow from it and each layout's micro-batch and DP.
  Json gbs = first.effective.at("training").value("global_batch_size", Json());
  if (gbs.is_null()) {  // the batch of the scenario's microbatches on its data-parallel ranks
    const auto& s = first.parallel.sizes;
    const std::uint64_t dp = first.gpu_count() / static_cast<std::uint64_t>(s.tp * s.cp * s.pp);
    const std::uint64_t batch = dp * static_cast<std::uint64_t>(first.training.micro_batch_size * first.training.microbatches);
    if (batch <= (1u << 30)) gbs = batch;
  }
  if (!gbs.is_number_integer())
    throw InputError(file, "$.training.global_batch_size", "is not set: a layout search keeps the global batch and varies the rest",
                     "set training.global_batch_size (sequences per iteration)");
  if (!raw.contains("training")) raw["training"] = Json::object();
  raw["training"]["global_batch_size"] = gbs;
  raw["training"].erase("microbatches");
  // EP is the layout's (parallel.ep), not the strategy's.
  if (raw.contains("strategy") && raw["strategy"].is_object()) raw["strategy"].erase("ep_size");
  const std::optional<Layout> own = own_layout(first, first.model.layers - first.model.mtp_layers);
  const Json resolved = loader.resolve(raw, file);
  const scenario::Scenario base = loader.build(resolved, file);
  const Json& effective = base.effective;

  LayoutInputs in;
  in.gpus = base.gpu_count();
  in.domain_gpus = base.levels.empty() ? 1 : static_cast<int>(base.levels.back().count);
  in.layers = base.model.layers - base.model.mtp_layers;
  in.experts = base.model.experts;
  in.heads = base.model.heads;
  in.kv_heads = base.model.kv_heads;
  in.global_batch = gbs.get<int>();
  in.sequence = static_cast<int>(base.training.sequence_length);
  in.expert_ffn = static_cast<int>(base.model.ffn_hidden);
  ScenarioChoices choices;
  choices.cp = base.parallel.sizes.cp;
  choices.etp = base.parallel.sizes.etp;
  choices.recompute = effective.at("training").at("recompute").get<std::string>();
  choices.sharding = effective.at("parallel").at("sharding").get<std::string>();
  choices.dispatcher = effective.at("parallel").at("ep_backend").get<std::string>();
  SearchSpace grid = default_space(in, choices);
  for (auto [dim, given] : {std::pair{&grid.tp, &space.tp}, {&grid.pp, &space.pp}, {&grid.vp, &space.vp}, {&grid.cp, &space.cp},
                            {&grid.ep, &space.ep}, {&grid.etp, &space.etp}, {&grid.mbs, &space.mbs}})
    if (!given->empty()) *dim = *given;
  for (auto [dim, given] : {std::pair{&grid.recompute, &space.recompute}, {&grid.sharding, &space.sharding},
                            {&grid.dispatcher, &space.dispatcher}})
    if (!given->empty()) *dim = *given;

  SearchPlan plan;
  plan.name = base.name;
  plan.gpus = in.gpus;
  plan.own = own;
  std::vector<Layout> layouts = enumerate_layouts(in, grid);
  if (plan.own && std::none_of(layouts.begin(), layouts.end(), [&](const Layout& l) { return same_layout(l, *plan.own); }))
    layouts.push_back(*plan.own);  // the user's layout is ranked even outside the grid
  // A non-blocking dispatcher's buffer keeps the scenario's multiple of balanced routing at every EP.
  const Json& capacity = effective.at("parallel").value("ep_capacity_factor", Json());
  if (capacity.is_number() && base.parallel.sizes.ep > 0) {
    const auto& m = base.model;
    const double multiple = capacity.get<double>() / balanced_capacity(m.experts, m.top_k, base.parallel.sizes.ep);
    for (Layout& l : layouts) l.capacity_factor = std::min(1.0, multiple * balanced_capacity(m.experts, m.top_k, l.ep));
    if (plan.own) plan.own->capacity_factor = capacity.get<double>();
  }
  plan.enumerated = layouts.size();

  for (const Layout& l : layouts) {
    try {
      Json doc = with_layout(resolved, l, file);
      simulation::Simulation sim(loader.build(doc, file));
      sim.check();
      plan.fitting.push_back(l);
      plan.cpu_seconds.push_back(simulation::cpu_seconds(sim.memory_estimate()));
      plan.microbatches.push_back(sim.scenario().training.microbatches);
    } catch (const InputError& e) {
      plan.refused.push_back({l, e.what(), false});
    } catch (const InfeasibleError& e) {
      plan.refused.push_back({l, e.what(), true});
    }
  }
  if (plan.fitting.empty())
    throw InputError(file, "$.parallel",
                     fmt::format("no layout of the {} the search considered can run ({} refused: {})", plan.enumerated,
                                 plan.refused.size(), plan.refused.empty() ? "-" : plan.refused.front().why),
                     "widen the search (--tp, --pp, --cp, --ep, --etp, --mbs, --recompute, --sharding, --dispatcher) or give "
                     "the cluster more GPUs or memory");
  plan.scenario = raw;
  plan.global_batch = gbs.get<int>();
  for (const char* block : {"parallel", "training"})
    if (!plan.scenario.contains(block)) plan.scenario[block] = Json::object();
  return plan;
}

Json sweep_of(const SearchPlan& plan, const std::vector<std::size_t>& layouts, const std::vector<int>& global_batch, bool screen) {
  Json values = Json::array();
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    Json v = values_of(plan.fitting.at(layouts[i]));
    v.push_back(global_batch.at(i));
    values.push_back(std::move(v));
  }
  std::vector<std::string> paths = paths_of(plan.fitting.front());
  paths.push_back("training.global_batch_size");
  Json doc = plan.scenario;
  if (screen) {  // one iteration, every source sending its expected shares: each microbatch the same
    if (!doc.contains("routing")) doc["routing"] = Json::object();
    doc["routing"]["sampling"] = "expected";
    doc["training"]["iterations"] = 1;
  }
  doc["sweep"] = {{"axes", Json::array({{{"paths", paths}, {"values", values}}})}};
  return doc;
}

Screening screening(const SearchPlan& plan) {
  Screening s;
  for (std::size_t i = 0; i < plan.fitting.size(); ++i) {
    const int m = plan.microbatches[i];
    // 1F1B: PP microbatches fill the pipeline (PP − 1 warm-up forwards, then a steady step). The
    // interleaved schedule warms up with 2·(PP − 1) + (VP − 1)·PP model chunks (Megatron-Core's
    // get_pp_rank_microbatches), all of PP·VP at PP microbatches: 2·PP leave it a steady state.
    const Layout& l = plan.fitting[i];
    const int m1 = std::max(l.vp > 1 ? 2 * l.pp : l.pp, 2);
    const int per_microbatch = plan.global_batch / m;  // sequences: DP × micro-batch
    if (2 * m1 >= m) {
      s.layout.push_back(i), s.global_batch.push_back(plan.global_batch), s.microbatches.push_back(m);
      continue;
    }
    for (int k : {m1, 2 * m1}) s.layout.push_back(i), s.global_batch.push_back(per_microbatch * k), s.microbatches.push_back(k);
  }
  return s;
}

std::vector<Figures> read_rows(const std::filesystem::path& csv, std::size_t points) {
  std::ifstream in(csv);
  std::string line;
  if (!std::getline(in, line)) throw InputError(csv.string(), "line 1", "is missing", "run the search again");
  const auto header = report::csv_fields(line);
  const auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) throw InputError(csv.string(), "line 1", fmt::format("has no column {}", name), "run the search into a new folder");
    return static_cast<std::size_t>(it - header.begin());
  };
  const std::size_t point = column("point"), status = column("status"), tps = column("tokens_per_second"),
                    iteration = column("iteration_time_ms"), memory = column("peak_memory_bytes"), note = column("note");
  std::vector<Figures> rows(points);
  for (auto& r : rows) r.note = "did not run (the sweep stopped before it)";
  while (std::getline(in, line)) {
    const auto f = report::csv_fields(line);
    if (f.size() != header.size()) continue;
    const std::size_t p = std::stoul(f[point]);
    if (p >= points) continue;
    rows[p] = f[status] == "ok" ? Figures{true, std::stod(f[tps]), std::stod(f[iteration]), std::stod(f[memory]), ""}
                                : Figures{false, 0, 0, 0, f[note]};
  }
  return rows;
}

std::vector<Figures> extrapolate(const SearchPlan& plan, const Screening& screen, const std::vector<Figures>& rows) {
  std::vector<Figures> out(plan.fitting.size());
  for (std::size_t p = 0; p < screen.layout.size();) {
    const std::size_t i = screen.layout[p];
    const bool whole = p + 1 == screen.layout.size() || screen.layout[p + 1] != i;
    const Figures& a = rows.at(p);
    if (whole) {
      out[i] = a;
      ++p;
      continue;
    }
    const Figures& b = rows.at(p + 1);
    p += 2;
    if (!a.ok || !b.ok) {
      out[i] = a.ok ? b : a;
      continue;
    }
    const double m1 = screen.microbatches[p - 2], m2 = screen.microbatches[p - 1], m = plan.microbatches[i];
    const double time = a.iteration_ms + (m - m1) * (b.iteration_ms - a.iteration_ms) / (m2 - m1);
    const double tokens = a.tokens_per_second * a.iteration_ms / 1e3 * m / m1;  // the full batch's
    out[i] = {true, tokens / (time / 1e3), time, std::max(a.peak_memory_bytes, b.peak_memory_bytes), ""};
  }
  return out;
}

std::vector<std::size_t> finalists(const SearchPlan& plan, const std::vector<Figures>& screened, std::size_t count) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < screened.size(); ++i)
    if (screened[i].ok) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return screened[a].tokens_per_second > screened[b].tokens_per_second; });
  if (order.size() > count) order.resize(count);
  if (plan.own)
    for (std::size_t i = 0; i < plan.fitting.size(); ++i)
      if (same_layout(plan.fitting[i], *plan.own) && screened[i].ok && std::find(order.begin(), order.end(), i) == order.end())
        order.push_back(i);
  return order;
}

Ranking rank(const SearchPlan& plan, const std::vector<Figures>& screened, const std::vector<std::size_t>& finals,
             const std::vector<Figures>& final_rows) {
  Ranking r;
  for (std::size_t i = 0; i < plan.fitting.size(); ++i) {
    const auto f = std::find(finals.begin(), finals.end(), i);
    const Figures& figures = f != finals.end() ? final_rows.at(static_cast<std::size_t>(f - finals.begin())) : screened[i];
    if (!figures.ok) {
      r.failed.push_back({plan.fitting[i], figures.note, false});
      continue;
    }
    r.ranked.push_back({i, figures, f != finals.end(), screened[i].tokens_per_second});
  }
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.figures.tokens_per_second != b.figures.tokens_per_second) return a.figures.tokens_per_second > b.figures.tokens_per_second;
    return a.figures.peak_memory_bytes < b.figures.peak_memory_bytes;
  });
  if (plan.own)
    for (std::size_t i = 0; i < r.ranked.size(); ++i)
      if (same_layout(plan.fitting[r.ranked[i].layout], *plan.own)) r.own = i;
  return r;
}

namespace {

std::string layout_fields(const Layout& l) {
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{:.6g}", l.tp, l.pp, l.vp, l.cp, l.ep, l.etp, l.first_stage_layers,
                     l.last_stage_layers, l.mbs, report::csv_field(l.recompute), l.sharding, l.dispatcher, l.capacity_factor);
}
const char* const kLayoutColumns =
    "tp,pp,vp,cp,ep,etp,first_stage_layers,last_stage_layers,micro_batch_size,recompute,sharding,ep_backend,ep_capacity_factor";

}  // namespace

std::string refused_csv(const SearchPlan& plan, const std::vector<Refusal>& failed) {
  std::string refused = std::string(kLayoutColumns) + ",reason\n";
  for (const auto* list : {&plan.refused, &failed})
    for (const Refusal& x : *list) refused += layout_fields(x.layout) + "," + report::csv_field(x.why) + "\n";
  return refused;
}

void write_ranking(const SearchPlan& plan, const Ranking& ranking, const std::string& file, const std::filesystem::path& out) {
  std::string ranked = std::string("rank,") + kLayoutColumns +
                       ",tokens_per_second,tokens_per_second_per_gpu,iteration_time_ms,peak_memory_gib,simulated,"
                       "screened_tokens_per_second,own\n";
  for (std::size_t i = 0; i < ranking.ranked.size(); ++i) {
    const Ranked& x = ranking.ranked[i];
    ranked += fmt::format("{},{},{},{},{},{:.6g},{},{},{}\n", i + 1, layout_fields(plan.fitting[x.layout]),
                          x.figures.tokens_per_second, x.figures.tokens_per_second / static_cast<double>(plan.gpus),
                          x.figures.iteration_ms, x.figures.peak_memory_bytes / (1024.0 * 1024 * 1024),
                          x.in_full ? "in full" : "extrapolated", x.screened_tokens_per_second, ranking.own == i ? "yes" : "no");
  }
  const std::string refused = refused_csv(plan, ranking.failed);
  std::vector<std::pair<std::filesystem::path, OutputWriter>> files{
      {out / "ranked.csv", [&](std::ostream& o) { o << ranked; }},
      {out / "refused.csv", [&](std::ostream& o) { o << refused; }}};
  Json best;
  if (!ranking.ranked.empty()) {
    best = with_layout(plan.scenario, plan.fitting[ranking.ranked.front().layout], file);
    best["name"] = plan.name + "-best";
    files.push_back({out / "best.json", [&](std::ostream& o) { o << best.dump(2) << "\n"; }});
  }
  write_files(files);
}

}  // namespace moesim::search
