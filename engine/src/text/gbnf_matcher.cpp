#include "text/gbnf_matcher.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <new>

#include "core/utf8.h"
#include "text/hf_tokenizer.h"

namespace petrel::text {

namespace {

constexpr uint32_t kUnknown = UINT32_MAX;

uint32_t node_hash(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  return static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 32);
}

Error limit(const std::string& what) { return Error{ErrorCode::kInvalidArgument, "grammar: " + what}; }
Error too_many_stacks() {
  return limit("more than " + std::to_string(kMaxGbnfStacks) +
               " parser stacks at once (as many ways to go on: optional items in a row, or an ambiguous grammar)");
}

// GPT-2's bytes_to_unicode, inverted: a ByteLevel token's character -> its byte.
struct ByteOfChar {
  int16_t byte_of[324];
  ByteOfChar() {
    for (int16_t& b : byte_of) b = -1;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      byte_of[printable ? b : next++] = static_cast<int16_t>(b);
    }
  }
};

int byte_fallback_value(std::string_view token) {  // "<0xHH>" -> HH, else -1
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char h = token[i];
    const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'A' && h <= 'F' ? h - 'A' + 10 : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from.data(), at, from.size())) != std::string::npos; at = hit + from.size())
    out.append(s, at, hit - at).append(to);
  if (at == 0) return;
  out.append(s, at, std::string::npos);
  s.swap(out);
}

}  // namespace

Result<GbnfVocabulary> make_gbnf_vocabulary(const std::vector<std::string>& token_bytes, const std::vector<uint8_t>& excluded) {
  try {
    static std::atomic<uint64_t> serials{0};
    GbnfVocabulary v;
    v.serial = ++serials;
    v.vocab_size = token_bytes.size();
    uint64_t total = 0;
    for (size_t id = 0; id < token_bytes.size(); ++id) {
      if (token_bytes[id].empty() || (id < excluded.size() && excluded[id])) continue;
      v.ids.push_back(static_cast<int32_t>(id));
      total += token_bytes[id].size();
    }
    if (total >= UINT32_MAX) return Error{ErrorCode::kInvalidArgument, "grammar: the vocabulary's tokens have 4 GiB of bytes"};
    std::sort(v.ids.begin(), v.ids.end(), [&](int32_t a, int32_t b) {
      const std::string& x = token_bytes[static_cast<size_t>(a)];
      const std::string& y = token_bytes[static_cast<size_t>(b)];
      const int c = x.compare(y);
      return c != 0 ? c < 0 : a < b;
    });
    v.bytes.reserve(static_cast<size_t>(total));
    v.offsets.reserve(v.ids.size() + 1);
    v.common.reserve(v.ids.size());
    std::string_view previous;
    for (const int32_t id : v.ids) {
      const std::string& t = token_bytes[static_cast<size_t>(id)];
      size_t common = 0;
      while (common < t.size() && common < previous.size() && t[common] == previous[common]) ++common;
      v.offsets.push_back(static_cast<uint32_t>(v.bytes.size()));
      v.common.push_back(static_cast<uint32_t>(common));
      v.bytes += t;
      v.longest = std::max(v.longest, t.size());
      previous = t;
    }
    v.offsets.push_back(static_cast<uint32_t>(v.bytes.size()));
    v.index_of.assign(v.vocab_size, UINT32_MAX);
    for (size_t i = 0; i < v.ids.size(); ++i) v.index_of[static_cast<size_t>(v.ids[i])] = static_cast<uint32_t>(i);
    return v;
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "grammar: out of memory for the vocabulary's index"};
  }
}

