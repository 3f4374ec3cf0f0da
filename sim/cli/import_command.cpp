// `moesim import`: see import_command.hpp.
#include "sim/cli/import_command.hpp"

#include <boost/program_options.hpp>
#include <algorithm>
#include <filesystem>
#include <fmt/ranges.h>
#include <iostream>
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/input_file.hpp"
#include "sim/core/json_input.hpp"
#include "sim/core/output_file.hpp"
#include "sim/scenario/hf_config.hpp"
#include "sim/scenario/megatron_config.hpp"
#include "sim/scenario/torchtitan_config.hpp"
#include "sim/scenario/scenario.hpp"

namespace moesim::cli {

namespace po = boost::program_options;

namespace {

// Prints `doc` or writes it whole to `out` (saying so on stdout).
void emit(const schema::Json& doc, const std::string& out, const std::string& what) {
  const std::string json = doc.dump(2) + "\n";
  if (out.empty()) {
    std::cout << json;
  } else {
    write_file(out, json);
    std::cout << fmt::format("{} {} → {}\n", what, doc.value("name", std::string("(unnamed)")), out);
  }
}

// An imported scenario: what the loader refuses (schema, presets, a dtype the GPUs lack) refused now
// (nothing written, one line said; the layout against the cluster and the memory are `moesim
// validate`'s); what was approximated and the keys that had no moesim counterpart listed on stderr;
// then printed or written.
int finish_import(const schema::Json& doc, const scenario::Loader& loader, const std::string& out,
                  const std::vector<std::string>& not_imported, const std::vector<std::string>& approximated = {}) {
  const std::string file = out.empty() ? std::string("(the imported scenario)") : out;
  loader.build(loader.resolve(doc, file), file);
  for (const auto& line : approximated) std::cerr << "moesim: approximated: " << line << "\n";
  if (!not_imported.empty()) std::cerr << fmt::format("moesim: not imported (no moesim key): {}\n", fmt::join(not_imported, " "));
  emit(doc, out, "scenario");
  return 0;
}

// --cluster: a cluster preset's name, or a file holding a scenario's cluster section (CLUSTER.json).
schema::Json cluster_of(const std::string& cluster) {
  if (cluster.ends_with(".json")) return read_json_file(cluster);
  return {{"preset", cluster}};
}

scenario::Loader loader_of(const std::string& data) {
  return scenario::Loader(data.empty() ? scenario::Loader::default_data_dir() : std::filesystem::path(data));
}

// `import megatron [CONFIG.yaml] --cluster PRESET|CLUSTER.json [--model PRESET] [--software PRESET] [--name NAME]
// [-o SCENARIO.json] [--data DIR] [-- ARGS...]`: a scenario on that cluster whose model, parallel,
// training, software and routing sections are a Megatron-Bridge ConfigContainer's (YAML) or a
// Megatron-LM command line's; the model a preset when --model names one (the configuration's shape,
// where it gives one, must agree with it); the software that preset's (a Megatron-Bridge release,
// `moesim presets`) with the configuration's switches over it.
int import_megatron(const std::vector<std::string>& args) {
  const auto dash = std::find(args.begin(), args.end(), "--");
  std::string config, cluster, model, software, name, out, data;
  po::options_description opts;
  opts.add_options()("config", po::value(&config))("cluster", po::value(&cluster))("model", po::value(&model))(
      "software", po::value(&software))("name", po::value(&name))("out,o", po::value(&out))("data", po::value(&data));
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, dash)).options(opts).positional(pos).run(), vm);
  po::notify(vm);
  if (config.empty() == (dash == args.end()))
    throw po::error("import megatron: give a Megatron-Bridge configuration (CONFIG.yaml) or a Megatron-LM command line after --, "
                    "e.g. `import megatron run_config.yaml --cluster dgx-h100-2node` or `import megatron --cluster "
                    "dgx-h100-2node -- --num-layers 48 ...`");
  if (cluster.empty()) throw po::error("import megatron: give --cluster PRESET (`moesim presets` lists them)");
  const scenario::Loader loader = loader_of(data);
  scenario::MegatronImportOptions options;
  if (!model.empty()) {
    schema::Json probe = {{"name", "probe"}, {"cluster", cluster_of(cluster)}, {"model", {{"preset", model}}}, {"strategy", {{"name", "ep"}}}};
    options.preset = loader.resolve(probe, "--model").at("model");
    options.preset_name = model;
  }
  const std::vector<std::string> megatron(dash == args.end() ? dash : dash + 1, args.end());
  const scenario::MegatronImport imported =
      config.empty() ? scenario::from_megatron_args(megatron, "the Megatron command line", options)
                     : scenario::from_megatron_bridge_config(read_input_file(config), config, options);
  schema::Json doc = schema::Json::object();
  doc["name"] = !name.empty() ? name : !config.empty() ? std::filesystem::path(config).stem().string() : "megatron-import";
  doc["description"] = config.empty()
                           ? fmt::format("imported by `moesim import megatron` from a Megatron-LM command line of {} arguments", megatron.size())
                           : fmt::format("imported by `moesim import megatron` from {}", std::filesystem::path(config).filename().string());
  doc["cluster"] = cluster_of(cluster);
  doc["model"] = imported.model;
  if (model.empty()) doc["model"]["name"] = doc["name"];
  doc["parallel"] = imported.parallel;
  doc["training"] = imported.training;
  if (!imported.software.empty() || !software.empty()) doc["software"] = imported.software;
  if (!software.empty()) doc["software"]["preset"] = software;
  if (!imported.routing.empty()) doc["routing"] = imported.routing;
  doc["strategy"] = {{"name", "ep"}};
  return finish_import(doc, loader, out, imported.not_imported, imported.approximated);
}

