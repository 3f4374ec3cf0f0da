// `moesim import`: see import_command.hpp.
#include "sim/cli/import_command.hpp"

#include <boost/program_options.hpp>
#include <algorithm>
#include <filesystem>
#include <fmt/ranges.h>
#include <iostream>
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/core/output_file.hpp"
#include "sim/scenario/hf_config.hpp"
#include "sim/scenario/megatron_args.hpp"
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

// `import megatron --cluster PRESET [--name NAME] [-o SCENARIO.json] [--data DIR] -- ARGS...`: a
// scenario on that cluster whose model, parallel and training sections are the command line's.
int import_megatron(const std::vector<std::string>& args) {
  const auto dash = std::find(args.begin(), args.end(), "--");
  if (dash == args.end())
    throw po::error("import megatron: put the training command's arguments after --, e.g. `import megatron --cluster "
                    "dgx-h100-2node -- --num-layers 48 ...`");
  std::string cluster, name, out, data;
  po::options_description opts;
  opts.add_options()("cluster", po::value(&cluster))("name", po::value(&name))("out,o", po::value(&out))("data", po::value(&data));
  po::variables_map vm;
  po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, dash)).options(opts).run(), vm);
  po::notify(vm);
  if (cluster.empty()) throw po::error("import megatron: give --cluster PRESET (`moesim presets` lists them)");
  const std::vector<std::string> megatron(dash + 1, args.end());
  const scenario::MegatronImport imported = scenario::from_megatron_args(megatron, "the Megatron command line");
  schema::Json doc = schema::Json::object();
  doc["name"] = name.empty() ? "megatron-import" : name;
  doc["description"] = fmt::format("imported by `moesim import megatron` from a Megatron-LM command line of {} arguments",
                                   megatron.size());
  doc["cluster"] = {{"preset", cluster}};
  doc["model"] = imported.model;
  doc["model"]["name"] = doc["name"];
  doc["parallel"] = imported.parallel;
  doc["training"] = imported.training;
  doc["strategy"] = {{"name", "ep"}};
  // What a run would refuse, refused now (nothing written).
  const scenario::Loader loader(data.empty() ? scenario::Loader::default_data_dir() : std::filesystem::path(data));
  const std::string file = out.empty() ? std::string("(the imported scenario)") : out;
  loader.build(loader.resolve(doc, file), file);
  if (!imported.not_imported.empty())
    std::cerr << fmt::format("moesim: not imported (no moesim key): {}\n", fmt::join(imported.not_imported, " "));
  emit(doc, out, "scenario");
  return 0;
}

}  // namespace

int cmd_import(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "megatron") return import_megatron(args);
  if (args.empty() || args[0] != "hf")
    throw po::error("import: expected `import hf CONFIG.json ...` or `import megatron --cluster PRESET -- ARGS...`");
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