Result<TokenBytes> hf_token_bytes(const HfTokenizer& tokenizer, size_t vocab_size) {
  try {
    static const ByteOfChar map;
    const detail::HfTokenizerTables& t = tokenizer.tables();
    TokenBytes out;
    out.bytes.resize(vocab_size);
    out.excluded.assign(vocab_size, 1);
    std::vector<uint8_t> added(vocab_size, 0);
    for (const detail::HfAddedTokenEntry& a : t.added_tokens)
      if (a.id >= 0 && static_cast<size_t>(a.id) < vocab_size) added[static_cast<size_t>(a.id)] = 1;
    const size_t n = std::min(vocab_size, t.vocab.size());
    for (size_t id = 0; id < n; ++id) {
      if (tokenizer.is_special(static_cast<int32_t>(id))) continue;
      std::string token(t.vocab[id]);
      bool bytes_done = false;  // a ByteFallback byte or ByteLevel bytes: no more text steps apply
      for (const detail::HfDecoderStep& d : t.decoders) {
        if (bytes_done) break;
        switch (d.kind) {
          case detail::HfDecoderKind::kByteLevel:
            if (added[id]) break;
            {
              std::string bytes;
              for (size_t at = 0; at < token.size();) {
                const detail::CodePoint c = detail::utf8_decode(token, at);
                at += c.length;
                bytes.push_back(c.value < 324 && map.byte_of[c.value] >= 0 ? static_cast<char>(map.byte_of[c.value]) : '\0');
              }
              token.swap(bytes);
              bytes_done = true;
            }
            break;
          case detail::HfDecoderKind::kReplace:
            replace_all(token, d.pattern, d.content);
            break;
          case detail::HfDecoderKind::kByteFallback:
            if (const int v = byte_fallback_value(token); v >= 0) {
              token.assign(1, static_cast<char>(v));
              bytes_done = true;
            }
            break;
          case detail::HfDecoderKind::kFuse:
            break;
          case detail::HfDecoderKind::kStrip: {
            std::string_view v = token;
            for (uint32_t k = 0; k < d.start && !d.content.empty() && v.compare(0, d.content.size(), d.content) == 0; ++k)
              v.remove_prefix(d.content.size());
            for (uint32_t k = 0; k < d.stop && !d.content.empty() && v.size() >= d.content.size() &&
                                 v.compare(v.size() - d.content.size(), d.content.size(), d.content) == 0;
                 ++k)
              v.remove_suffix(d.content.size());
            token = std::string(v);
            break;
          }
          case detail::HfDecoderKind::kWordPiece:
            if (token.compare(0, d.prefix.size(), d.prefix) == 0) token.erase(0, d.prefix.size());
            else token.insert(0, " ");
            break;
          case detail::HfDecoderKind::kMetaspace:
            replace_all(token, d.replacement, " ");
            break;
        }
      }
      if (t.decoders.empty()) token.insert(0, " ");  // decoding joins tokens with spaces (transformers.js)
      out.bytes[id] = std::move(token);
      out.excluded[id] = out.bytes[id].empty() ? 1 : 0;
    }
    return out;
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "grammar: out of memory for the tokens' bytes"};
  }
}

Result<GbnfMatcher> GbnfMatcher::create(GbnfGrammar grammar) {
  try {
    GbnfMatcher m(std::move(grammar));
    m.table_.assign(1024, 0);
    const GbnfGrammar& g = m.g_;
    std::vector<uint32_t> starts, out;
    for (uint32_t a = g.rule_alternatives[g.root]; a < g.rule_alternatives[g.root + 1]; ++a) {
      const uint32_t first = g.alternatives[a];
      uint32_t start = kEmpty;
      if (g.elements[first].kind != GbnfGrammar::kEnd) {
        auto n = m.node(first, kEmpty);
        if (!n) return n.error();
        start = n.value();
      }
      starts.push_back(start);
    }
    if (Status st = m.close(starts.data(), starts.size(), out); !st) return st.error();
    m.state_.stacks = std::move(out);
    return m;
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "grammar: out of memory"};
  }
}

void GbnfMatcher::new_stamp() {
  if (++stamp_ == 0) {
    std::fill(mark_.begin(), mark_.end(), 0);
    stamp_ = 1;
  }
  empty_mark_ = 0;
}

