// SentencePiece (unigram and BPE) inside the engine, without protobuf: encodes text
// into pieces and ids and decodes them back exactly as Debian's sentencepiece 0.1.97
// does (spm_encode / spm_decode, the Python module's encode / decode / decode_pieces).
//
// A model is described by a SentencePieceSpec: the fields of the .spm ModelProto that
// encoding and decoding use, as views (the model file stores them; petrel-convert's
// spm_model.h reads a .spm into one). SentencePiece::create validates the spec as
// untrusted input and builds the lookup structures once.
//
// Lifetime: a SentencePiece keeps views into the bytes the spec's views point at
// (pieces, precompiled_charsmap, a stored trie): they must outlive it. Everything else
// it owns.
// All methods are const and may run concurrently; an Encoding is per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/tokenizer_tables.h"
#include "petrel/status.h"
#include "petrel/types.h"
#include "text/spm_normalizer.h"
#include "text/spm_trie.h"

namespace petrel::text {

// The spec's types live with the loader's tables (format/tokenizer_tables.h).
using detail::kDefaultUnkSurface;
using detail::PieceType;
using detail::SentencePieceSpec;
using detail::SpmAlgorithm;

// One piece of an encoding: its SentencePiece id, its text as spm_encode prints it, and
// the input bytes it came from (upstream's surface: [begin, end); the whitespace a ▁
// stands for is part of it; of the byte pieces of one character, the last holds the
// character and the others are empty at its start).
struct Piece {
  int32_t id;
  std::string_view text;
  uint32_t begin = 0, end = 0;
};

class SentencePiece;

// The result of SentencePiece::encode and the scratch space it reuses: keep one per
// thread and pass it to every call. Piece texts view into the model's pieces or (for
// unknown pieces, whose text is the normalized input) into this object's own buffer;
// they stay valid until the next encode into it (moving the Encoding keeps them valid;
// it cannot be copied).
class Encoding {
 public:
  Encoding() = default;
  Encoding(Encoding&&) = default;
  Encoding& operator=(Encoding&&) = default;
  Encoding(const Encoding&) = delete;
  Encoding& operator=(const Encoding&) = delete;

  const std::vector<Piece>& pieces() const { return pieces_; }
  // The text after normalization (▁ for spaces, dummy prefix, character rules).
  std::string_view normalized() const { return {normalized_.data(), normalized_.size()}; }

 private:
  friend class SentencePiece;
  // A piece as the algorithms produce it: bytes [begin, begin + size) of the normalized text.
  struct Span {
    uint32_t begin, size;
    int32_t id;
  };
  struct BestPath {  // unigram: the best segmentation ending at a byte position
    float score;
    int32_t starts_at;  // -1: none yet
    int32_t id;
  };
  struct Symbol {  // BPE: a symbol of the text being merged
    uint32_t begin, size;
    int32_t prev, next;
    uint32_t node;  // trie node of the symbol's bytes (PieceTrie::kNone: none)
    bool frozen;    // a user-defined symbol: never merged
  };
  struct Pair {  // BPE: a candidate merge of symbols left and right
    float score;
    int32_t left, right;
    uint32_t size;  // bytes of the merged piece (a stale candidate's differs)
    uint32_t node;  // trie node of the merged piece
  };
  std::vector<Piece> pieces_;
  std::vector<char> normalized_;
  std::vector<uint32_t> norm_to_orig_;  // Normalizer::normalize's
  std::vector<Span> spans_;
  std::vector<BestPath> best_;
  std::vector<Symbol> symbols_;
  std::vector<Pair> agenda_;
  std::vector<Span> stack_;
};

class SentencePiece : private Normalizer::SymbolMatcher {
 public:
  // Validates `spec` (sizes, piece types, exactly one unknown piece, no empty or
  // duplicate pieces, byte pieces <0x00>..<0xFF> iff byte_fallback, the charsmap's
  // header) and builds the model. Errors (kFormat) name `where` and the field.
  // A spec handed over (std::move) gives its scores and types to the model uncopied.
  static Result<SentencePiece> create(SentencePieceSpec spec, const std::string& where);

