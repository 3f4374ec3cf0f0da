// Sweep grids: expansion order and JSON path assignment.
#include <gtest/gtest.h>

#include "sim/core/error.hpp"
#include "sim/sweep/grid.hpp"
#include "sim/sweep/runner.hpp"
#include "test_support.hpp"

using namespace moesim;
using schema::Json;

TEST(SweepGrid, FirstAxisVariesSlowest) {
  const auto axes = sweep::parse_axes(Json::parse(
      R"({"axes": [{"path": "a", "values": [1, 2]}, {"path": "b", "values": ["x", "y", "z"]}]})"), "s.json");
  EXPECT_EQ(sweep::point_count(axes), 6u);
  EXPECT_EQ(sweep::point_values(axes, 0), (std::vector<Json>{1, "x"}));
  EXPECT_EQ(sweep::point_values(axes, 2), (std::vector<Json>{1, "z"}));
  EXPECT_EQ(sweep::point_values(axes, 4), (std::vector<Json>{2, "y"}));
}

TEST(SweepGrid, SetPathReachesArraysAndNewLeaves) {
  Json doc = Json::parse(R"({"cluster": {"levels": [{"bandwidth": "1Gbps"}, {"bandwidth": "2Gbps"}]}, "model": {}})");
  sweep::set_path(doc, "cluster.levels[1].bandwidth", "40Gbps", "s.json", "$.sweep.axes[0].path");
  sweep::set_path(doc, "model.experts", 64, "s.json", "$.sweep.axes[1].path");
  EXPECT_EQ(doc["cluster"]["levels"][1]["bandwidth"], "40Gbps");
  EXPECT_EQ(doc["model"]["experts"], 64);
}

TEST(SweepGrid, BadPathsNameTheAxis) {
  Json doc = Json::parse(R"({"cluster": {"levels": [{"bandwidth": "1Gbps"}]}})");
  try {
    sweep::set_path(doc, "cluster.levels[3].bandwidth", "1Gbps", "s.json", "$.sweep.axes[0].path");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "$.sweep.axes[0].path");
    EXPECT_NE(e.problem().find("past the end"), std::string::npos);
  }
  EXPECT_THROW(sweep::set_path(doc, "nothere.x", 1, "s.json", "$.sweep.axes[0].path"), InputError);
}

// A zipped axis is one grid dimension whose paths move together; mixed with plain axes, the first
// axis still varies slowest. Axes: plain a (2 values) x zipped (b, c) (3 values) x plain d (2
// values) = 2 x 3 x 2 = 12 points; point p has a = p / 6, zipped value (p / 2) % 3, d = p % 2.
TEST(SweepGrid, ZippedAxisIsOneDimensionMixedWithPlainAxes) {
  const auto axes = sweep::parse_axes(Json::parse(R"({"axes": [
      {"path": "a", "values": [1, 2]},
      {"paths": ["b", "c"], "values": [[10, 80], [100, 800], [1000, 8000]]},
      {"path": "d", "values": ["x", "y"]}]})"),
                                      "s.json");
  ASSERT_EQ(axes.size(), 3u);
  EXPECT_FALSE(axes[0].zipped);
  EXPECT_TRUE(axes[1].zipped);
  EXPECT_EQ(axes[1].paths, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(sweep::point_count(axes), 12u);
  // One column per path, in axis order, the zipped paths in the order given.
  EXPECT_EQ(sweep::column_paths(axes), (std::vector<std::string>{"a", "b", "c", "d"}));
  const std::vector<std::vector<Json>> expected{
      {1, 10, 80, "x"},   {1, 10, 80, "y"},   {1, 100, 800, "x"},   {1, 100, 800, "y"},
      {1, 1000, 8000, "x"}, {1, 1000, 8000, "y"}, {2, 10, 80, "x"},   {2, 10, 80, "y"},
      {2, 100, 800, "x"}, {2, 100, 800, "y"}, {2, 1000, 8000, "x"}, {2, 1000, 8000, "y"}};
  for (std::size_t p = 0; p < expected.size(); ++p) EXPECT_EQ(sweep::point_values(axes, p), expected[p]) << "point " << p;
  EXPECT_EQ(sweep::point_indices(axes, 7), (std::vector<std::size_t>{1, 0, 1}));
  EXPECT_EQ(axes[1].value_where(1, 2, 1), "$.sweep.axes[1].values[2][1]");
  EXPECT_EQ(axes[1].path_where(1, 1), "$.sweep.axes[1].paths[1]");
  EXPECT_EQ(axes[0].value_where(0, 1, 0), "$.sweep.axes[0].values[1]");
  EXPECT_EQ(axes[0].path_where(0, 0), "$.sweep.axes[0].path");
}

TEST(SweepGrid, ZippedAxisAloneMatchesItsValues) {
  const auto axes =
      sweep::parse_axes(Json::parse(R"({"axes": [{"paths": ["x"], "values": [[1], [2]]}]})"), "s.json");
  EXPECT_EQ(sweep::point_count(axes), 2u);
  EXPECT_EQ(sweep::point_values(axes, 1), (std::vector<Json>{2}));
}

