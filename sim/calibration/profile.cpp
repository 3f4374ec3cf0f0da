#include "sim/calibration/profile.hpp"

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::calibration {

namespace sc = moesim::schema;

const sc::NodePtr& profile_schema() {
  static const sc::NodePtr entry = sc::object({
      sc::required("collective", sc::enumeration({"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "overlap"}),
                   "the collective measured (overlap: Parm's all-to-all run together with an all-gather, SAA)"),
      sc::required("group", sc::string(), "the parallel group it ran in, e.g. \"mp\" or \"ep_esp\""),
      sc::required("alpha", sc::time(), "start-up time α of α + β·x"),
      sc::required("beta_s_per_byte", sc::number(0), "β of α + β·x in seconds per byte of x"),
      sc::optional("note", sc::string(), nullptr, "how the value was obtained"),
  });
  static const sc::NodePtr s = sc::object({
      sc::required("name", sc::string(), "the profile's name"),
      sc::required("provenance", sc::object({
                                     sc::required("source", sc::string(), "where the numbers come from"),
                                     sc::optional("hardware", sc::string(), nullptr, "GPUs, links, host"),
                                     sc::optional("software", sc::string(), nullptr, "driver, CUDA, NCCL versions"),
                                     sc::optional("date", sc::string(), nullptr, "when it was measured"),
                                 }),
                   "where the numbers come from"),
      sc::optional("collectives", sc::array_of(entry), sc::Json::array(), "α-β of collectives per parallel group"),
  });
  return s;
}

const CollectiveFit* Profile::find(const std::string& collective, const std::string& group) const {
  for (const auto& c : collectives)
    if (c.collective == collective && c.group == group) return &c;
  return nullptr;
}

Profile parse_profile(const sc::Json& raw, const std::string& file) {
  const sc::Json doc = sc::validate(profile_schema(), raw, file);
  Profile p;
  p.name = doc.at("name").get<std::string>();
  p.file = file;
  p.provenance = doc.at("provenance");
  const auto& list = doc.at("collectives");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& e = list[i];
    CollectiveFit c;
    c.collective = e.at("collective").get<std::string>();
    c.group = e.at("group").get<std::string>();
    c.alpha_s = time_to_seconds(sc::as_time(e.at("alpha")));
    c.beta_s_per_byte = e.at("beta_s_per_byte").get<double>();
    c.note = e.value("note", std::string());
    if (p.find(c.collective, c.group))
      throw InputError(file, fmt::format("$.collectives[{}]", i),
                       fmt::format("a second entry for {} in group \"{}\"", c.collective, c.group),
                       "keep one entry per collective and group");
    p.collectives.push_back(std::move(c));
  }
  return p;
}

}  // namespace moesim::calibration
