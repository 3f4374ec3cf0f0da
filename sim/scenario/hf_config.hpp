// A Hugging Face config.json of an MoE model as a moesim model object (a file of models/, or a
// scenario's "model"): the architecture fields each transformers configuration class names
// (MixtralConfig, Qwen2MoeConfig and Qwen3MoeConfig, DeepseekV2Config and DeepseekV3Config,
// GptOssConfig, OlmoeConfig), mapped to the keys of docs/scenario.md's model section. What the
// config says and moesim cannot express (a shared expert whose width is no multiple of the routed experts', MoE layers
// interleaved with dense ones, an activation other than SiLU) is refused, naming the field; what
// it says and training does not depend on (rope_scaling, initializer_range, ...) is ignored.
#pragma once

#include <string>

#include "sim/core/schema.hpp"

namespace moesim::scenario {

// The model object for `config` (the parsed config.json read from `file`), named `name` (empty:
// the config's _name_or_path, else its first architecture), validated against the model schema.
// Throws InputError naming the file and the field.
schema::Json model_from_hf_config(const schema::Json& config, const std::string& file, const std::string& name = {});

}  // namespace moesim::scenario
