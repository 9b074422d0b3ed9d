// JSON Schema -> grammar IR: the port of py/trellis/grammar/json_schema/converter.py (contexts,
// rules, bodies) with its object and array mixins, for the documents and keywords README.md
// lists as covered. Everything else declines: `convert` returns false and says why, and the
// Python converter runs instead. Names, memo tables and the order in which rules are made
// follow the Python line by line, since rule order and names are part of the words.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir_build.h"
#include "json.h"
#include "numbers.h"
#include "refs.h"

namespace tg::schema {

// The conversion options the port takes (converter.Options, after the Python side chose the
// dialect: draft7 semantics, and whether `format` asserts).
struct Options {
  bool any_whitespace = true;
  bool strict = false;
  int32_t max_whitespace = 20;
  bool canonical_integers = false;
  bool draft7 = false;
  bool integers_without_fraction = false;  // draft-04: 1.0 is not an integer
  bool format_assertion = true;            // false: `format` is an annotation (dropped, as without_formats)
  std::string unicode_version;             // unicodedata.unidata_version of the Python (regex.h)
};

// The kinds of JSON value a context may still admit (_keywords.ATOMS), as numbers.h's bits.
constexpr uint8_t kAllAtoms = 127;

struct Converted {
  std::vector<int32_t> words;
  std::vector<std::string> names;
};

// The grammar of `root` (a parsed schema document) under `options`: true with its words, or
// false with `*declined` saying what this port does not cover.
bool convert(const Value& root, const Options& options, Converted* out, std::string* declined);

}  // namespace tg::schema
