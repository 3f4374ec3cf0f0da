// A Megatron-LM / Megatron-Core training command line (pretrain_gpt.py's arguments,
// megatron/training/arguments.py) as the model, parallel and training sections of a moesim
// scenario. Each flag moesim has a key for is mapped; the others are returned by name, so that the
// user sees what was not imported (logging, checkpoints, data, kernels moesim's software section
// says otherwise). What a flag says and moesim cannot express (MoE layers between dense ones other
// than leading, a shared expert whose width is no multiple of the experts') is refused naming the flag.
#pragma once

#include <string>
#include <vector>

#include "sim/core/schema.hpp"

namespace moesim::scenario {

struct MegatronImport {
  schema::Json model = schema::Json::object();
  schema::Json parallel = schema::Json::object();
  schema::Json training = schema::Json::object();
  std::vector<std::string> not_imported;  // flags moesim has no key for, as given ("--log-interval")
};

// `args`: the command line's flags and values, as a shell splits them ("--num-layers", "48",
// "--bf16", ...). Throws InputError naming the flag (`source`: what to name as the file).
MegatronImport from_megatron_args(const std::vector<std::string>& args, const std::string& source);

}  // namespace moesim::scenario
