#include "text/pivot_alignment.h"

#include <algorithm>
#include <new>
#include <string>

#include "core/checked.h"

namespace petrel::text {

namespace {

Error pivot_invalid(const std::string& what) { return Error{ErrorCode::kInvalidArgument, "pivot alignment: " + what}; }

Error pivot_out_of_memory() { return Error{ErrorCode::kOutOfMemory, "pivot alignment: out of memory"}; }

std::string pivot_dims(uint64_t rows, uint64_t cols) { return std::to_string(rows) + " x " + std::to_string(cols); }

Status pivot_check_ranges(const std::vector<TextRange>& tokens, const char* which) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].begin > tokens[i].end)
      return pivot_invalid(std::string(which) + " token " + std::to_string(i) + " is bytes [" +
                           std::to_string(tokens[i].begin) + ", " + std::to_string(tokens[i].end) + ")");
  }
  return Status::ok();
}

Status pivot_check_matrix(const SoftAlignment& m, size_t rows, size_t cols, const char* which) {
  if (rows != static_cast<size_t>(-1) && m.size() != rows)
    return pivot_invalid(std::string(which) + " has " + std::to_string(m.size()) + " rows, not " +
                         std::to_string(rows));
  for (size_t r = 0; r < m.size(); ++r) {
    if (m[r].size() != cols)
      return pivot_invalid(std::string(which) + " row " + std::to_string(r) + " has " + std::to_string(m[r].size()) +
                           " values, not " + std::to_string(cols));
  }
  return Status::ok();
}

Status pivot_check_cells(uint64_t rows, uint64_t cols, const char* which) {
  detail::CheckedSize cells(rows);
  cells *= cols;
  if (!cells.ok() || cells.value() > kMaxPivotCells)
    return Error{ErrorCode::kOutOfMemory, "pivot alignment: " + std::string(which) + " of " + pivot_dims(rows, cols) +
                                              " values, more than " + std::to_string(kMaxPivotCells)};
  return Status::ok();
}

Status pivot_check_work(uint64_t a, uint64_t b, uint64_t c, const char* what) {
  detail::CheckedSize work(a);
  work *= b;
  work *= c;
  if (!work.ok() || work.value() > kMaxPivotMultiplyAdds)
    return pivot_invalid(std::string(what) + " of " + std::to_string(a) + " x " + std::to_string(b) + " x " +
                         std::to_string(c) + " multiply-adds, more than " + std::to_string(kMaxPivotMultiplyAdds));
  return Status::ok();
}

// One step of the two-pointer walk; the same for every target token, so it is walked once.
struct PivotStep {
  size_t q = 0, q2 = 0;  // first hop's pivot token, second hop's
  size_t shared = 0;     // bytes they share, when they differ
  bool same = false;     // the same bytes: the value moves whole
};

}  // namespace

Result<SoftAlignment> transfer_through_characters(const std::vector<TextRange>& pivot_as_target,
                                                  const std::vector<TextRange>& pivot_as_source,
                                                  const SoftAlignment& pivot_given_target) {
  const size_t nq = pivot_as_target.size(), nq2 = pivot_as_source.size(), nt = pivot_given_target.size();
  if (Status s = pivot_check_ranges(pivot_as_target, "the first hop's target"); !s) return s.error();
  if (Status s = pivot_check_ranges(pivot_as_source, "the second hop's source"); !s) return s.error();
  if (Status s = pivot_check_matrix(pivot_given_target, static_cast<size_t>(-1), nq2, "the second hop's alignment"); !s)
    return s.error();
  if (Status s = pivot_check_cells(nt, nq, "the remapped alignment"); !s) return s.error();
  try {
    std::vector<PivotStep> steps;
    steps.reserve(nq + nq2);
    size_t q = 0, q2 = 0;
    while (q < nq && q2 < nq2) {
      const TextRange& a = pivot_as_target[q];
      const TextRange& b = pivot_as_source[q2];
      PivotStep step;
      step.q = q;
      step.q2 = q2;
      if (a.begin == b.begin && a.end == b.end) {
        step.same = true;
        ++q, ++q2;
      } else {
        const size_t left = std::max(a.begin, b.begin), right = std::min(a.end, b.end);
        step.shared = right > left ? right - left : 0;
        if (a.end == b.end) {
          ++q, ++q2;
        } else if (a.end > b.end) {
          ++q2;
        } else {
          ++q;
        }
      }
      steps.push_back(step);
    }
    // Second-hop tokens left over (bergamot expects only an EOS) spread evenly over all q.
    const size_t leftover_begin = q2;
    if (Status s = pivot_check_work(nt, nq, nq2 - leftover_begin, "spreading leftover pivot tokens"); !s)
      return s.error();

    SoftAlignment remapped(nt, std::vector<float>(nq, 0.0f));
    const auto spread_over = static_cast<float>(nq);
    for (size_t t = 0; t < nt; ++t) {
      const std::vector<float>& p = pivot_given_target[t];
      std::vector<float>& r = remapped[t];
      for (const PivotStep& step : steps) {
        if (step.same) {
          r[step.q] += p[step.q2];
        } else {
          const TextRange& b = pivot_as_source[step.q2];
          r[step.q] += static_cast<float>(step.shared) * p[step.q2] / static_cast<float>(b.end - b.begin);
        }
      }
      for (size_t k = leftover_begin; k < nq2; ++k) {
        const float gift = p[k] / spread_over;
        for (size_t j = 0; j < nq; ++j) r[j] += gift;
      }
    }
    return remapped;
  } catch (const std::bad_alloc&) {
    return pivot_out_of_memory();
  }
}

