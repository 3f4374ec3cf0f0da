// Options declared once and bound to the typed struct they fill, as ns-3's attributes
// (TypeId::AddAttribute: name, help, initial value, accessor, checker) and SimGrid's Flag do. One
// declaration holds an option's key, its schema node (type, unit, bounds), its default, its help,
// other frameworks' names for it, and the member it fills. The object schema that validates a
// document (and everything derived from the schema: the JSON Schema file, the docs check, the
// importers' names) and the reader that fills the struct both come from it.
//
// The default is the struct's own member initializer (a default-constructed T), written into the
// schema as JSON; a std::optional member has none (the key stays absent). A unit value's default is
// spelled as the user writes it ("0us"), and the spelling is checked against the initializer when
// the options are declared. An option declared without a member (`declared`) is read by its
// section's reader: a rule across options, a value that is not one member.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/core/enum_names.hpp"
#include "sim/core/error.hpp"
#include "sim/core/schema.hpp"

namespace moesim::schema {

template <class T>
struct Option {
  Field field;
  std::function<void(const Json&, T&)> read;  // the validated value into the struct; empty: declared only

  // Other frameworks' names for the key (Megatron-Core's arguments, Hugging Face's config.json,
  // torchtitan's model args): an unknown key that is one of them is refused with this key, and
  // the importers map them to it.
  Option also(std::initializer_list<const char*> names) && {
    for (const char* n : names) field.synonyms.emplace_back(n);
    return std::move(*this);
  }
  // Required: the key must be written (a nested section's, which has no default then).
  Option required() && {
    field.required = true;
    field.default_value = Json();
    return std::move(*this);
  }
  // A default other than the member's initializer, where the initializer means something the
  // scenario cannot say (each use says why).
  Option defaults_to(Json value) && {
    field.default_value = std::move(value);
    return std::move(*this);
  }
};

namespace bound {

template <class V>
struct optional_value {
  static constexpr bool value = false;
  using type = V;
};
template <class V>
struct optional_value<std::optional<V>> {
  static constexpr bool value = true;
  using type = V;
};

// A value the schema has validated as `type`, converted to the member's type V: a unit value
// through its parser; a time only into moesim's Time (picoseconds).
template <class V>
V convert(Type type, const Json& v) {
  if constexpr (std::is_same_v<V, Bandwidth>) {
    return as_bandwidth(v);
  } else if constexpr (std::is_same_v<V, bool> || std::is_same_v<V, std::string>) {
    return v.get<V>();
  } else {
    static_assert(std::is_arithmetic_v<V>, "a bound option fills a number, a bool, a string, a Bandwidth or an enum");
    switch (type) {
      case Type::Time: return static_cast<V>(as_time(v));
      case Type::Bytes: return static_cast<V>(as_bytes(v));
      case Type::Flops: return static_cast<V>(as_flops(v));
      case Type::Bandwidth: return static_cast<V>(as_bandwidth(v).bytes_per_second);
      default: return v.get<V>();
    }
  }
}

// Whether a member of type V can hold a value of `type` without losing its unit: a time only as
// Time (an int64 of picoseconds), never as a double read as seconds.
template <class V>
bool fits(Type type) {
  switch (type) {
    case Type::Time: return std::is_same_v<V, Time>;
    case Type::Bandwidth: return std::is_same_v<V, Bandwidth> || std::is_same_v<V, double>;
    case Type::Bytes:
    case Type::Flops: return std::is_same_v<V, double>;
    case Type::Boolean: return std::is_same_v<V, bool>;
    case Type::String:
    case Type::Enum: return std::is_same_v<V, std::string>;
    // A whole number into a double too: shapes are counted in doubles for the FLOP arithmetic.
    case Type::Integer: return std::is_arithmetic_v<V> && !std::is_same_v<V, bool>;
    case Type::Number: return std::is_floating_point_v<V>;
    default: return false;
  }
}

inline bool is_unit(Type t) { return t == Type::Time || t == Type::Bandwidth || t == Type::Bytes || t == Type::Flops; }

// The member `access` reaches in a default-constructed T.
template <class T, class Access>
auto initial(const Access& access) {
  T t{};
  return std::invoke(access, t);
}

template <class T, class Access>
using member_t = std::remove_cvref_t<std::invoke_result_t<const Access&, T&>>;

template <class T, class Access>
Option<T> make(std::string key, const Access& access, NodePtr node, bool required, Json default_value, std::string help) {
  using M = member_t<T, Access>;
  using V = typename optional_value<M>::type;
  if (!fits<V>(node->type)) invariant_failed("option \"" + key + "\": its schema type does not fit the member it fills");
  const Type type = node->type;
  Option<T> o{Field{key, std::move(node), required, std::move(default_value), std::move(help), {}},
              [access, type](const Json& v, T& out) { std::invoke(access, out) = convert<V>(type, v); }};
  return o;
}

}  // namespace bound

// An optional key whose default is the member's initializer (none for a std::optional member).
template <class T, class Access>
Option<T> option(std::string key, Access access, NodePtr node, std::string help) {
  using M = bound::member_t<T, Access>;
  Json def;
  if (bound::is_unit(node->type)) {
    if constexpr (!bound::optional_value<M>::value)
      invariant_failed("option \"" + key + "\": a unit value's default is spelled (unit_option)");
  } else if constexpr (!bound::optional_value<M>::value) {
    const auto initial = bound::initial<T>(access);
    if constexpr (std::is_arithmetic_v<M> && !std::is_same_v<M, bool>)
      def = node->type == Type::Integer ? Json(static_cast<std::int64_t>(initial)) : Json(initial);
    else
      def = Json(initial);
  }
  return bound::make<T>(std::move(key), access, std::move(node), false, std::move(def), std::move(help));
}

// An optional key without a default: absent, the member keeps its initializer (a "not given"
// value such as -1 or 0), or the section's reader derives it from other keys.
template <class T, class Access>
Option<T> given_option(std::string key, Access access, NodePtr node, std::string help) {
  return bound::make<T>(std::move(key), access, std::move(node), false, Json(), std::move(help));
}

// An optional unit value whose default is spelled as the user writes it ("0us", "45GB/s"),
// checked here to be the member's initializer.
template <class T, class Access>
Option<T> unit_option(std::string key, Access access, NodePtr node, const char* spelled, std::string help) {
  using V = bound::member_t<T, Access>;
  const Json def(spelled);
  const auto initial = bound::initial<T>(access);
  bool same = false;
  if constexpr (std::is_same_v<V, Bandwidth>)
    same = bound::convert<V>(node->type, def).bytes_per_second == initial.bytes_per_second;
  else
    same = bound::convert<V>(node->type, def) == initial;
  if (!same) invariant_failed("option \"" + key + "\": its default \"" + spelled + "\" is not the member's initializer");
  return bound::make<T>(std::move(key), access, std::move(node), false, def, std::move(help));
}

template <class T, class Access>
Option<T> required_option(std::string key, Access access, NodePtr node, std::string help) {
  return bound::make<T>(std::move(key), access, std::move(node), true, Json(), std::move(help));
}

// An enumeration member, its choices and reading from the enum's one table of names; `choices`
// narrows it to some of the values.
template <class T, class Access, class E, std::size_t N>
Option<T> enum_option(std::string key, Access access, const std::array<EnumName<E>, N>& names, std::string help,
                      std::vector<std::string> choices = {}) {
  static_assert(std::is_same_v<bound::member_t<T, Access>, E>, "the member is of the table's enumeration");
  if (choices.empty()) choices = names_of(names);
  const Json def = name_string(names, bound::initial<T>(access));
  return Option<T>{Field{std::move(key), enumeration(std::move(choices)), false, def, std::move(help), {}},
                   [access, &names](const Json& v, T& out) { std::invoke(access, out) = read_name(names, v.get<std::string>()); }};
}

// A bool member written as one of two names (an option whose choices are two ways of doing a
// thing): `choices` in the order the schema offers them, `when_true` the one that sets it.
template <class T, class Access>
Option<T> switch_option(std::string key, Access access, std::array<const char*, 2> choices, const char* when_true,
                        std::string help) {
  static_assert(std::is_same_v<bound::member_t<T, Access>, bool>, "a switch fills a bool");
  const std::string on = when_true;
  if (on != choices[0] && on != choices[1]) invariant_failed("option \"" + key + "\": \"" + on + "\" is not one of its choices");
  const std::string off = on == choices[0] ? choices[1] : choices[0];
  const Json def = bound::initial<T>(access) ? on : off;
  return Option<T>{Field{std::move(key), enumeration({choices[0], choices[1]}), false, def, std::move(help), {}},
                   [access, on](const Json& v, T& out) { std::invoke(access, out) = v.get<std::string>() == on; }};
}

template <class T>
class Options;

// The struct itself, as the member a nested object fills whose keys are members of the enclosing
// struct (a GPU's "host_link": {"bandwidth", "latency"} fills GpuSpec::host_bandwidth and
// host_latency): section_option(key, schema::itself, ...).
inline constexpr auto itself = [](auto& t) -> auto& { return t; };

// A nested object of options filling a member struct (by default its defaults written in when the
// key is absent, as an object's), or a std::optional of one (engaged when the key is written).
// `default_value` null: absent, the member keeps its initializer.
template <class T, class Access, class U>
Option<T> section_option(std::string key, Access access, const Options<U>& section, std::string help,
                         Json default_value = Json::object()) {
  using M = bound::member_t<T, Access>;
  static_assert(std::is_same_v<M, U> || std::is_same_v<M, std::optional<U>>, "the member is the section's struct");
  const Options<U>* from = &section;
  return Option<T>{Field{std::move(key), section.node(), false, std::move(default_value), std::move(help), {}},
                   [access, from](const Json& v, T& out) {
                     if constexpr (std::is_same_v<M, U>)
                       from->read(v, std::invoke(access, out));
                     else
                       from->read(v, std::invoke(access, out).emplace());
                   }};
}

// A key the section's reader reads itself (a rule across keys, a value that is not one member).
template <class T>
Option<T> declared(Field f) {
  return Option<T>{std::move(f), {}};
}

// The options of one section, in the order the schema lists (and the effective document writes) them.
template <class T>
class Options {
 public:
  explicit Options(std::vector<Option<T>> options) : options_(std::move(options)) {
    std::vector<Field> fields;
    fields.reserve(options_.size());
    for (const auto& o : options_) fields.push_back(o.field);
    node_ = object(std::move(fields));
  }
  const NodePtr& node() const { return node_; }
  // Fills `out` from `doc`, which node() has validated (its defaults written in): every bound
  // option the document holds. Declared-only keys are the caller's.
  void read(const Json& doc, T& out) const {
    for (const auto& o : options_)
      if (o.read && doc.contains(o.field.key)) o.read(doc.at(o.field.key), out);
  }

 private:
  std::vector<Option<T>> options_;
  NodePtr node_;
};

}  // namespace moesim::schema
