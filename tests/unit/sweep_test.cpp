// Sweep grids: expansion order and JSON path assignment.
#include <gtest/gtest.h>

#include "sim/core/error.hpp"
#include "sim/sweep/grid.hpp"

using namespace moesim;
using schema::Json;

TEST(SweepGrid, FirstAxisVariesSlowest) {
  const auto axes = sweep::parse_axes(Json::parse(
      R"({"axes": [{"path": "a", "values": [1, 2]}, {"path": "b", "values": ["x", "y", "z"]}]})"));
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
