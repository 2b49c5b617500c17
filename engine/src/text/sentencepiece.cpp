// Building a SentencePiece from an untrusted spec, the encode driver (normalize, segment,
// then upstream's PopulateSentencePieceText) and decoding (upstream's
// SentencePieceProcessor::Decode). The two segmentation algorithms live in
// spm_unigram.cpp and spm_bpe.cpp.
#include "text/sentencepiece.h"

#include <cfloat>
#include <cmath>
#include <cstdio>

#include "core/quoted.h"
#include "core/utf8.h"

namespace petrel::text {
namespace {

// "<0x41>" -> 0x41; -1 unless the piece is exactly upstream's ByteToPiece format
// ("<0x%02X>", upper-case hex).
int byte_of_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

Error format_error(const std::string& where, const std::string& what) {
  return Error{ErrorCode::kFormat, where + ": " + what};
}

}  // namespace

Result<SentencePiece> SentencePiece::create(SentencePieceSpec spec, const std::string& where) {
  SentencePiece sp;
  if (spec.algorithm != SpmAlgorithm::kUnigram && spec.algorithm != SpmAlgorithm::kBpe)
    return format_error(where, "trainer_spec.model_type: " + std::to_string(static_cast<int>(spec.algorithm)) +
                                   " is neither UNIGRAM (1) nor BPE (2)");
  const size_t n = spec.pieces.size();
  if (n == 0) return format_error(where, "pieces: the model has no pieces");
  if (n > static_cast<size_t>(INT32_MAX)) return format_error(where, "pieces: more than 2^31 - 1 pieces");
  // (Stored scores and types are one per piece: the loader checked their sizes.)
  const size_t score_count = spec.stored_scores ? n : spec.scores.size();
  const size_t type_count = spec.stored_types ? n : spec.types.size();
  if (score_count != n)
    return format_error(where, "scores: " + std::to_string(score_count) + " scores for " + std::to_string(n) +
                                   " pieces");
  uint64_t piece_bytes = 0;  // (64 bits on every target); the trie numbers its nodes, at most one per byte, in 32 bits
  for (std::string_view p : spec.pieces) piece_bytes += p.size();
  if (piece_bytes >= (uint64_t{1} << 31)) return format_error(where, "pieces: more than 2 GiB of piece text");
  if (type_count != n)
    return format_error(where, "types: " + std::to_string(type_count) + " types for " + std::to_string(n) +
                                   " pieces");

  sp.algorithm_ = spec.algorithm;
  sp.pieces_ = spec.pieces;
  // A caller that hands its spec over copies nothing; a file's are viewed.
  sp.scores_ = spec.stored_scores ? ArrayView<float>(spec.stored_scores) : ArrayView<float>(std::move(spec.scores));
  sp.types_ = spec.stored_types ? ArrayView<PieceType>(spec.stored_types) : ArrayView<PieceType>(std::move(spec.types));
  sp.byte_fallback_ = spec.byte_fallback;
  sp.unk_surface_ = std::string(spec.unk_surface);
  sp.remove_extra_whitespaces_ = spec.remove_extra_whitespaces;
  sp.strip_leading_space_ = spec.add_dummy_prefix || spec.remove_extra_whitespaces;
  // Upstream starts from FLT_MAX / FLT_MIN (the smallest positive float, not the most
  // negative one); user-defined pieces score length * max_score - 0.1, so keep it.
  sp.min_score_ = FLT_MAX;
  sp.max_score_ = FLT_MIN;
  sp.unk_id_ = -1;
  for (int32_t& id : sp.byte_ids_) id = -1;

  for (size_t i = 0; i < n; ++i) {
    auto field = [i]() { return "pieces[" + std::to_string(i) + "]"; };  // only for messages
    const std::string_view piece = spec.pieces[i];
    if (piece.empty()) return format_error(where, field() + ".piece: empty (a piece must not be empty)");
    if (piece.size() > detail::kMaxPieceBytes)
      return format_error(where, field() + ".piece: " + std::to_string(piece.size()) + " bytes, more than the " +
                                     std::to_string(detail::kMaxPieceBytes) + " a piece may have");
    if (std::isnan(sp.scores_[i])) return format_error(where, field() + ".score: NaN");
    const auto id = static_cast<int32_t>(i);
    switch (sp.types_[i]) {
      case PieceType::kNormal:
        sp.min_score_ = std::min(sp.min_score_, sp.scores_[i]);
        sp.max_score_ = std::max(sp.max_score_, sp.scores_[i]);
        break;
      case PieceType::kUnknown:
        if (sp.unk_id_ >= 0)
          return format_error(where, field() + ".type: a second UNKNOWN piece " + detail::quoted(piece, 40) + " (pieces[" +
                                         std::to_string(sp.unk_id_) + "] is one already)");
        sp.unk_id_ = id;
        break;
      case PieceType::kControl:
        // BPE starts from single characters and looks each up among all pieces; a
        // control piece there would be emitted without consuming text, which upstream
        // rejects mid-encode ("all normalized characters are not consumed").
        if (spec.algorithm == SpmAlgorithm::kBpe && utf8::lead_length(static_cast<unsigned char>(piece[0])) >= piece.size())
          return format_error(where, field() + ": the CONTROL piece " + detail::quoted(piece, 40) +
                                         " is a single character, which a BPE model cannot encode");
        break;
      case PieceType::kUserDefined:
        sp.has_user_defined_ = true;
        break;
      case PieceType::kUnused:
        sp.has_unused_ = true;
        break;
      case PieceType::kByte: {
        if (!spec.byte_fallback)
          return format_error(where, field() + ": BYTE piece " + detail::quoted(piece, 40) +
                                         " although trainer_spec.byte_fallback is false");
        const int byte = byte_of_piece(piece);
        if (byte < 0) return format_error(where, field() + ": BYTE piece " + detail::quoted(piece, 40) + " is not <0x00>..<0xFF>");
        sp.byte_ids_[byte] = id;  // a second <0xNN> is a duplicate piece, caught below
        break;
      }
      default:
        return format_error(where, field() + ".type: " + std::to_string(static_cast<int>(sp.types_[i])) +
                                       " is no piece type (1..6)");
    }
  }
  if (sp.unk_id_ < 0) return format_error(where, "pieces: no piece of type UNKNOWN");
  if (spec.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      if (sp.byte_ids_[b] < 0) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        return format_error(where, std::string("pieces: trainer_spec.byte_fallback is true but there is no BYTE piece ") + name);
      }
    }
  }
  // Upstream keeps two maps (normal/user-defined/unused pieces, and the others) and
  // tolerates one string in both; one piece string per id here, so ids and strings
  // convert both ways.
  if (spec.trie.size != 0) {  // the converter's: checked, then used in place
    const std::string problem = sp.trie_.adopt(sp.pieces_, spec.trie);
    if (!problem.empty()) return format_error(where, problem);
  } else if (const PieceTrie::Duplicate dup = sp.trie_.build(sp.pieces_); dup.first >= 0)
    return format_error(where, "pieces[" + std::to_string(dup.second) + "]: " + detail::quoted(sp.pieces_[static_cast<size_t>(dup.second)], 40) +
                                   " duplicates pieces[" + std::to_string(dup.first) + "]");

  Result<CharsMap> map = CharsMap::parse(spec.precompiled_charsmap, where + ": normalizer_spec");
  if (!map) return map.error();
  NormalizerFlags flags;
  flags.add_dummy_prefix = spec.add_dummy_prefix;
  flags.remove_extra_whitespaces = spec.remove_extra_whitespaces;
  flags.escape_whitespaces = spec.escape_whitespaces;
  flags.treat_whitespace_as_suffix = spec.treat_whitespace_as_suffix;
  sp.normalizer_ = Normalizer(map.value(), flags);
  return sp;
}

