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

// A sentence finishes < beam hypotheses while live, up to beam more in its last
// step, and beam live ones at the length limit.
constexpr size_t kFinishedPerBeam = 3;

double normalized(double score, size_t length, double alpha) {
  return score / std::pow(static_cast<double>(std::max<size_t>(length, 1)), alpha);
}

}  // namespace

SearchResult search(const models::EncoderDecoder& model, const models::EncoderOutput& encoded,
                    const models::OutputVocabulary& output, const SearchOptions& o, SearchState& s,
                    layers::Workspace& ws) {
  const ModelInfo& info = *model.weights().info;
  const size_t sentences = encoded.offset.size(), K = o.beam, rows = sentences * K, vocab = output.size();
  const size_t max_steps = o.max_new_tokens;

  std::vector<size_t> sentence_of_row(rows);
  for (size_t r = 0; r < rows; ++r) sentence_of_row[r] = r / K;
  model.start_decoding(encoded, sentence_of_row, max_steps, o.cache_type, s.decoder, ws);
  s.logits.resize(rows * vocab);
  s.tokens.assign(rows, info.decoder_start_id);
  s.history.assign(rows * max_steps, 0);
  s.new_history.assign(rows * max_steps, 0);
  s.scores.assign(rows, 0.0);
  s.new_scores.assign(rows, 0.0);
  s.parent.assign(rows, 0);
  s.live.assign(sentences, 1);  // one live hypothesis (the start token) per sentence
  s.candidates.reserve(K * 2 * K);
  s.top_ids.resize(2 * K);
  s.top_logits.resize(2 * K);
  s.bad_indices.clear();
  for (int32_t bad : info.bad_word_ids) {
    const size_t index = output.index_of(bad);
    if (index != models::OutputVocabulary::kAbsent) s.bad_indices.push_back(index);
  }
  const size_t eos_index = output.index_of(info.eos_id);  // always an output (shortlists keep EOS)
  const kernels::KernelTable& k = model.kernels();

  const size_t slots = kFinishedPerBeam * K;
  s.finished.resize(sentences);
  for (auto& f : s.finished) {
    f.clear();
    f.reserve(slots);
  }
  s.finished_tokens.resize(sentences * slots * max_steps);
  auto finish = [&](size_t b, const int32_t* tokens, size_t length, double score) {
    auto& f = s.finished[b];
    std::copy_n(tokens, length, &s.finished_tokens[(b * slots + f.size()) * max_steps]);
    f.push_back({length, score});  // within the reserved capacity
  };
  std::vector<bool> done(sentences, false);
  size_t remaining = sentences;

  size_t step = 0;
  for (; step < max_steps && remaining > 0; ++step) {
    model.decode_step(s.tokens.data(), step, s.decoder, ws, output, s.logits.data());
    for (size_t b = 0; b < sentences; ++b) {
      if (done[b]) {
        for (size_t i = 0; i < K; ++i) s.parent[b * K + i] = b * K + i;
        continue;
      }
      s.candidates.clear();
      for (size_t i = 0; i < s.live[b]; ++i) {
        const size_t row = b * K + i;
        float* logits = &s.logits[row * vocab];
        if (const uint8_t* allowed = output.allowed(b))  // outside this sentence's shortlist
          for (size_t j = 0; j < vocab; ++j)
            if (!allowed[j]) logits[j] = -INFINITY;
        // log-softmax over every output (as Hugging Face), then bad words are masked.
        const float log_sum = k.logsumexp(logits, vocab);
        for (size_t bad : s.bad_indices) logits[bad] = -INFINITY;
        if (step < o.min_new_tokens) logits[eos_index] = -INFINITY;
        const size_t found = k.top_k(logits, vocab, 2 * K, s.top_ids.data(), s.top_logits.data());
        for (size_t j = 0; j < found; ++j)
          s.candidates.push_back({s.scores[row] + static_cast<double>(s.top_logits[j] - log_sum),
                                  output.token(static_cast<size_t>(s.top_ids[j])), static_cast<uint32_t>(i)});
      }
      std::sort(s.candidates.begin(), s.candidates.end(), better);
      size_t filled = 0;
      for (size_t rank = 0; rank < s.candidates.size() && rank < 2 * K && filled < K; ++rank) {
        const Candidate& c = s.candidates[rank];
        const size_t from = b * K + c.hyp;
        if (c.token == info.eos_id) {
          if (rank < K)  // a lower-ranked EOS is skipped, as in Hugging Face
            finish(b, &s.history[from * max_steps], step, normalized(c.score, step + 1, o.length_penalty));
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
      if (s.finished[b].size() >= K || filled == 0) {
        done[b] = true;
        --remaining;
      }
    }
    std::swap(s.history, s.new_history);
    std::swap(s.scores, s.new_scores);
    for (size_t r = 0; r < rows; ++r) s.tokens[r] = s.history[r * max_steps + step];
    if (K > 1) model.reorder(s.parent.data(), step, s.decoder);
  }

  SearchResult result;
  result.steps = step;
  result.hypotheses.resize(sentences);
  for (size_t b = 0; b < sentences; ++b) {
    if (!done[b])  // the length limit was reached: finish the live hypotheses
      for (size_t i = 0; i < s.live[b]; ++i)
        finish(b, &s.history[(b * K + i) * max_steps], step, normalized(s.scores[b * K + i], step, o.length_penalty));
    auto& hyps = result.hypotheses[b];
    for (size_t f = 0; f < s.finished[b].size(); ++f) {
      const int32_t* tokens = &s.finished_tokens[(b * slots + f) * max_steps];
      hyps.push_back({{tokens, tokens + s.finished[b][f].length}, s.finished[b][f].score});
    }
    std::stable_sort(hyps.begin(), hyps.end(), [](const Hypothesis& a, const Hypothesis& c) { return a.score > c.score; });
    if (hyps.size() > o.n_best) hyps.resize(o.n_best);
  }
  return result;
}

}  // namespace petrel::decode