Result<uint32_t> GbnfMatcher::node(uint32_t pos, uint32_t parent) {
  size_t mask = table_.size() - 1;
  size_t slot = node_hash(pos, parent) & mask;
  for (; table_[slot] != 0; slot = (slot + 1) & mask) {
    const uint32_t i = table_[slot] - 1;
    if (node_pos_[i] == pos && node_parent_[i] == parent) return i;
  }
  const size_t count = node_pos_.size();
  if (count >= kMaxGbnfNodes)
    return limit("more than " + std::to_string(kMaxGbnfNodes) + " distinct parser stacks (an ambiguous grammar?)");
  const uint32_t depth = parent == kEmpty ? 1 : node_depth_[parent] + 1;
  if (depth > kMaxGbnfStackDepth)
    return limit("the output nests more than " + std::to_string(kMaxGbnfStackDepth) + " rules deep");
  const auto i = static_cast<uint32_t>(count);
  node_pos_.push_back(pos);
  node_parent_.push_back(parent);
  node_depth_.push_back(depth);
  const GbnfGrammar::Element& e = g_.elements[pos];
  node_charset_.push_back(e.kind == GbnfGrammar::kChars ? e.value : kUnknown);
  succ_begin_.push_back(kUnknown);
  succ_end_.push_back(0);
  mark_.push_back(0);
  visit_.push_back(0);
  table_[slot] = i + 1;
  if ((count + 1) * 2 > table_.size()) {  // keep the load at most one half
    std::vector<uint32_t> bigger(table_.size() * 2, 0);
    mask = bigger.size() - 1;
    for (uint32_t k = 0; k <= i; ++k) {
      size_t s = node_hash(node_pos_[k], node_parent_[k]) & mask;
      while (bigger[s] != 0) s = (s + 1) & mask;
      bigger[s] = k + 1;
    }
    table_.swap(bigger);
  }
  return i;
}

Status GbnfMatcher::close(const uint32_t* starts, size_t count, std::vector<uint32_t>& out) {
  // One stamp marks both what was expanded (a reference on top) and what was output (a
  // character or the empty stack on top): the two kinds of node never meet.
  if (++visit_stamp_ == 0) {
    std::fill(visit_.begin(), visit_.end(), 0);
    visit_stamp_ = 1;
  }
  bool empty_out = false;
  work_.assign(starts, starts + count);
  while (!work_.empty()) {
    const uint32_t t = work_.back();
    work_.pop_back();
    if (t == kEmpty) {
      if (!empty_out) out.push_back(kEmpty);
      empty_out = true;
      continue;
    }
    if (visit_[t] == visit_stamp_) continue;
    visit_[t] = visit_stamp_;
    if (node_charset_[t] != kUnknown) {
      if (out.size() >= kMaxGbnfStacks)
        return too_many_stacks();
      out.push_back(t);
      continue;
    }
    const uint32_t pos = node_pos_[t];
    const uint32_t rule = g_.elements[pos].value;
    uint32_t base = node_parent_[t];
    if (g_.elements[pos + 1].kind != GbnfGrammar::kEnd) {
      auto n = node(pos + 1, base);
      if (!n) return n.error();
      base = n.value();
    }
    for (uint32_t a = g_.rule_alternatives[rule]; a < g_.rule_alternatives[rule + 1]; ++a) {
      const uint32_t first = g_.alternatives[a];
      if (g_.elements[first].kind == GbnfGrammar::kEnd) {
        work_.push_back(base);
      } else {
        auto n = node(first, base);
        if (!n) return n.error();
        work_.push_back(n.value());
      }
    }
  }
  return Status::ok();
}

Result<std::pair<uint32_t, uint32_t>> GbnfMatcher::successors(uint32_t s) {
  if (succ_begin_[s] != kUnknown) return std::pair<uint32_t, uint32_t>{succ_begin_[s], succ_end_[s]};
  const uint32_t pos = node_pos_[s];
  uint32_t next = node_parent_[s];
  if (g_.elements[pos + 1].kind != GbnfGrammar::kEnd) {
    auto n = node(pos + 1, next);
    if (!n) return n.error();
    next = n.value();
  }
  scratch_.clear();
  if (Status st = close(&next, 1, scratch_); !st) return st.error();
  if (succ_.size() + scratch_.size() >= UINT32_MAX) return limit("too many parser stacks");
  const auto begin = static_cast<uint32_t>(succ_.size());
  succ_.insert(succ_.end(), scratch_.begin(), scratch_.end());
  succ_begin_[s] = begin;
  succ_end_[s] = static_cast<uint32_t>(succ_.size());
  return std::pair<uint32_t, uint32_t>{begin, succ_end_[s]};
}