// `import torchtitan CONFIG.toml --cluster PRESET [--name NAME] [-o SCENARIO.json] [--data DIR]`: a
// scenario on that cluster whose model, parallel, training and software sections are the file's.
int import_torchtitan(const std::vector<std::string>& args) {
  std::string config, cluster, name, out, data;
  po::options_description opts;
  opts.add_options()("config", po::value(&config))("cluster", po::value(&cluster))("name", po::value(&name))(
      "out,o", po::value(&out))("data", po::value(&data));
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end())).options(opts).positional(pos).run(), vm);
  po::notify(vm);
  if (config.empty()) throw po::error("import torchtitan: give the training configuration (train_configs/*.toml)");
  if (cluster.empty()) throw po::error("import torchtitan: give --cluster PRESET (`moesim presets` lists them)");
  const scenario::TorchtitanImport imported = scenario::from_torchtitan_toml(read_input_file(config), config);
  schema::Json doc = schema::Json::object();
  doc["name"] = name.empty() ? std::filesystem::path(config).stem().string() : name;
  doc["description"] = fmt::format("imported by `moesim import torchtitan` from {}", std::filesystem::path(config).filename().string());
  doc["cluster"] = {{"preset", cluster}};
  doc["model"] = imported.model;
  doc["parallel"] = imported.parallel;
  doc["training"] = imported.training;
  doc["software"] = imported.software;
  doc["strategy"] = {{"name", "ep"}};
  const scenario::Loader loader = loader_of(data);
  if (imported.layers_per_stage > 0) {  // Interleaved1F1B: the model's layers over stages of that many
    const long long layers = loader.resolve(doc, config).at("model").at("layers").get<long long>();
    const long long pp = imported.parallel.at("pp").get<long long>();
    if (layers % (imported.layers_per_stage * pp))
      throw InputError(config, "parallelism.pipeline_parallel_layers_per_stage",
                       fmt::format("is {}: the model's {} layers do not split into stages of it over {} pipeline ranks",
                                   imported.layers_per_stage, layers, pp),
                       "give a divisor of the layers per pipeline rank");
    doc["parallel"]["vp"] = layers / (imported.layers_per_stage * pp);
  }
  return finish_import(doc, loader, out, imported.not_imported);
}

}  // namespace

int cmd_import(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "megatron") return import_megatron(args);
  if (!args.empty() && args[0] == "torchtitan") return import_torchtitan(args);
  if (args.empty() || args[0] != "hf")
    throw po::error("import: expected `import hf CONFIG.json ...`, `import megatron CONFIG.yaml --cluster PRESET`, `import "
                    "megatron --cluster PRESET -- ARGS...` or `import torchtitan CONFIG.toml --cluster PRESET`");
  std::string config, name, out;
  po::options_description opts;
  opts.add_options()("config", po::value(&config))("name", po::value(&name))("out,o", po::value(&out));
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end())).options(opts).positional(pos).run(), vm);
  po::notify(vm);
  if (config.empty()) throw po::error("import hf: give the model's config.json");
  emit(scenario::model_from_hf_config(read_json_file(config), config, name), out, "model");
  return 0;
}

}  // namespace moesim::cli
