// `moesim import`: see import_command.hpp.
#include "sim/cli/import_command.hpp"

#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>
#include <sstream>
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/output_file.hpp"
#include "sim/scenario/hf_config.hpp"

namespace moesim::cli {

namespace po = boost::program_options;

int cmd_import(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "hf") throw po::error("import: expected `import hf CONFIG.json [--name NAME] [-o MODEL.json]`");
  std::string config, name, out;
  po::options_description opts;
  opts.add_options()("config", po::value(&config))("name", po::value(&name))("out,o", po::value(&out));
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end())).options(opts).positional(pos).run(), vm);
  po::notify(vm);
  if (config.empty()) throw po::error("import hf: give the model's config.json");
  std::ifstream in(config);
  if (!in) throw InputError(config, "$", "cannot be read", "give the path of a Hugging Face config.json");
  std::stringstream text;
  text << in.rdbuf();
  schema::Json doc;
  try {
    doc = schema::Json::parse(text.str());
  } catch (const schema::Json::parse_error& e) {
    throw InputError(config, "$", fmt::format("is not JSON ({})", e.what()), "give the model repository's config.json");
  }
  const schema::Json model = scenario::model_from_hf_config(doc, config, name);
  const std::string json = model.dump(2) + "\n";
  if (out.empty()) {
    std::cout << json;
  } else {
    write_file(out, json);
    std::cout << fmt::format("model {} → {}\n", model.value("name", std::string("(unnamed)")), out);
  }
  return 0;
}

}  // namespace moesim::cli