Result<bool> GbnfMatcher::step(const std::vector<uint32_t>& in, size_t begin, size_t end, const Partial& from,
                               uint8_t byte, Partial& to, std::vector<uint32_t>& out) {
  static constexpr uint32_t kMinOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
  uint32_t cp = 0;
  if (from.need == 0) {
    if (byte < 0x80) {
      cp = byte;
    } else {
      uint8_t length;
      if (byte >= 0xC2 && byte <= 0xDF) length = 2;
      else if (byte >= 0xE0 && byte <= 0xEF) length = 3;
      else if (byte >= 0xF0 && byte <= 0xF4) length = 4;
      else return false;
      to = {static_cast<uint32_t>(byte & (0x7F >> length)), static_cast<uint8_t>(length - 1), length};
    }
  } else {
    if ((byte & 0xC0) != 0x80) return false;
    to = {from.bits << 6 | (byte & 0x3F), static_cast<uint8_t>(from.need - 1), from.length};
  }
  if (from.need == 0 && byte < 0x80) {
    to = {};
  } else if (to.need > 0) {  // a character in progress: keep the stacks that can take one it may become
    const uint32_t shift = 6 * to.need;
    uint32_t lo = to.bits << shift, hi = lo | ((1u << shift) - 1);
    lo = std::max(lo, kMinOfLength[to.length]);
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
    const size_t first = out.size();
    for (size_t i = begin; i < end; ++i) {
      const uint32_t s = in[i];
      if (s != kEmpty && g_.intersects(node_charset_[s], lo, hi)) out.push_back(s);
    }
    return out.size() > first;
  } else {
    cp = to.bits;
    if (cp < kMinOfLength[to.length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    to = {};
  }
  new_stamp();
  const size_t first = out.size();
  for (size_t i = begin; i < end; ++i) {
    const uint32_t s = in[i];
    if (s == kEmpty || !g_.contains(node_charset_[s], cp)) continue;
    auto next = successors(s);
    if (!next) return next.error();
    for (uint32_t k = next.value().first; k < next.value().second; ++k) {
      const uint32_t t = succ_[k];
      if (marked(t)) continue;
      if (out.size() - first >= kMaxGbnfStacks)
        return too_many_stacks();
      out.push_back(t);
    }
  }
  return out.size() > first;
}

Result<bool> GbnfMatcher::accept(uint8_t byte) {
  try {
    std::vector<uint32_t> out;
    Partial to;
    auto ok = step(state_.stacks, 0, state_.stacks.size(), state_.partial, byte, to, out);
    if (!ok || !ok.value()) return ok;
    state_.stacks.swap(out);
    state_.partial = to;
    return true;
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "grammar: out of memory"};
  }
}

Result<bool> GbnfMatcher::accept(std::string_view bytes) {
  State saved = state_;
  for (const char c : bytes) {
    auto ok = accept(static_cast<uint8_t>(c));
    if (!ok || !ok.value()) {
      state_ = std::move(saved);
      return ok;
    }
  }
  return true;
}

bool GbnfMatcher::complete() const {
  return state_.partial.need == 0 && std::find(state_.stacks.begin(), state_.stacks.end(), kEmpty) != state_.stacks.end();
}

bool GbnfMatcher::can_continue() const {
  for (const uint32_t s : state_.stacks)
    if (s != kEmpty) return true;
  return false;
}

void GbnfMatcher::dfa_clear() {
  dfa_pool_.clear();
  dfa_begin_.clear();
  dfa_end_.clear();
  dfa_trans_.clear();
  dfa_partial_.clear();
  dfa_index_.clear();
}

Result<uint32_t> GbnfMatcher::dfa_state(std::vector<uint32_t>& stacks, const Partial& partial) {
  std::sort(stacks.begin(), stacks.end());
  std::string key(stacks.size() * sizeof(uint32_t) + 6, '\0');
  if (!stacks.empty()) std::memcpy(&key[0], stacks.data(), stacks.size() * sizeof(uint32_t));
  std::memcpy(&key[stacks.size() * sizeof(uint32_t)], &partial.bits, 4);
  key[key.size() - 2] = static_cast<char>(partial.need);
  key[key.size() - 1] = static_cast<char>(partial.length);
  if (auto found = dfa_index_.find(key); found != dfa_index_.end()) return found->second;
  if (dfa_begin_.size() >= kDfaStates) return kDfaFull;
  const auto d = static_cast<uint32_t>(dfa_begin_.size());
  dfa_begin_.push_back(static_cast<uint32_t>(dfa_pool_.size()));
  dfa_pool_.insert(dfa_pool_.end(), stacks.begin(), stacks.end());
  dfa_end_.push_back(static_cast<uint32_t>(dfa_pool_.size()));
  dfa_partial_.push_back(partial);
  dfa_trans_.resize(dfa_trans_.size() + 256, kDfaUnknown);
  dfa_index_.emplace(std::move(key), d);
  return d;
}

Result<uint32_t> GbnfMatcher::dfa_next(uint32_t d, uint8_t byte) {
  const size_t slot = size_t{d} * 256 + byte;
  if (dfa_trans_[slot] != kDfaUnknown) return dfa_trans_[slot];
  dfa_scratch_.clear();
  Partial to;
  auto ok = step(dfa_pool_, dfa_begin_[d], dfa_end_[d], dfa_partial_[d], byte, to, dfa_scratch_);
  if (!ok) return ok.error();
  uint32_t next = kDfaDead;
  if (ok.value()) {
    auto interned = dfa_state(dfa_scratch_, to);
    if (!interned) return interned;
    next = interned.value();
    if (next == kDfaFull) return next;
  }
  dfa_trans_[slot] = next;
  return next;
}

Status GbnfMatcher::make_token_classes(const GbnfVocabulary& v) {
  token_classes_serial_ = v.serial;
  token_classes_.assign(v.ids.size(), ~uint64_t{0});
  class_starts_.clear();
  class_of_interval_.clear();
  class_example_.clear();
  // Intervals between the points where some charset starts or stops, each labelled by
  // the charsets holding it (a sum of random 64-bit keys: equal sums, equal charsets).
  std::vector<std::pair<uint32_t, uint64_t>> events;  // code point, key to add (start) or subtract (past end)
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (const GbnfGrammar::Charset& c : g_.charsets) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t key = seed ^ (seed >> 29);
    for (uint32_t r = c.begin; r < c.end; ++r) {
      events.push_back({g_.ranges[r].first, key});
      events.push_back({g_.ranges[r].second + 1, uint64_t{0} - key});
    }
    if (events.size() > 65536) return Status::ok();  // too many to be worth it: every token walks
  }
  events.push_back({0, 0});
  std::sort(events.begin(), events.end());
  std::vector<uint64_t> labels;
  uint64_t label = 0;
  for (size_t i = 0; i < events.size();) {
    const uint32_t at = events[i].first;
    for (; i < events.size() && events[i].first == at; ++i) label += events[i].second;
    if (at > 0x10FFFF) break;
    const uint32_t last = i < events.size() ? std::min<uint32_t>(events[i].first - 1, 0x10FFFF) : 0x10FFFF;
    const size_t k = static_cast<size_t>(std::find(labels.begin(), labels.end(), label) - labels.begin());
    if (k == labels.size()) {
      if (labels.size() == 63) return Status::ok();  // more classes than a mask holds
      labels.push_back(label);
      class_example_.push_back(UINT32_MAX);
    }
    // A character of the class (none for surrogates, which no UTF-8 token holds).
    const uint32_t example = at >= 0xD800 && at <= 0xDFFF ? 0xE000 : at;
    if (class_example_[k] == UINT32_MAX && example <= last) class_example_[k] = example;
    class_starts_.push_back(at);
    class_of_interval_.push_back(static_cast<uint8_t>(k));
  }
  for (size_t i = 0; i < v.ids.size(); ++i) {
    const std::string_view token(v.bytes.data() + v.offsets[i], v.offsets[i + 1] - v.offsets[i]);
    uint64_t mask = 0;
    for (size_t at = 0; at < token.size();) {
      const size_t n = detail::utf8_sequence(token, at);
      if (n == 0) {
        mask = ~uint64_t{0};
        break;
      }
      const auto cp = static_cast<uint32_t>(detail::utf8_decode(token, at).value);
      at += n;
      const size_t interval = static_cast<size_t>(std::upper_bound(class_starts_.begin(), class_starts_.end(), cp) -
                                                  class_starts_.begin()) - 1;
      mask |= uint64_t{1} << class_of_interval_[interval];
    }
    token_classes_[i] = mask;
  }
  return Status::ok();
}

