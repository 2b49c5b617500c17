// bergamot-translator's outputs on real markup (tests/fixtures/markup, made by
// tools/reference/make_markup_fixtures.py) and how Petrel is set to compare with them.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "petrel/translator.h"
#include "support/test_support.h"

namespace petrel::test {

inline nlohmann::json markup_fixture(const std::string& name) {
  std::ifstream in(fixture_dir() + "/markup/" + name + ".json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// bergamot's settings in the fixtures (Firefox's): greedy, max-length-factor 2; no shortlist
// (the toy models have none; the student's files used its shortlist, which callers turn on).
inline TranslateOptions firefox_options() {
  TranslateOptions o;
  o.beam_size = 1;
  o.max_length_factor = 2.0;
  o.use_shortlist = false;
  return o;
}

// Whether two HTML translations are equal, the quality scores written into them
// (x-bergamot-...-score="...") to 3 decimals: the rest byte for byte.
inline bool same_markup(const std::string& a, const std::string& b) {
  static const std::string kScore = "-score=\"";
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a.compare(i, kScore.size(), kScore) == 0 && b.compare(j, kScore.size(), kScore) == 0) {
      i += kScore.size();
      j += kScore.size();
      const size_t a_end = a.find('"', i), b_end = b.find('"', j);
      if (a_end == std::string::npos || b_end == std::string::npos) return false;
      if (std::fabs(std::stod(a.substr(i, a_end - i)) - std::stod(b.substr(j, b_end - j))) > 1e-3) return false;
      i = a_end;
      j = b_end;
      continue;
    }
    if (a[i++] != b[j++]) return false;
  }
  return i == a.size() && j == b.size();
}

}  // namespace petrel::test