Result<SoftAlignment> compose_pivot_alignment(const std::vector<TextRange>& pivot_as_target,
                                              const std::vector<TextRange>& pivot_as_source,
                                              const SoftAlignment& source_given_pivot,
                                              const SoftAlignment& pivot_given_target, size_t source_tokens) {
  const size_t nq = pivot_as_target.size(), nt = pivot_given_target.size();
  if (Status s = pivot_check_matrix(source_given_pivot, nq, source_tokens, "the first hop's alignment"); !s)
    return s.error();
  if (Status s = pivot_check_cells(nt, source_tokens, "the composed alignment"); !s) return s.error();
  if (Status s = pivot_check_work(nt, nq, source_tokens, "composing the alignments"); !s) return s.error();
  auto remapped = transfer_through_characters(pivot_as_target, pivot_as_source, pivot_given_target);
  if (!remapped) return remapped.error();
  try {
    // p(s | t) = sum_q p(s | q) p(q | t), q ascending for every cell, as bergamot adds.
    SoftAlignment out(nt, std::vector<float>(source_tokens, 0.0f));
    for (size_t t = 0; t < nt; ++t) {
      const std::vector<float>& r = remapped.value()[t];
      float* o = out[t].data();
      for (size_t q = 0; q < nq; ++q) {
        const float* p = source_given_pivot[q].data();
        const float w = r[q];
        for (size_t s = 0; s < source_tokens; ++s) o[s] += p[s] * w;
      }
    }
    return out;
  } catch (const std::bad_alloc&) {
    return pivot_out_of_memory();
  }
}

Result<std::vector<SoftAlignment>> compose_pivot_alignments(const AnnotatedText& source,
                                                            const AnnotatedText& pivot_as_target,
                                                            const AnnotatedText& pivot_as_source,
                                                            const std::vector<SoftAlignment>& source_given_pivot,
                                                            const std::vector<SoftAlignment>& pivot_given_target) {
  const size_t n = source.sentences.size();
  if (pivot_as_target.sentences.size() != n || pivot_as_source.sentences.size() != n ||
      source_given_pivot.size() != n || pivot_given_target.size() != n)
    return pivot_invalid("sentence counts differ: source " + std::to_string(n) + ", pivot as target " +
                         std::to_string(pivot_as_target.sentences.size()) + ", pivot as source " +
                         std::to_string(pivot_as_source.sentences.size()) + ", first hop's alignments " +
                         std::to_string(source_given_pivot.size()) + ", second hop's " +
                         std::to_string(pivot_given_target.size()));
  try {
    std::vector<SoftAlignment> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      auto a = compose_pivot_alignment(pivot_as_target.sentences[i], pivot_as_source.sentences[i],
                                       source_given_pivot[i], pivot_given_target[i], source.sentences[i].size());
      if (!a) return Error{a.error().code, a.error().message + " (sentence " + std::to_string(i) + ")"};
      out.push_back(std::move(a.value()));
    }
    return out;
  } catch (const std::bad_alloc&) {
    return pivot_out_of_memory();
  }
}

Result<std::vector<TextRange>> bergamot_token_ranges(const std::vector<TextRange>& pieces, TextRange sentence) {
  try {
    std::vector<TextRange> tokens;
    tokens.reserve(pieces.size() + 1);
    for (size_t i = 0; i < pieces.size(); ++i)
      tokens.push_back(TextRange{pieces[i].begin, i + 1 < pieces.size() ? pieces[i + 1].begin : pieces[i].end});
    const size_t eos = pieces.empty() ? sentence.end : pieces.back().end;
    tokens.push_back(TextRange{eos, eos});
    return tokens;
  } catch (const std::bad_alloc&) {
    return pivot_out_of_memory();
  }
}

}  // namespace petrel::text