Result<uint64_t> GbnfMatcher::absorbed_classes(uint32_t state) {
  uint64_t absorbed = 0;
  if (dfa_partial_[state].need != 0) return absorbed;
  for (size_t k = 0; k < class_example_.size(); ++k) {
    const uint32_t cp = class_example_[k];
    if (cp == UINT32_MAX) continue;
    uint8_t utf8[4];
    size_t n;
    if (cp < 0x80) utf8[0] = static_cast<uint8_t>(cp), n = 1;
    else if (cp < 0x800) utf8[0] = static_cast<uint8_t>(0xC0 | cp >> 6), utf8[1] = static_cast<uint8_t>(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
      utf8[0] = static_cast<uint8_t>(0xE0 | cp >> 12), utf8[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 63)),
      utf8[2] = static_cast<uint8_t>(0x80 | (cp & 63)), n = 3;
    else
      utf8[0] = static_cast<uint8_t>(0xF0 | cp >> 18), utf8[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 63)),
      utf8[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 63)), utf8[3] = static_cast<uint8_t>(0x80 | (cp & 63)), n = 4;
    uint32_t d = state;
    for (size_t b = 0; b < n && d < kDfaFull; ++b) {
      auto next = dfa_next(d, utf8[b]);
      if (!next) return next.error();
      d = next.value();
    }
    if (d == state) absorbed |= uint64_t{1} << k;
  }
  return absorbed;
}