  // Normalizes `text` and segments it: the pieces spm_encode prints (no bos/eos added).
  // Any bytes are accepted (malformed UTF-8 becomes U+FFFD). Fails (kInvalidArgument)
  // only when the normalized text would exceed kMaxNormalizedBytes (the scratch space
  // grows by up to 24 bytes per normalized byte; no sentence comes near it).
  Status encode(std::string_view text, Encoding& out) const;
  static constexpr size_t kMaxNormalizedBytes = size_t{64} << 20;

  // The text of pieces given by id, as spm_decode --input_format=id prints it.
  // Fails (kInvalidArgument) on an id outside [0, size()).
  Status decode(const int32_t* ids, size_t count, std::string& out) const;
  Status decode(const std::vector<int32_t>& ids, std::string& out) const {
    return decode(ids.data(), ids.size(), out);
  }
  // The same, with each id's bytes of `out` (upstream's decoded surfaces: a control
  // piece's range is empty where it stands; of the byte pieces of one character, the
  // last holds the character and the others are empty at its start).
  Status decode(const int32_t* ids, size_t count, std::string& out, std::vector<TextRange>& ranges) const;
  // The text of pieces given as strings (spm_decode --input_format=piece, Python's
  // decode_pieces): a string that is no piece counts as unknown and is copied verbatim.
  void decode_pieces(const std::string_view* pieces, size_t count, std::string& out) const;
  void decode_pieces(const std::vector<std::string_view>& pieces, std::string& out) const {
    decode_pieces(pieces.data(), pieces.size(), out);
  }

  SpmAlgorithm algorithm() const { return algorithm_; }
  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  int32_t unk_id() const { return unk_id_; }
  // id must be in [0, size()).
  std::string_view id_to_piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
  PieceType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  // The id of piece `piece`, unk_id() when it is no piece (as upstream's PieceToId).
  int32_t piece_to_id(std::string_view piece) const;

 private:
  SentencePiece() = default;
  size_t longest_user_defined(std::string_view text) const override;
  void encode_unigram(std::string_view normalized, Encoding& work) const;
  void encode_bpe(std::string_view normalized, Encoding& work) const;
  // spm's PopulateSentencePieceText: merges runs of unknown pieces, or splits them into
  // byte pieces under byte_fallback.
  void emit_pieces(Encoding& work) const;
  Status decode_checked(const int32_t* ids, size_t count, std::string& out, std::vector<TextRange>* ranges) const;
  template <class PieceAt>
  void decode_impl(size_t count, PieceAt piece_at, std::string& out, std::vector<TextRange>* ranges) const;

  // An array either owned or viewed (a model file's); copies keep viewing valid storage.
  template <class T>
  class ArrayView {
   public:
    ArrayView() = default;
    explicit ArrayView(const T* viewed) : data_(viewed) {}
    explicit ArrayView(std::vector<T> owned) : own_(std::move(owned)), data_(own_.data()) {}
    ArrayView(const ArrayView& o) : own_(o.own_), data_(o.own_.empty() ? o.data_ : own_.data()) {}
    ArrayView(ArrayView&& o) noexcept : own_(std::move(o.own_)), data_(o.data_) {}  // a moved vector keeps its data
    ArrayView& operator=(ArrayView o) noexcept {
      own_.swap(o.own_);
      std::swap(data_, o.data_);
      return *this;
    }
    const T& operator[](size_t i) const { return data_[i]; }

   private:
    std::vector<T> own_;
    const T* data_ = nullptr;
  };

  SpmAlgorithm algorithm_ = SpmAlgorithm::kUnigram;
  StringTable pieces_;
  ArrayView<float> scores_;
  ArrayView<PieceType> types_;
  PieceTrie trie_;  // every piece, of every type
  Normalizer normalizer_;
  bool has_user_defined_ = false;
  bool has_unused_ = false;
  bool byte_fallback_ = false;
  bool strip_leading_space_ = true;  // decoding: add_dummy_prefix || remove_extra_whitespaces
  bool remove_extra_whitespaces_ = true;
  int32_t unk_id_ = 0;
  float min_score_ = 0, max_score_ = 0;  // over normal pieces, as upstream computes them
  int32_t byte_ids_[256] = {};           // byte_fallback: the id of <0xNN>
  std::string unk_surface_;
};

}  // namespace petrel::text
