// A torchtitan training configuration (its train_configs/*.toml, read by torchtitan/config/
// job_config.py) as the model, parallel, training and software sections of a moesim scenario.
// Each key moesim has a counterpart for is mapped; every other key is returned by name, so that
// the user sees what was not imported (logging, checkpoints, data, the optimizer's rates). What
// the file says and moesim cannot express (a model flavor without a moesim model, a pipeline
// schedule moesim does not run) is refused naming the key and the fix.
#pragma once

#include <string>
#include <vector>

#include "sim/core/schema.hpp"

namespace moesim::scenario {

struct TorchtitanImport {
  schema::Json model;  // {"preset": NAME}: the moesim model of the file's model.name and flavor
  schema::Json parallel = schema::Json::object();
  schema::Json training = schema::Json::object();
  schema::Json software = schema::Json::object();
  std::vector<std::string> not_imported;  // keys moesim has no counterpart for, dotted ("checkpoint.interval")
  // Interleaved1F1B's transformer layers per virtual stage (0: not interleaved): parallel.vp is the
  // model's layers over it and the pipeline stages, once the model is known.
  long long layers_per_stage = 0;
};

// `text`: the TOML file's contents; `source`: what to name as the file in errors.
TorchtitanImport from_torchtitan_toml(const std::string& text, const std::string& source);

}  // namespace moesim::scenario
