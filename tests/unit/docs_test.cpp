// Every option of the schema is documented: each key that a scenario, a strategy or a GPU kind
// accepts appears, in backquotes, in docs/scenario.md (docs/presets.md for GPU kinds). A new
// option without a line of documentation fails here. The README quotes docs/validation.md as it is.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "sim/scenario/scenario_schema.hpp"
#include "sim/strategies/registry.hpp"

using namespace moesim;

namespace {

std::string read_doc(const char* name) {
  std::ifstream in(std::filesystem::path(MOESIM_SOURCE_DIR) / "docs" / name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every key of the schema, with the path where it sits (for the failure message).
void collect(const schema::Node& n, const std::string& path, std::set<std::pair<std::string, std::string>>& keys) {
  if (n.type == schema::Type::Object)
    for (const auto& f : n.fields) {
      if (path == "$" && f.key == "gpus") {  // GPU kinds: docs/presets.md, checked below
        keys.insert({f.key, path + "." + f.key});
        continue;
      }
      keys.insert({f.key, path + "." + f.key});
      collect(*f.node, path + "." + f.key, keys);
    }
  if ((n.type == schema::Type::Map || n.type == schema::Type::Array) && n.items) collect(*n.items, path + "[]", keys);
}

void expect_documented(const schema::NodePtr& schema, const std::string& root, const std::string& doc, const char* doc_name) {
  std::set<std::pair<std::string, std::string>> keys;
  collect(*schema, root, keys);
  ASSERT_GT(keys.size(), 3u);
  for (const auto& [key, path] : keys)
    EXPECT_NE(doc.find("`" + key + "`"), std::string::npos) << path << " is not documented in docs/" << doc_name;
}

}  // namespace

TEST(Docs, EveryScenarioOptionIsInTheScenarioReference) {
  const std::string doc = read_doc("scenario.md");
  expect_documented(scenario::scenario_schema(), "$", doc, "scenario.md");
  // routing.sampling was the newcomer's stumbling point: an option the docs did not name.
  EXPECT_NE(doc.find("`sampling`"), std::string::npos);
}

TEST(Docs, EveryStrategyOptionIsInTheScenarioReference) {
  const std::string doc = read_doc("scenario.md");
  for (const auto& info : strategies::registry()) {
    EXPECT_NE(doc.find("## strategy `" + info.name + "`"), std::string::npos) << info.name << " has no section";
    expect_documented(info.options, "$.strategy(" + info.name + ")", doc, "scenario.md");
  }
}

TEST(Docs, EveryGpuKindFieldIsInThePresetReference) {
  expect_documented(scenario::gpu_schema(), "$.gpus.KIND", read_doc("presets.md"), "presets.md");
}

TEST(Docs, TheReadmeQuotesTheArchiveAsDocsValidationHasIt) {
  // The README's figures for realdata 24 are docs/validation.md's (which `make validate` writes):
  // the row count, the mean |error| to a tenth and the rows within 15 %.
  std::ifstream in(std::filesystem::path(MOESIM_SOURCE_DIR) / "README.md");
  std::stringstream readme;
  readme << in.rdbuf();
  std::string text = readme.str();
  for (char& ch : text)
    if (ch == '\n') ch = ' ';
  std::smatch quoted, generated;
  const std::string validation = read_doc("validation.md");
  ASSERT_TRUE(std::regex_search(text, quoted, std::regex(R"(\((\d+) rows: mean \|error\| ([\d.]+) %, (\d+) within 15 %)")));
  ASSERT_TRUE(std::regex_search(validation, generated, std::regex(R"(Mean \|error\| ([\d.]+)% over (\d+) rows; (\d+) within 15%)")));
  EXPECT_EQ(quoted[1], generated[2]);
  EXPECT_EQ(quoted[2], generated[1]);
  EXPECT_EQ(quoted[3], generated[3]);
}
