// `moesim import hf CONFIG.json [--name NAME] [-o MODEL.json]`: a Hugging Face config.json of an MoE
// model as a moesim model object (sim/scenario/hf_config.hpp), printed or written to MODEL.json (a
// file for models/, or the "model" of a scenario).
#pragma once

#include <string>
#include <vector>

namespace moesim::cli {

// Exit codes as the other commands: 0 done, 2 bad input (nothing written).
int cmd_import(const std::vector<std::string>& args);

}  // namespace moesim::cli