int32_t SentencePiece::piece_to_id(std::string_view piece) const {
  const int32_t id = trie_.find(piece);
  return id < 0 ? unk_id_ : id;
}

size_t SentencePiece::longest_user_defined(std::string_view text) const {
  size_t longest = 0;
  uint32_t node = PieceTrie::root();
  for (size_t i = 0; i < text.size(); ++i) {
    node = trie_.child(node, static_cast<unsigned char>(text[i]));
    if (node == PieceTrie::kNone) break;
    const int32_t id = trie_.id(node);
    if (id >= 0 && types_[static_cast<size_t>(id)] == PieceType::kUserDefined) longest = i + 1;
  }
  return longest;
}

Status SentencePiece::encode(std::string_view text, Encoding& out) const {
  out.pieces_.clear();
  out.spans_.clear();
  if (text.size() > UINT32_MAX)  // surfaces are 32-bit offsets
    return Error{ErrorCode::kInvalidArgument, "the text exceeds " + std::to_string(UINT32_MAX) + " bytes"};
  Status normalized = normalizer_.normalize(text, has_user_defined_ ? this : nullptr, kMaxNormalizedBytes,
                                            out.normalized_, &out.norm_to_orig_);
  if (!normalized) {
    out.normalized_.clear();
    return normalized;
  }
  if (out.normalized_.empty()) return Status::ok();
  const std::string_view view(out.normalized_.data(), out.normalized_.size());
  if (algorithm_ == SpmAlgorithm::kUnigram)
    encode_unigram(view, out);
  else
    encode_bpe(view, out);
  emit_pieces(out);
  return Status::ok();
}

