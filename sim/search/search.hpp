// `moesim search`: which parallel layout trains this model fastest on this cluster. The layouts
// Megatron-Core would accept (layout_space.hpp) are built and checked one by one, without
// simulating: the ones the scenario's strategy or the memory model refuses are set aside with
// the reason; the others run as one sweep (sweep/runner.hpp: in parallel, resumable, across MPI
// ranks), whose rows are then ranked by throughput. The ranking, the refusals and the fastest
// layout's own scenario are written beside the sweep's results.csv.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario/scenario.hpp"
#include "sim/search/layout_space.hpp"

namespace moesim::search {

// The scenario paths each layout sets, in this order (the sweep's zipped axis, the CSV columns);
// kCapacityPath after them where the scenario has a non-blocking dispatcher's buffer.
inline const std::vector<std::string> kLayoutPaths{
    "parallel.tp", "parallel.pp", "parallel.vp", "parallel.cp", "parallel.ep", "parallel.etp", "parallel.first_stage_layers",
    "parallel.last_stage_layers", "training.micro_batch_size", "training.recompute", "parallel.sharding", "parallel.ep_backend"};
inline const std::string kCapacityPath = "parallel.ep_capacity_factor";

struct Refusal {
  Layout layout;
  std::string why;
  bool out_of_memory = false;  // the memory model's refusal (else the strategy's or the scenario's)
};

struct SearchPlan {
  std::string name;                // the scenario's
  std::uint64_t gpus = 0;
  // The scenario without a sweep block, its global batch explicit and its microbatches left to
  // follow from each layout's micro-batch and data parallelism.
  schema::Json scenario;
  int global_batch = 0;
  std::size_t enumerated = 0;      // layouts the rules accept
  std::vector<Layout> fitting;     // the layouts that can run
  std::vector<int> microbatches;   // per fitting layout: per data-parallel rank and iteration
  std::vector<double> cpu_seconds;  // per fitting layout: its run's estimated CPU time
  std::vector<Refusal> refused;    // by the strategy or the memory model, before simulating
  std::optional<Layout> own;       // the scenario's own layout
};

// `space`: the grid's values; a dimension left empty takes default_space's. Throws InputError
// when the scenario cannot be searched (a sweep block of its own, a strategy without layouts, no
// global batch) or when no layout can run.
SearchPlan plan_search(const scenario::Loader& loader, schema::Json raw, const std::string& file, const SearchSpace& space);

// A sweep (the plan's scenario with a sweep block) over fitting layouts `layouts`, each at its
// global batch `global_batch` (sequences). `screen`: the screening's, one iteration with expected
// routing (the finalists run the scenario's own routing and iterations).
schema::Json sweep_of(const SearchPlan& plan, const std::vector<std::size_t>& layouts, const std::vector<int>& global_batch,
                      bool screen);

// Successive halving's first rung, the screening: every layout runs with few microbatches, twice
// (m1 and 2·m1; m1 = PP, 2·PP under the interleaved schedule, at least 2: the pipeline full and a
// steady state reached, as many microbatches in flight as the whole iteration has), and its
// iteration at its m microbatches is extrapolated as a line through the two (1F1B and its
// interleaved form repeat one steady-state step per microbatch; warm-up, cool-down, the gradient
// reduction and the optimizer step are the intercept). A layout of at most 2·m1 microbatches runs
// whole once.
struct Screening {
  std::vector<std::size_t> layout;  // per point: the fitting layout
  std::vector<int> global_batch;    // per point
  std::vector<int> microbatches;    // per point
};
Screening screening(const SearchPlan& plan);

// One run's figures, as a sweep's results.csv row gives them.
struct Figures {
  bool ok = false;
  double tokens_per_second = 0, iteration_ms = 0, peak_memory_bytes = 0;
  std::string note;  // why it was refused
};
// The rows of a sweep's results.csv, by point.
std::vector<Figures> read_rows(const std::filesystem::path& csv, std::size_t points);

// Each fitting layout's figures at its full global batch from the screening's rows: extrapolated
// iteration time (see Screening), throughput from the tokens of the full batch, peak memory as run.
std::vector<Figures> extrapolate(const SearchPlan& plan, const Screening& screen, const std::vector<Figures>& rows);

struct Ranked {
  std::size_t layout = 0;  // into plan.fitting
  Figures figures;
  bool in_full = false;    // simulated at the full global batch (else extrapolated from the screening)
  double screened_tokens_per_second = 0;  // the screening's figure
};
struct Ranking {
  std::vector<Ranked> ranked;      // fastest first (ties: less memory, then layout order)
  std::vector<Refusal> failed;     // fitting layouts whose runs were refused
  std::optional<std::size_t> own;  // the scenario's own layout's place in `ranked` (0: first)
};
// The finalists (fitting layouts run in full, `final_rows` their sweep's rows in that order) on their
// full figures, then every other layout on its screening's.
Ranking rank(const SearchPlan& plan, const std::vector<Figures>& screened, const std::vector<std::size_t>& finalists,
             const std::vector<Figures>& final_rows);
// The `count` layouts of best screened throughput, and the scenario's own among them.
std::vector<std::size_t> finalists(const SearchPlan& plan, const std::vector<Figures>& screened, std::size_t count);

// The scenario of one layout: `raw` (a scenario without a sweep block) with the layout's paths set.
schema::Json with_layout(schema::Json raw, const Layout& layout, const std::string& file);

// refused.csv: every layout set aside before simulating (`plan`) or refused when run (`failed`),
// with the reason; written before the sweep runs, and again with the ranking.
std::string refused_csv(const SearchPlan& plan, const std::vector<Refusal>& failed);

// The files beside the sweep's CSV: ranked.csv (every ranked layout with its figures), refused.csv
// (every layout set aside, and why) and best.json (the fastest layout's scenario).
void write_ranking(const SearchPlan& plan, const Ranking& ranking, const std::string& file, const std::filesystem::path& out);

}  // namespace moesim::search