namespace {

// The InputError parse_axes throws for the sweep block `text`.
InputError axes_error(const std::string& text) {
  try {
    sweep::parse_axes(Json::parse(text), "s.json");
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << text;
  return InputError("", "", "", "");
}

}  // namespace

TEST(SweepGrid, ZippedAxisShapeErrorsNameTheExactJsonPath) {
  // A value with 3 entries for 2 paths.
  InputError e = axes_error(R"({"axes": [{"path": "a", "values": [1]},
      {"paths": ["b", "c"], "values": [[1, 2], [3, 4], [5, 6, 7]]}]})");
  EXPECT_EQ(e.file(), "s.json");
  EXPECT_EQ(e.path(), "$.sweep.axes[1].values[2]");
  EXPECT_NE(e.problem().find("has 3 entries but \"paths\" names 2"), std::string::npos) << e.what();
  EXPECT_NE(e.fix().find("\"b\", \"c\""), std::string::npos) << e.what();
  // A value that is not an array.
  e = axes_error(R"({"axes": [{"paths": ["b", "c"], "values": [[1, 2], 3]}]})");
  EXPECT_EQ(e.path(), "$.sweep.axes[0].values[1]");
  EXPECT_NE(e.problem().find("expected an array of 2"), std::string::npos) << e.what();
  // Both forms on one axis, and neither.
  e = axes_error(R"({"axes": [{"path": "a", "paths": ["a"], "values": [[1]]}]})");
  EXPECT_EQ(e.path(), "$.sweep.axes[0]");
  EXPECT_NE(e.problem().find("both \"path\" and \"paths\""), std::string::npos) << e.what();
  e = axes_error(R"({"axes": [{"values": [1]}]})");
  EXPECT_EQ(e.path(), "$.sweep.axes[0].path");
  EXPECT_NE(e.problem().find("missing"), std::string::npos) << e.what();
  // "paths" empty, or naming something else than strings.
  e = axes_error(R"({"axes": [{"paths": [], "values": [[1]]}]})");
  EXPECT_EQ(e.path(), "$.sweep.axes[0].paths");
  e = axes_error(R"({"axes": [{"paths": ["a", 3], "values": [[1, 2]]}]})");
  EXPECT_EQ(e.path(), "$.sweep.axes[0].paths[1]");
  e = axes_error(R"({"axes": [{"paths": "a", "values": [[1]]}]})");
  EXPECT_EQ(e.path(), "$.sweep.axes[0].paths");
  // A path varied twice: two CSV columns of one name, and points overriding their own values.
  e = axes_error(R"({"axes": [{"path": "a", "values": [1]}, {"paths": ["b", "a"], "values": [[1, 2]]}]})");
  EXPECT_EQ(e.path(), "$.sweep.axes[1].paths[1]");
  EXPECT_NE(e.problem().find("already varied at $.sweep.axes[0].path"), std::string::npos) << e.what();
  e = axes_error(R"({"axes": [{"paths": ["b", "b"], "values": [[1, 2]]}]})");
  EXPECT_EQ(e.path(), "$.sweep.axes[0].paths[1]");
}

// The scenarios of a plan: every path of a zipped value is set at its point (DC count and expert
// count moving together, 8 experts per DC), crossed with a plain axis. 2 x 3 = 6 points.
constexpr const char* kZippedScenario = R"({
  "name": "zip",
  "cluster": {"gpu": "h100-sxm5-80gb", "levels": [
      {"name": "dc", "count": 2, "bandwidth": "10Gbps", "latency": "5ms"},
      {"name": "gpu", "count": 8, "bandwidth": "450GB/s", "latency": "2us"}]},
  "model": {"preset": "gpt-medium-moe"},
  "training": {"sequence_length": 1024},
  "strategy": {"name": "ep"},
  "sweep": {"axes": [
      {"path": "training.sequence_length", "values": [512, 1024]},
      {"paths": ["cluster.levels[0].count", "model.experts"], "values": [[1, 8], [2, 16], [4, 32]]}]}
})";

TEST(SweepPlan, ZippedValueSetsEveryPath) {
  const auto loader = test::loader();
  const Json resolved = loader.resolve(Json::parse(kZippedScenario), "zip.json");
  const auto plan = sweep::plan_sweep(loader, resolved, "zip.json");
  EXPECT_EQ(plan.axis_paths,
            (std::vector<std::string>{"training.sequence_length", "cluster.levels[0].count", "model.experts"}));
  ASSERT_EQ(plan.scenarios.size(), 6u);
  ASSERT_EQ(plan.values.size(), 6u);
  const int seq[] = {512, 1024};
  const unsigned dcs[] = {1, 2, 4};
  for (std::size_t p = 0; p < 6; ++p) {
    const auto& s = plan.scenarios[p];
    EXPECT_EQ(s.training.sequence_length, seq[p / 3]) << "point " << p;
    EXPECT_EQ(s.levels.at(0).count, dcs[p % 3]) << "point " << p;
    EXPECT_EQ(s.model.experts, static_cast<int>(8 * dcs[p % 3])) << "point " << p;
    EXPECT_EQ(plan.values[p], (std::vector<Json>{seq[p / 3], dcs[p % 3], 8 * dcs[p % 3]})) << "point " << p;
  }
}

// A value the scenario refuses, on a zipped axis, is blamed at its own entry: 0 experts is out of
// range at $.sweep.axes[1].values[2][1].
TEST(SweepPlan, InvalidZippedValueNamesItsEntry) {
  Json doc = Json::parse(kZippedScenario);
  doc["sweep"]["axes"][1]["values"][2] = Json::array({4, 0});
  const auto loader = test::loader();
  try {
    sweep::plan_sweep(loader, loader.resolve(doc, "zip.json"), "zip.json");
    FAIL() << "0 experts accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "$.sweep.axes[1].values[2][1]");
    EXPECT_NE(e.problem().find("sets model.experts to 0 (with cluster.levels[0].count = 4)"), std::string::npos) << e.what();
    EXPECT_NE(e.problem().find("out of range"), std::string::npos) << e.what();
  }
}