// allowed_tokens over the automaton: a byte is one table lookup once its state was met.
// SIZE_MAX: the automaton filled up.
Result<size_t> GbnfMatcher::walk_dfa(const GbnfVocabulary& v, uint8_t* allowed) {
  if (dfa_begin_.size() >= kDfaStates / 2) dfa_clear();  // room for this walk's new states
  std::vector<uint32_t> start = state_.stacks;
  auto first = dfa_state(start, state_.partial);
  if (!first) return first.error();
  if (first.value() == kDfaFull) return SIZE_MAX;
  if (token_classes_serial_ != v.serial)
    if (Status st = make_token_classes(v); !st) return st.error();
  auto absorbed = absorbed_classes(first.value());
  if (!absorbed) return absorbed.error();
  const uint64_t shortcut = absorbed.value() & ~(uint64_t{1} << 63);
  std::memset(allowed, 0, v.vocab_size);
  walk_dfa_states_.resize(v.longest + 1);
  uint32_t* states = walk_dfa_states_.data();
  states[0] = first.value();
  size_t valid = 0, dead = SIZE_MAX, count = 0;
  const uint32_t* trans = dfa_trans_.data();
  for (size_t i = 0; i < v.ids.size(); ++i) {
    const size_t common = v.common[i];
    if (dead <= common) continue;
    dead = SIZE_MAX;
    if ((token_classes_[i] & ~shortcut) == 0) {  // each character leads back to the start state
      valid = 0;
      allowed[v.ids[i]] = 1;
      ++count;
      continue;
    }
    size_t d = std::min(common, valid);
    const auto* token = reinterpret_cast<const uint8_t*>(v.bytes.data() + v.offsets[i]);
    const size_t length = v.offsets[i + 1] - v.offsets[i];
    for (; d < length; ++d) {
      uint32_t next = trans[size_t{states[d]} * 256 + token[d]];
      if (next == kDfaUnknown) {
        auto computed = dfa_next(states[d], token[d]);
        if (!computed) return computed.error();
        next = computed.value();
        if (next == kDfaFull) return SIZE_MAX;
        trans = dfa_trans_.data();
      }
      if (next == kDfaDead) break;
      states[d + 1] = next;
    }
    if (d < length) {
      dead = d + 1;
      valid = d;
      continue;
    }
    valid = length;
    allowed[v.ids[i]] = 1;
    ++count;
  }
  return count;
}