void SentencePiece::emit_pieces(Encoding& work) const {
  bool previous_unknown = false;
  const std::vector<uint32_t>& to_input = work.norm_to_orig_;
  for (const Encoding::Span& span : work.spans_) {
    const bool unknown = types_[static_cast<size_t>(span.id)] == PieceType::kUnknown;
    const uint32_t begin = to_input[span.begin], end = to_input[span.begin + span.size];
    if (unknown && byte_fallback_) {
      for (uint32_t i = 0; i < span.size; ++i) {
        const int32_t id = byte_ids_[static_cast<unsigned char>(work.normalized_[span.begin + i])];
        const bool last = i + 1 == span.size;  // holds the character's surface
        work.pieces_.push_back(Piece{id, pieces_[static_cast<size_t>(id)], begin, last ? end : begin});
      }
    } else if (unknown && previous_unknown &&
               work.pieces_.back().text.data() + work.pieces_.back().text.size() ==
                   work.normalized_.data() + span.begin) {
      // One piece for a run of unknown characters; the view grows only over the span
      // that follows it in the normalized text (the segmenters emit spans in order).
      Piece& run = work.pieces_.back();
      run.text = std::string_view(run.text.data(), run.text.size() + span.size);
      run.end = end;
    } else if (unknown) {  // its text is the input's (normalized), not the unknown piece's
      work.pieces_.push_back(
          Piece{span.id, std::string_view(work.normalized_.data() + span.begin, span.size), begin, end});
    } else {
      work.pieces_.push_back(Piece{span.id, pieces_[static_cast<size_t>(span.id)], begin, end});
    }
    previous_unknown = unknown;
  }
}

template <class PieceAt>
void SentencePiece::decode_impl(size_t count, PieceAt piece_at, std::string& out, std::vector<TextRange>* ranges) const {
  out.clear();
  if (ranges != nullptr) ranges->assign(count, TextRange{});
  std::string bytes;  // a run of byte pieces, decoded together as UTF-8
  size_t bytes_from = 0;  // the piece of bytes[0]
  auto flush_bytes = [&]() {
    for (size_t at = 0; at < bytes.size();) {
      const size_t length = detail::utf8_sequence(bytes, at);
      const size_t begin = out.size();
      if (length == 0) {
        out += kReplacementCharacter;
      } else {
        out.append(bytes, at, length);
      }
      const size_t consumed = length == 0 ? 1 : length;
      if (ranges != nullptr) {  // the character's last byte piece holds it, the others are empty
        for (size_t j = 0; j < consumed; ++j)
          (*ranges)[bytes_from + at + j] = j + 1 == consumed ? TextRange{begin, out.size()} : TextRange{begin, begin};
      }
      at += consumed;
    }
    bytes.clear();
  };
  // Upstream strips the ▁ of the first piece that yields text (the dummy prefix),
  // while the output is still empty.
  bool at_start = true, stripped_space = false;
  for (size_t i = 0; i < count; ++i) {
    std::string_view piece;
    int32_t id = 0;
    piece_at(i, piece, id);
    const PieceType type = types_[static_cast<size_t>(id)];
    if (type == PieceType::kByte) {
      if (bytes.empty()) bytes_from = i;
      bytes.push_back(static_cast<char>(byte_of_piece(pieces_[static_cast<size_t>(id)])));
      continue;
    }
    flush_bytes();
    const size_t begin = out.size();
    if (stripped_space || !out.empty()) at_start = false;
    stripped_space = false;
    if (type == PieceType::kControl) {  // <s>, </s>: invisible
    } else if (type == PieceType::kUnknown) {
      out += piece == pieces_[static_cast<size_t>(id)] ? std::string_view(unk_surface_) : piece;
    } else {
      if (at_start && strip_leading_space_ && piece.compare(0, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
        piece.remove_prefix(kSpaceSymbol.size());
        stripped_space = !remove_extra_whitespaces_;
      }
      for (size_t at = 0;;) {  // ▁ -> space
        const size_t found = piece.find(kSpaceSymbol, at);
        out.append(piece.data() + at, (found == std::string_view::npos ? piece.size() : found) - at);
        if (found == std::string_view::npos) break;
        out += ' ';
        at = found + kSpaceSymbol.size();
      }
    }
    if (ranges != nullptr) (*ranges)[i] = TextRange{begin, out.size()};
  }
  flush_bytes();
}

Status SentencePiece::decode(const int32_t* ids, size_t count, std::string& out) const {
  std::vector<TextRange>* no_ranges = nullptr;
  return decode_checked(ids, count, out, no_ranges);
}

Status SentencePiece::decode(const int32_t* ids, size_t count, std::string& out, std::vector<TextRange>& ranges) const {
  return decode_checked(ids, count, out, &ranges);
}

Status SentencePiece::decode_checked(const int32_t* ids, size_t count, std::string& out,
                                     std::vector<TextRange>* ranges) const {
  for (size_t i = 0; i < count; ++i) {
    if (ids[i] < 0 || ids[i] >= size()) {
      out.clear();
      return Error{ErrorCode::kInvalidArgument, "token id " + std::to_string(ids[i]) + " (position " +
                                                    std::to_string(i) + ") is outside the " +
                                                    std::to_string(size()) + " SentencePiece pieces"};
    }
  }
  decode_impl(
      count,
      [&](size_t i, std::string_view& piece, int32_t& id) {
        id = ids[i];
        piece = pieces_[static_cast<size_t>(id)];
      },
      out, ranges);
  return Status::ok();
}

void SentencePiece::decode_pieces(const std::string_view* pieces, size_t count, std::string& out) const {
  decode_impl(
      count,
      [&](size_t i, std::string_view& piece, int32_t& id) {
        piece = pieces[i];
        id = piece_to_id(piece);
      },
      out, nullptr);
}

}  // namespace petrel::text
