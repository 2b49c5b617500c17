#include "decode/search.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace petrel::decode {
namespace {

using Candidate = SearchState::Candidate;

// A score as a sort key: NaN below every number, so the order stays a strict weak one.
double rank_key(double score) { return std::isnan(score) ? -INFINITY : score; }

double normalized(double score, size_t length, double alpha) {
  return score / std::pow(static_cast<double>(std::max<size_t>(length, 1)), alpha);
}

}  // namespace

bool ranks_before(const Candidate& a, const Candidate& b) {
  const double ka = rank_key(a.score), kb = rank_key(b.score);
  if (ka != kb) return ka > kb;
  if (a.token != b.token) return a.token < b.token;
  return a.hyp < b.hyp;
}

Result<SearchResult> search(StepModel& model, size_t sentences, const models::OutputVocabulary& output,
                            const kernels::KernelTable& k, const SearchOptions& o, SearchState& s) {
  const size_t K = o.beam, vocab = output.size(), max_steps = o.max_new_tokens;
  const size_t rows = sentences * K;

  s.logits.resize(rows * vocab);
  s.tokens.assign(rows, o.decoder_start_id);
  s.history.assign(rows * max_steps, 0);
  s.new_history.assign(rows * max_steps, 0);
  s.scores.assign(rows, 0.0);
  s.new_scores.assign(rows, 0.0);
  s.parent.assign(rows, 0);
  s.live.assign(sentences, 1);  // one live hypothesis (the start token) per sentence
  s.active.resize(sentences);
  for (size_t b = 0; b < sentences; ++b) s.active[b] = b;
  s.next_active.clear();
  s.next_active.reserve(sentences);
  s.candidates.reserve(K * 2 * K);
  s.top_ids.resize(2 * K);
  s.top_logits.resize(2 * K);
  s.bad_indices.clear();
  for (int32_t bad : o.bad_word_ids) {
    const size_t index = output.index_of(bad);
    if (index != models::OutputVocabulary::kAbsent) s.bad_indices.push_back(index);
  }
  const size_t eos_index = output.index_of(o.eos_id);  // always an output (shortlists keep EOS)

  // Each sentence keeps its best K finished hypotheses: a new one takes a free slot,
  // or the worst one's place when strictly better (as Hugging Face merges them).
  s.finished.resize(sentences);
  for (auto& f : s.finished) {
    f.clear();
    f.reserve(K);
  }
  s.finished_tokens.resize(sentences * K * max_steps);
  const size_t W = o.alignment_width;
  if (W > 0) {
    s.step_alignments.resize(max_steps * rows * W);
    s.step_parents.resize(max_steps * rows);
    s.finished_alignments.resize(sentences * K * max_steps * W);
  }
  const bool scored = o.token_scores;
  if (scored) {
    s.score_history.assign(rows * max_steps, TokenScore{0, 0});
    s.new_score_history.assign(rows * max_steps, TokenScore{0, 0});
    s.finished_scores.resize(sentences * K * max_steps);
  }
  auto worst_slot = [&](size_t b) {
    const auto& f = s.finished[b];
    size_t worst = 0;
    for (size_t i = 1; i < f.size(); ++i)
      if (rank_key(f[i].score) < rank_key(f[worst].score)) worst = i;
    return worst;
  };
  // `tokens` (length - 1 of them) plus `last` when last >= 0; `eos`: it stopped on EOS.
  // Its alignment rows 0..step are traced back from row `row` of this step; its token
  // scores are `scores` (as many as tokens) and `last_score` for `last` or the EOS.
  auto finish = [&](size_t b, const int32_t* tokens, size_t length, int32_t last, double score, bool eos, size_t step,
                    size_t row, const TokenScore* scores, TokenScore last_score) {
    auto& f = s.finished[b];
    size_t slot = f.size();
    if (slot == K) {
      slot = worst_slot(b);
      if (!(rank_key(score) > rank_key(f[slot].score))) return;
    } else {
      f.push_back({});  // within the reserved capacity
    }
    int32_t* to = &s.finished_tokens[(b * K + slot) * max_steps];
    const size_t copied = last >= 0 ? length - 1 : length;
    std::copy_n(tokens, copied, to);
    if (last >= 0) to[copied] = last;
    f[slot] = {length, score, eos};
    if (scored) {
      TokenScore* scores_to = &s.finished_scores[(b * K + slot) * max_steps];
      std::copy_n(scores, copied, scores_to);
      if (last >= 0 || eos) scores_to[copied] = last_score;
    }
    if (W > 0) {
      float* rows_to = &s.finished_alignments[(b * K + slot) * max_steps * W];
      for (size_t t = step + 1; t-- > 0;) {
        std::copy_n(&s.step_alignments[(t * rows + row) * W], W, rows_to + t * W);
        if (t > 0) row = s.step_parents[t * rows + row];
      }
    }
  };
  const int32_t* const no_token = nullptr;
  auto steps_of = [&](size_t b) { return o.sentence_max_new_tokens ? (*o.sentence_max_new_tokens)[b] : max_steps; };
  auto forced_token = [&](size_t b, size_t step) -> const int32_t* {
    // EOS wins at the last step, as Hugging Face applies ForcedEOS after ForcedBOS.
    if (o.forced_eos_id >= 0 && step + 1 == steps_of(b)) return &o.forced_eos_id;
    if (o.forced != nullptr && step < (*o.forced)[b].size()) return &(*o.forced)[b][step];
    return no_token;
  };

  size_t step = 0;
  for (; step < max_steps && !s.active.empty(); ++step) {
    const size_t active_rows = s.active.size() * K;
    if (W > 0) model.align_into(&s.step_alignments[step * rows * W]);
    model.step(s.tokens.data(), active_rows, step, s.logits.data());
    s.next_active.clear();
    for (size_t a = 0; a < s.active.size(); ++a) {
      const size_t b = s.active[a], block = a * K;
      s.candidates.clear();
      if (const int32_t* forced = forced_token(b, step)) {
        for (size_t i = 0; i < s.live[b]; ++i)
          s.candidates.push_back({s.scores[block + i], *forced, static_cast<uint32_t>(i), 0.0f});
      } else {
        for (size_t i = 0; i < s.live[b]; ++i) {
          float* logits = &s.logits[(block + i) * vocab];
          if (const uint8_t* allowed = output.allowed(o.first_sentence + b))  // outside this sentence's shortlist
            for (size_t j = 0; j < vocab; ++j)
              if (!allowed[j]) logits[j] = -INFINITY;
          // log-softmax over every output (as Hugging Face), then bad words are masked.
          const float log_sum = k.logsumexp(logits, vocab);
          if (!std::isfinite(log_sum))
            return Error{ErrorCode::kFormat, "input " + std::to_string(o.first_sentence + b + 1) + ", step " + std::to_string(step + 1) +
                                                 ": the model computed non-finite scores (NaN or infinite logits); "
                                                 "its weights may be corrupt"};
          for (size_t bad : s.bad_indices) logits[bad] = -INFINITY;
          if (step < o.min_new_tokens) logits[eos_index] = -INFINITY;
          const size_t found = k.top_k(logits, vocab, 2 * K, s.top_ids.data(), s.top_logits.data());
          for (size_t j = 0; j < found; ++j)
            s.candidates.push_back({s.scores[block + i] + static_cast<double>(s.top_logits[j] - log_sum),
                                    output.token(static_cast<size_t>(s.top_ids[j])), static_cast<uint32_t>(i),
                                    s.top_logits[j]});
        }
      }
      std::sort(s.candidates.begin(), s.candidates.end(), ranks_before);
      const size_t to_block = s.next_active.size() * K;
      const bool last_step = step + 1 == steps_of(b);
      size_t filled = 0;
      for (size_t rank = 0; rank < s.candidates.size() && rank < 2 * K && (filled < K || last_step); ++rank) {
        const Candidate& c = s.candidates[rank];
        const size_t from = block + c.hyp;
        const double score = normalized(c.score, step + 1, o.length_penalty);
        const TokenScore token_score{static_cast<float>(c.score - s.scores[from]), c.logit};
        const TokenScore* scores = scored ? &s.score_history[from * max_steps] : nullptr;
        if (c.token == o.eos_id) {
          if (rank < K)  // a lower-ranked EOS is skipped, as in Hugging Face
            finish(b, &s.history[from * max_steps], step, -1, score, true, step, from, scores, token_score);
          continue;
        }
        if (last_step) {  // the length limit: the best K candidates finish, EOS or not
          if (rank < K)
            finish(b, &s.history[from * max_steps], step + 1, c.token, score, false, step, from, scores, token_score);
          continue;
        }
        const size_t to = to_block + filled++;
        s.parent[to] = from;
        s.new_scores[to] = c.score;
        std::copy_n(&s.history[from * max_steps], step, &s.new_history[to * max_steps]);
        s.new_history[to * max_steps + step] = c.token;
        if (scored) {
          std::copy_n(&s.score_history[from * max_steps], step, &s.new_score_history[to * max_steps]);
          s.new_score_history[to * max_steps + step] = token_score;
        }
      }
      s.live[b] = filled;
      bool go_on = filled > 0;
      if (go_on && s.finished[b].size() == K) {
        // first-K: K have finished. Heuristic: the best live hypothesis, normalized by
        // its length now, cannot beat the worst finished one.
        go_on = o.stop == BeamStop::kHeuristic &&
                normalized(s.new_scores[to_block], step + 1, o.length_penalty) > s.finished[b][worst_slot(b)].score;
      }
      if (go_on && o.observer != nullptr && !o.observer->on_step(b, &s.new_history[to_block * max_steps], step + 1)) {
        for (size_t i = 0; i < filled; ++i)  // stopped by the observer: finish the live ones
          finish(b, &s.new_history[(to_block + i) * max_steps], step + 1, -1,
                 normalized(s.new_scores[to_block + i], step + 1, o.length_penalty), false, step, s.parent[to_block + i],
                 scored ? &s.new_score_history[(to_block + i) * max_steps] : nullptr, TokenScore{0, 0});
        go_on = false;
      }
      if (!go_on) continue;  // its rows are dropped
      for (size_t i = filled; i < K; ++i) s.parent[to_block + i] = s.parent[to_block];  // inactive rows
      s.next_active.push_back(b);
    }
    std::swap(s.history, s.new_history);
    std::swap(s.scores, s.new_scores);
    if (scored) std::swap(s.score_history, s.new_score_history);
    const size_t next_rows = s.next_active.size() * K;
    for (size_t r = 0; r < next_rows; ++r) s.tokens[r] = s.history[r * max_steps + step];
    if (W > 0 && step + 1 < max_steps) std::copy_n(s.parent.data(), next_rows, &s.step_parents[(step + 1) * rows]);
    bool moved = next_rows != active_rows;
    for (size_t r = 0; r < next_rows && !moved; ++r) moved = s.parent[r] != r;
    if (moved && next_rows > 0) model.select(s.parent.data(), next_rows, step);
    std::swap(s.active, s.next_active);
  }

  SearchResult result;
  result.steps = step;
  result.hypotheses.resize(sentences);
  for (size_t b = 0; b < sentences; ++b) {
    auto& hyps = result.hypotheses[b];
    for (size_t f = 0; f < s.finished[b].size(); ++f) {
      const int32_t* tokens = &s.finished_tokens[(b * K + f) * max_steps];
      const SearchState::Finished& done = s.finished[b][f];
      hyps.push_back({{tokens, tokens + done.length}, done.score, done.eos, {}, {}});
      if (scored) {
        const TokenScore* scores_from = &s.finished_scores[(b * K + f) * max_steps];
        hyps.back().token_scores.assign(scores_from, scores_from + done.length + (done.eos ? 1 : 0));
      }
      if (W > 0) {
        const float* rows_from = &s.finished_alignments[(b * K + f) * max_steps * W];
        hyps.back().alignment.assign(rows_from, rows_from + (done.length + (done.eos ? 1 : 0)) * W);
      }
    }
    std::stable_sort(hyps.begin(), hyps.end(),
                     [](const Hypothesis& x, const Hypothesis& y) { return rank_key(x.score) > rank_key(y.score); });
    if (hyps.size() > o.n_best) hyps.resize(o.n_best);
  }
  return result;
}

}  // namespace petrel::decode
