// schema::Options (core/bound_options.hpp): an option declared once gives the schema node that
// validates a document, its default (the struct's own initializer) and the reader that fills the
// struct; and the scenario's sections declared so read what the loader read by hand before.
#include <gtest/gtest.h>

#include <optional>
#include <regex>

#include "sim/core/bound_options.hpp"
#include "sim/core/json_schema.hpp"
#include "sim/scenario/scenario_schema.hpp"
#include "test_support.hpp"

namespace moesim {
namespace {

using schema::Json;

enum class Colour { Red, Green };
inline constexpr auto kColourNames = enum_names<Colour>({{Colour::Red, "red"}, {Colour::Green, "green"}});

struct Inner {
  Time wait = 3 * kMicrosecond;
  int depth = 4;
};

struct Demo {
  int count = 7;
  double rate = 0.25;
  bool on = true;
  std::string label = "plain";
  Colour colour = Colour::Green;
  std::optional<double> scale;  // absent: no default
  Inner inner;
  int sizes[2] = {1, 1};
  Bandwidth link{50e9};
};

const schema::Options<Inner>& inner_options() {
  static const schema::Options<Inner> o({
      schema::unit_option<Inner>("wait", &Inner::wait, schema::time(), "3us", "a wait"),
      schema::option<Inner>("depth", &Inner::depth, schema::integer(1, 16), "a depth"),
  });
  return o;
}

const schema::Options<Demo>& demo_options() {
  static const schema::Options<Demo> o({
      schema::required_option<Demo>("count", &Demo::count, schema::integer(1), "a count").also({"num_count"}),
      schema::option<Demo>("rate", &Demo::rate, schema::number(0, 1), "a rate"),
      schema::option<Demo>("on", &Demo::on, schema::boolean(), "a switch"),
      schema::option<Demo>("label", &Demo::label, schema::string(), "a label"),
      schema::enum_option<Demo>("colour", &Demo::colour, kColourNames, "a colour"),
      schema::option<Demo>("scale", &Demo::scale, schema::number(0), "a scale"),
      schema::section_option<Demo>("inner", &Demo::inner, inner_options(), "the inner section"),
      schema::option<Demo>("second", [](Demo& d) -> int& { return d.sizes[1]; }, schema::integer(1), "a nested member"),
      schema::unit_option<Demo>("link", &Demo::link, schema::bandwidth(), "400Gbps", "a link"),
      schema::declared<Demo>(schema::optional("note", schema::string(), nullptr, "read by hand")),
  });
  return o;
}

TEST(BoundOptions, DefaultsAreTheStructsInitializers) {
  // Validating {"count": 2} writes every default in: each is what a default-constructed Demo holds
  // (400 Gbps = 50 GB/s; Green is "green"); the optional member and the declared key stay absent.
  const Json doc = schema::validate(demo_options().node(), Json{{"count", 2}}, "demo.json");
  EXPECT_EQ(doc.at("rate"), 0.25);
  EXPECT_EQ(doc.at("on"), true);
  EXPECT_EQ(doc.at("label"), "plain");
  EXPECT_EQ(doc.at("colour"), "green");
  EXPECT_EQ(doc.at("second"), 1);
  EXPECT_EQ(doc.at("link"), "400Gbps");
  EXPECT_EQ(doc.at("inner"), (Json{{"wait", "3us"}, {"depth", 4}}));
  EXPECT_FALSE(doc.contains("scale"));
  EXPECT_FALSE(doc.contains("note"));
}

TEST(BoundOptions, ReadFillsEveryBoundMember) {
  const Json doc = schema::validate(demo_options().node(),
                                    Json{{"count", 9}, {"rate", 0.5}, {"on", false}, {"label", "x"}, {"colour", "red"},
                                         {"scale", 2.0}, {"inner", {{"wait", "1.5ms"}}}, {"second", 5}, {"link", "25GB/s"},
                                         {"note", "n"}},
                                    "demo.json");
  Demo d;
  demo_options().read(doc, d);
  EXPECT_EQ(d.count, 9);
  EXPECT_EQ(d.rate, 0.5);
  EXPECT_FALSE(d.on);
  EXPECT_EQ(d.label, "x");
  EXPECT_EQ(d.colour, Colour::Red);
  ASSERT_TRUE(d.scale.has_value());
  EXPECT_EQ(*d.scale, 2.0);
  EXPECT_EQ(d.inner.wait, 1500 * kMicrosecond);  // 1.5 ms in picoseconds
  EXPECT_EQ(d.inner.depth, 4);                   // the nested section's default
  EXPECT_EQ(d.sizes[1], 5);
  EXPECT_EQ(d.sizes[0], 1);                      // not an option: untouched
  EXPECT_EQ(d.link.bytes_per_second, 25e9);
}

// A nested object whose keys fill members of the enclosing struct (schema::itself), and one
// filling a std::optional member: absent, neither touches the struct; written, they fill it (the
// optional engaged, its own defaults written in).
struct Outer {
  int low = 1, high = 2;
  std::optional<Inner> extra;
};

TEST(BoundOptions, NestedKeysFillTheEnclosingStructOrAnOptionalSection) {
  static const schema::Options<Outer> range({
      schema::required_option<Outer>("low", &Outer::low, schema::integer(0), "low end"),
      schema::option<Outer>("high", &Outer::high, schema::integer(0), "high end"),
  });
  static const schema::Options<Outer> o({
      schema::section_option<Outer>("range", schema::itself, range, "the range", Json()),
      schema::section_option<Outer>("extra", &Outer::extra, inner_options(), "an optional section", Json()),
  });
  const Json absent = schema::validate(o.node(), Json::object(), "o.json");
  EXPECT_EQ(absent, Json::object());  // no default written for either
  Outer a;
  o.read(absent, a);
  EXPECT_EQ(a.low, 1);
  EXPECT_EQ(a.high, 2);
  EXPECT_FALSE(a.extra.has_value());

  const Json given = schema::validate(o.node(), Json{{"range", {{"low", 5}}}, {"extra", {{"depth", 9}}}}, "o.json");
  Outer b;
  o.read(given, b);
  EXPECT_EQ(b.low, 5);
  EXPECT_EQ(b.high, 2);  // the nested default, written in by the schema
  ASSERT_TRUE(b.extra.has_value());
  EXPECT_EQ(b.extra->depth, 9);
  EXPECT_EQ(b.extra->wait, 3 * kMicrosecond);
  // A nested section's required key is required once the section is written.
  EXPECT_THROW(schema::validate(o.node(), Json{{"range", {{"high", 3}}}}, "o.json"), InputError);
}

TEST(BoundOptionsDeathTest, ATimeIsNeverReadIntoADouble) {
  // A double member read from a time would hold picoseconds where the code reads seconds: the
  // declaration is refused when it is made (a defect of the program, not of an input).
  EXPECT_DEATH(schema::required_option<Demo>("rate", &Demo::rate, schema::time(), "a rate"), "does not fit");
}

TEST(BoundOptionsDeathTest, ASpelledDefaultIsTheInitializer) {
  EXPECT_DEATH(schema::unit_option<Inner>("wait", &Inner::wait, schema::time(), "4us", "a wait"), "initializer");
}

TEST(BoundOptions, AnotherFrameworksNameIsRefusedWithTheKey) {
  try {
    schema::validate(demo_options().node(), Json{{"num_count", 2}}, "demo.json");
    ADD_FAILURE() << "accepted num_count";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "$.num_count");
    EXPECT_TRUE(e.fix().starts_with("moesim calls it \"count\"")) << e.what();
  }
}

TEST(BoundOptions, SynonymsOfTheScenarioComeFromItsDeclarations) {
  // Megatron-Core's, Hugging Face's and torchtitan's names, each declared beside the key it means.
  const auto name = [](const char* foreign) {
    const std::string* ours = scenario::moesim_name_of(foreign);
    return ours ? *ours : std::string("-");
  };
  EXPECT_EQ(name("num_experts_per_tok"), "top_k");
  EXPECT_EQ(name("n_routed_experts"), "experts");
  EXPECT_EQ(name("tensor_model_parallel_size"), "tp");
  EXPECT_EQ(name("decoder_last_pipeline_num_layers"), "last_stage_layers");
  EXPECT_EQ(name("seq_length"), "sequence_length");
  EXPECT_EQ(name("dim"), "hidden");
  EXPECT_EQ(name("no_such_name"), "-");
}

TEST(BoundOptions, UnitPatternsAcceptWhatTheParserAccepts) {
  // JSON Schema's pattern for times against moesim's parser, on what users write.
  const std::regex time(schema::unit_pattern(UnitKind::Time), std::regex::ECMAScript);
  for (const char* ok : {"5us", "5 us", " 0.5ms ", ".5ms", "1e3ns", "2.s", "1min"}) {
    EXPECT_TRUE(parse_time(ok).has_value()) << ok;
    EXPECT_TRUE(std::regex_search(ok, time)) << ok;
  }
  for (const char* bad : {"5", "-5us", "5 parsecs", "us", "5usec", "+5us"}) {
    EXPECT_FALSE(parse_time(bad).has_value()) << bad;
    EXPECT_FALSE(std::regex_search(bad, time)) << bad;
  }
  const std::regex bw(schema::unit_pattern(UnitKind::Bandwidth), std::regex::ECMAScript);
  EXPECT_TRUE(std::regex_search("400Gbps", bw));
  EXPECT_TRUE(std::regex_search("50 GB/s", bw));
  EXPECT_FALSE(std::regex_search("50GBps", bw));
}

TEST(BoundOptions, JsonSchemaStatesTypesBoundsChoicesAndDefaults) {
  const Json s = schema::to_json_schema(*demo_options().node());
  EXPECT_EQ(s.at("type"), "object");
  EXPECT_EQ(s.at("additionalProperties"), false);
  EXPECT_EQ(s.at("required"), Json::array({"count"}));
  const Json& p = s.at("properties");
  EXPECT_EQ(p.at("count").at("type"), "integer");
  EXPECT_EQ(p.at("count").at("minimum"), 1);
  EXPECT_EQ(p.at("rate").at("maximum"), 1);
  EXPECT_EQ(p.at("colour").at("enum"), Json::array({"red", "green"}));
  EXPECT_EQ(p.at("colour").at("default"), "green");
  EXPECT_EQ(p.at("inner").at("properties").at("wait").at("type"), "string");
  EXPECT_EQ(p.at("rate").at("description"), "a rate");
  EXPECT_FALSE(p.at("scale").contains("default"));
}

}  // namespace
}  // namespace moesim
