#include "convert/shortlist.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "convert/convert_error.h"

namespace petrel::convert {

ShortlistTable read_lexical_shortlist(const std::string& path, const std::vector<std::string>& vocab, uint32_t first,
                                      uint32_t best, int32_t eos_id) {
  std::ifstream in(path);
  if (!in) throw ConvertError(path + ": cannot open the shortlist file");
  return read_lexical_shortlist(in, path, vocab, first, best, eos_id);
}

ShortlistTable read_lexical_shortlist(std::istream& in, const std::string& path, const std::vector<std::string>& vocab,
                                      uint32_t first, uint32_t best, int32_t eos_id) {
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) ids.emplace(vocab[i], static_cast<int32_t>(i));

  ShortlistTable t;
  t.first = first;
  t.best = best;
  // Per source id: (probability, target); a pair seen twice keeps its larger probability.
  std::vector<std::vector<std::pair<float, int32_t>>> targets(vocab.size());
  std::string line, target, source, extra;
  while (std::getline(in, line)) {
    ++t.lines;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    double probability = 0;
    if (!(fields >> target >> source >> probability) || (fields >> extra))
      throw ConvertError(path + ":" + std::to_string(t.lines) + ": expected 'TARGET SOURCE PROBABILITY'");
    if (!(probability >= 0 && probability <= 1))
      throw ConvertError(path + ":" + std::to_string(t.lines) + ": probability " + std::to_string(probability) +
                         " is not in [0, 1]");
    auto s = ids.find(source), g = ids.find(target);
    if (source == "NULL" || target == "NULL" || s == ids.end() || g == ids.end()) {
      ++t.skipped;
      continue;
    }
    targets[static_cast<size_t>(s->second)].push_back({static_cast<float>(probability), g->second});
  }
  if (in.bad()) throw ConvertError(path + ": read error");

  t.offsets.push_back(0);
  std::vector<size_t> kept_for(vocab.size(), SIZE_MAX);  // target -> the source that kept it last
  for (size_t source_id = 0; source_id < targets.size(); ++source_id) {
    auto& list = targets[source_id];
    // Most likely first, ties by lower id; a target listed twice keeps its first
    // (most likely) entry.
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    const size_t start = t.candidates.size();
    for (const auto& [probability, id] : list) {
      if (t.candidates.size() - start == best) break;
      if (kept_for[static_cast<size_t>(id)] == source_id) continue;
      kept_for[static_cast<size_t>(id)] = source_id;
      t.candidates.push_back(id);
    }
    t.offsets.push_back(static_cast<uint32_t>(t.candidates.size()));
  }
  for (uint32_t id = 0; id < first && id < vocab.size(); ++id) t.always.push_back(static_cast<int32_t>(id));
  if (std::find(t.always.begin(), t.always.end(), eos_id) == t.always.end()) t.always.push_back(eos_id);
  std::sort(t.always.begin(), t.always.end());
  return t;
}

}  // namespace petrel::convert
