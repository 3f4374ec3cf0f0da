// Each enumeration's names, written once: a table of (value, name) pairs beside the enum, from
// which the scenario schema's choices (names_of), the loader's reading (read_name) and the
// enum's to_string (name_of) derive. A name added or renamed in its table changes all three.
// A table lists its names in the order the schema offers them (an error message's "one of").
#pragma once

#include <array>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.hpp"

namespace moesim {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// The table of an enum E: `inline constexpr auto kNames = enum_names<E>({{E::A, "a"}, ...});`
template <class E, std::size_t N>
constexpr std::array<EnumName<E>, N> enum_names(const EnumName<E> (&names)[N]) {
  return std::to_array(names);
}

template <class E, std::size_t N>
constexpr std::string_view name_of(const std::array<EnumName<E>, N>& names, E value) {
  for (const auto& n : names)
    if (n.value == value) return n.name;
  return "?";
}

template <class E, std::size_t N>
constexpr std::optional<E> value_of(const std::array<EnumName<E>, N>& names, std::string_view name) {
  for (const auto& n : names)
    if (n.name == name) return n.value;
  return std::nullopt;
}

// The name of `value` as a string: what an importer writes into the scenario it builds.
template <class E, std::size_t N>
std::string name_string(const std::array<EnumName<E>, N>& names, E value) {
  return std::string(name_of(names, value));
}

template <class E, std::size_t N>
std::vector<std::string> names_of(const std::array<EnumName<E>, N>& names) {
  std::vector<std::string> out;
  out.reserve(N);
  for (const auto& n : names) out.emplace_back(n.name);
  return out;
}

// The names of `values` only, in their order: a field that takes some of an enumeration's values
// (the optimizer's state dtypes, of the training dtypes).
template <class E, std::size_t N>
std::vector<std::string> names_of(const std::array<EnumName<E>, N>& names, std::initializer_list<E> values) {
  std::vector<std::string> out;
  out.reserve(values.size());
  for (const E v : values) out.push_back(name_string(names, v));
  return out;
}
// A name the declared schema has already accepted (its choices are names_of the same table): one
// the table lacks is a defect of the program (invariant_failed), never read as a default.
template <class E, std::size_t N>
E read_name(const std::array<EnumName<E>, N>& names, std::string_view name) {
  if (const auto v = value_of(names, name)) return *v;
  invariant_failed("\"" + std::string(name) + "\" passed the schema but names no value of its enumeration");
}

}  // namespace moesim