Result<size_t> GbnfMatcher::walk_stacks(const GbnfVocabulary& v, uint8_t* allowed) {
  std::memset(allowed, 0, v.vocab_size);
  walk_stacks_ = state_.stacks;
  walk_ranges_.resize(v.longest + 1);
  walk_partial_.resize(v.longest + 1);
  walk_ranges_[0] = {0, walk_stacks_.size()};
  walk_partial_[0] = state_.partial;
  size_t valid = 0;                       // the depths whose states hold for the previous token
  size_t dead = SIZE_MAX;                 // the previous token's prefix of this length is refused
  size_t count = 0;
  for (size_t i = 0; i < v.ids.size(); ++i) {
    const size_t common = v.common[i];
    if (dead <= common) continue;  // starts with the refused prefix too
    dead = SIZE_MAX;
    size_t d = std::min(common, valid);
    walk_stacks_.resize(walk_ranges_[d].second);
    const char* token = v.bytes.data() + v.offsets[i];
    const size_t length = v.offsets[i + 1] - v.offsets[i];
    bool alive = true;
    for (; d < length; ++d) {
      const size_t start = walk_stacks_.size();
      auto ok = step(walk_stacks_, walk_ranges_[d].first, walk_ranges_[d].second, walk_partial_[d],
                     static_cast<uint8_t>(token[d]), walk_partial_[d + 1], walk_stacks_);
      if (!ok) return ok.error();
      if (!ok.value()) {
        walk_stacks_.resize(start);
        dead = d + 1;
        valid = d;
        alive = false;
        break;
      }
      walk_ranges_[d + 1] = {start, walk_stacks_.size()};
    }
    if (!alive) continue;
    valid = length;
    allowed[v.ids[i]] = 1;
    ++count;
  }
  return count;
}

Result<size_t> GbnfMatcher::allowed_tokens(const GbnfVocabulary& v, uint8_t* allowed) {
  try {
    std::string key(state_.stacks.size() * sizeof(uint32_t) + 6, '\0');
    {
      std::vector<uint32_t> sorted = state_.stacks;
      std::sort(sorted.begin(), sorted.end());
      std::memcpy(&key[0], sorted.data(), sorted.size() * sizeof(uint32_t));
      std::memcpy(&key[sorted.size() * sizeof(uint32_t)], &state_.partial.bits, 4);
      key[key.size() - 2] = static_cast<char>(state_.partial.need);
      key[key.size() - 1] = static_cast<char>(state_.partial.length);
    }
    if (mask_serial_ != v.serial) {
      mask_index_.clear();
      masks_.clear();
      mask_counts_.clear();
      mask_serial_ = v.serial;
    }
    if (auto found = mask_index_.find(key); found != mask_index_.end()) {
      // Unpacked 8 ids at a time: each byte of bits -> 8 bytes of 0 / 1 from a table.
      static const auto spread = [] {
        std::array<std::array<uint8_t, 8>, 256> t{};
        for (unsigned b = 0; b < 256; ++b)
          for (unsigned j = 0; j < 8; ++j) t[b][j] = static_cast<uint8_t>((b >> j) & 1u);
        return t;
      }();
      const uint8_t* bits = masks_[found->second].data();
      const size_t whole = v.vocab_size / 8;
      for (size_t k = 0; k < whole; ++k) std::memcpy(allowed + 8 * k, spread[bits[k]].data(), 8);
      for (size_t id = whole * 8; id < v.vocab_size; ++id) allowed[id] = static_cast<uint8_t>((bits[id >> 3] >> (id & 7)) & 1);
      return mask_counts_[found->second];
    }
    auto walked = walk_dfa(v, allowed);
    if (!walked) return walked.error();
    size_t count = walked.value();
    if (count == SIZE_MAX) {  // the automaton filled up: the stacks themselves
      walked = walk_stacks(v, allowed);
      if (!walked) return walked.error();
      count = walked.value();
    }
    const size_t mask_bytes = (v.vocab_size + 7) / 8;
    if ((masks_.size() + 1) * mask_bytes > kGbnfMaskCacheBytes) {  // full: start again
      mask_index_.clear();
      masks_.clear();
      mask_counts_.clear();
    }
    if (mask_bytes <= kGbnfMaskCacheBytes) {
      std::vector<uint8_t> bits(mask_bytes, 0);
      for (size_t id = 0; id < v.vocab_size; ++id) bits[id >> 3] = static_cast<uint8_t>(bits[id >> 3] | allowed[id] << (id & 7));
      masks_.push_back(std::move(bits));
      mask_counts_.push_back(count);
      mask_index_.emplace(std::move(key), masks_.size() - 1);
    }
    return count;
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "grammar: out of memory"};
  }
}

}  // namespace petrel::text
