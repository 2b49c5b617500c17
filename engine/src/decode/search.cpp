#include "decode/search.h"

#include <algorithm>
#include <cmath>


namespace petrel::decode {
namespace {

using Candidate = SearchState::Candidate;

// Better first: higher score, then lower token id, then lower hypothesis index.
bool better(const Candidate& a, const Candidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.token != b.token) return a.token < b.token;
  return a.hyp < b.hyp;
}

// Appends hypothesis `hyp`'s best `k` extensions (cumulative scores) to `out`.
void best_extensions(const float* log_probs, size_t vocab, double base, uint32_t hyp, size_t k,
                     std::vector<Candidate>& top, std::vector<Candidate>& out) {
  top.clear();
  for (size_t t = 0; t < vocab; ++t) {
    if (log_probs[t] == -INFINITY) continue;
    Candidate c{base + log_probs[t], static_cast<int32_t>(t), hyp};
    if (top.size() == k && !better(c, top.back())) continue;
    if (top.size() == k) top.pop_back();
    top.insert(std::upper_bound(top.begin(), top.end(), c, better), c);
  }
  out.insert(out.end(), top.begin(), top.end());
}

double normalized(double score, size_t length, double alpha) {
  return score / std::pow(static_cast<double>(std::max<size_t>(length, 1)), alpha);
}

}  // namespace

SearchResult search(const models::EncoderDecoder& model, const models::EncoderOutput& encoded,
                    const SearchOptions& o, SearchState& s, layers::Workspace& ws) {
  const ModelInfo& info = *model.weights().info;
  const size_t sentences = encoded.offset.size(), K = o.beam, rows = sentences * K, vocab = info.vocab_size;
  const size_t max_steps = o.max_new_tokens;

  std::vector<size_t> sentence_of_row(rows);
  for (size_t r = 0; r < rows; ++r) sentence_of_row[r] = r / K;
  model.start_decoding(encoded, sentence_of_row, max_steps, s.decoder, ws);
  s.logits.resize(rows * vocab);
  s.tokens.assign(rows, info.decoder_start_id);
  s.history.assign(rows * max_steps, 0);
  s.new_history.assign(rows * max_steps, 0);
  s.scores.assign(rows, 0.0);
  s.new_scores.assign(rows, 0.0);
  s.parent.assign(rows, 0);
  s.live.assign(sentences, 1);  // one live hypothesis (the start token) per sentence
  s.candidates.reserve(K * 2 * K);
  s.top.reserve(2 * K + 1);

  SearchResult result;
  result.hypotheses.assign(sentences, {});
  for (auto& h : result.hypotheses) h.reserve(K + K);
  std::vector<bool> done(sentences, false);
  size_t remaining = sentences;

  size_t step = 0;
  for (; step < max_steps && remaining > 0; ++step) {
    model.decode_step(s.tokens.data(), step, s.decoder, ws, s.logits.data());
    for (size_t b = 0; b < sentences; ++b) {
      if (done[b]) {
        for (size_t i = 0; i < K; ++i) s.parent[b * K + i] = b * K + i;
        continue;
      }
      s.candidates.clear();
      for (size_t i = 0; i < s.live[b]; ++i) {
        const size_t row = b * K + i;
        float* lp = &s.logits[row * vocab];
        model.kernels().log_softmax(lp, vocab);
        for (int32_t bad : info.bad_word_ids) lp[bad] = -INFINITY;
        if (step < o.min_new_tokens) lp[info.eos_id] = -INFINITY;
        best_extensions(lp, vocab, s.scores[row], static_cast<uint32_t>(i), 2 * K, s.top, s.candidates);
      }
      std::sort(s.candidates.begin(), s.candidates.end(), better);
      size_t filled = 0;
      for (size_t rank = 0; rank < s.candidates.size() && rank < 2 * K && filled < K; ++rank) {
        const Candidate& c = s.candidates[rank];
        const size_t from = b * K + c.hyp;
        if (c.token == info.eos_id) {
          if (rank < K) {  // a lower-ranked EOS is skipped, as in Hugging Face
            const int32_t* h = &s.history[from * max_steps];
            result.hypotheses[b].push_back({{h, h + step}, normalized(c.score, step + 1, o.length_penalty)});
          }
          continue;
        }
        const size_t to = b * K + filled++;
        s.parent[to] = from;
        s.new_scores[to] = c.score;
        std::copy_n(&s.history[from * max_steps], step, &s.new_history[to * max_steps]);
        s.new_history[to * max_steps + step] = c.token;
      }
      for (size_t i = filled; i < K; ++i) s.parent[b * K + i] = b * K;  // inactive rows
      s.live[b] = filled;
      if (result.hypotheses[b].size() >= K || filled == 0) {
        done[b] = true;
        --remaining;
      }
    }
    std::swap(s.history, s.new_history);
    std::swap(s.scores, s.new_scores);
    for (size_t r = 0; r < rows; ++r) s.tokens[r] = s.history[r * max_steps + step];
    if (K > 1) model.reorder(s.parent.data(), step, s.decoder);
  }
  result.steps = step;

  for (size_t b = 0; b < sentences; ++b) {
    if (!done[b]) {  // the length limit was reached: finish the live hypotheses
      for (size_t i = 0; i < s.live[b]; ++i) {
        const size_t row = b * K + i;
        const int32_t* h = &s.history[row * max_steps];
        result.hypotheses[b].push_back({{h, h + step}, normalized(s.scores[row], step, o.length_penalty)});
      }
    }
    auto& hyps = result.hypotheses[b];
    std::stable_sort(hyps.begin(), hyps.end(), [](const Hypothesis& a, const Hypothesis& c) { return a.score > c.score; });
    if (hyps.size() > o.n_best) hyps.resize(o.n_best);
  }
  return result;
}

}  // namespace petrel::decode
