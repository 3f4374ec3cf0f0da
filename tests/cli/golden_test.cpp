// Golden scenarios: each tests/golden/NAME.json names a scenario and pins values of its
// results.json (by JSON pointer). A change that moves them fails here until it is re-pinned with
// scripts/update-golden.py and the commit says why.
#include <cmath>

#include "cli_test_support.hpp"

namespace moesim_cli {
namespace {

class Golden : public CliTest {};

TEST_F(Golden, PinnedResultsHold) {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "tests" / "golden")) {
    const Json spec = Json::parse(read_text(entry.path()));
    const fs::path out = root_ / entry.path().stem();
    const Result r = moesim({"run", (kSourceDir / spec.at("scenario").get<std::string>()).string(), "--out",
                             out.string(), "--quiet"});
    ASSERT_EQ(r.code, 0) << entry.path() << describe(r);
    const Json results = Json::parse(read_text(out / "results.json"));
    for (const auto& [ptr, want] : spec.at("pinned").items()) {
      const Json got = results.at(Json::json_pointer(ptr));
      if (want.is_number_float() || got.is_number_float())
        EXPECT_NEAR(got.get<double>(), want.get<double>(), 1e-9 * std::abs(want.get<double>()))
            << entry.path().filename() << " " << ptr;
      else
        EXPECT_EQ(got, want) << entry.path().filename() << " " << ptr;
      ++checked;
    }
  }
  EXPECT_GE(checked, 10);
}

}  // namespace
}  // namespace moesim_cli
