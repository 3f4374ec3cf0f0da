// A calibration profile: cost parameters measured on a real cluster (or read from a paper), with
// where they come from. Scenarios name one ("calibration": "calibrations/NAME.json"). So far it
// carries α-β entries of collectives per parallel group, which Parm's Algorithm 1 (seed 003 §V)
// reads; entries a consumer does not find fall back to its defaults, and results say which were
// used. File format (docs/scenario.md):
//   {"name": ..., "provenance": {"source": ..., ...},
//    "collectives": [{"collective": "all_gather", "group": "mp", "alpha": "664us",
//                     "beta_s_per_byte": 1.345e-10, "note": ...}, ...]}
#pragma once

#include <string>
#include <vector>

#include "sim/core/schema.hpp"

namespace moesim::calibration {

struct CollectiveFit {
  std::string collective;  // all_gather, all_reduce, reduce_scatter, all_to_all, overlap (Parm's SAA)
  std::string group;       // the parallel group it was measured in, e.g. "mp", "ep_esp"
  double alpha_s = 0;      // seconds
  double beta_s_per_byte = 0;
  std::string note;
};

struct Profile {
  std::string name;
  std::string file;
  schema::Json provenance;
  std::vector<CollectiveFit> collectives;

  const CollectiveFit* find(const std::string& collective, const std::string& group) const;
};

const schema::NodePtr& profile_schema();
// Validates a profile document read from `file`; throws InputError naming the file and field.
Profile parse_profile(const schema::Json& doc, const std::string& file);

}  // namespace moesim::calibration
