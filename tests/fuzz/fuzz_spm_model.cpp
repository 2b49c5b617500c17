// Fuzz target: a SentencePiece model file (.spm, a serialized ModelProto) through the
// converter's strict protobuf reader (convert::parse_spm_model), then, when it reads,
// the engine's SentencePiece built from it (text::SentencePiece::create, which checks
// the spec as untrusted: piece types, the unknown piece, byte pieces, the charsmap),
// encoding fixed texts and texts made of the model's own pieces and decoding every id.
// The reader must refuse a bad file with ConvertError and create with kFormat; a
// model that builds must keep its promises: ids in range, pieces and decoded text
// UTF-8, piece <-> id both ways. Anything else, a crash or a sanitizer report is a
// finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "convert/convert_error.h"
#include "convert/spm_model.h"
#include "exercise_model.h"
#include "text/sentencepiece.h"

namespace {

using petrel::detail::is_valid_utf8;
using petrel::fuzz::require;

// Ordinary and awkward text: scripts, spaces of every kind, rewritten characters,
// language codes, control pieces, broken UTF-8, NUL.
constexpr std::string_view kTexts[] = {
    "Hello world",
    "  two  spaces\tand a tab ",
    "Gr\xc3\xbc\xc3\x9f" "e \xe6\x95\xb0\xe6\x8d\xae \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
    "\xef\xbc\xa1\xef\xbc\xa2 \xef\xac\x81 \xe2\x91\xa0 \xe3\x80\x80x",  // full-width, ligature, circled, ideographic space
    ">>fra<< </s> <unk> <s>",
    "\xff\xfe\xc3 broken \xed\xa0\x80",
    std::string_view("nul\0byte", 8),
    "",
    "\xe2\x96\x81 a\xe2\x96\x81",
};

bool verbose() {
  static const bool on = std::getenv("PETREL_FUZZ_VERBOSE") != nullptr;
  return on;
}

void check_encoding(const petrel::text::SentencePiece& sp, std::string_view text, petrel::text::Encoding& e) {
  const auto s = sp.encode(text, e);
  require(s.has_value(), "a short text encodes");
  require(is_valid_utf8(e.normalized()), "normalized text is UTF-8");
  std::vector<int32_t> ids;
  for (const petrel::text::Piece& p : e.pieces()) {
    require(p.id >= 0 && p.id < sp.size(), "piece ids are in range");
    require(is_valid_utf8(p.text), "pieces are UTF-8");
    ids.push_back(p.id);
  }
  std::string decoded;
  require(sp.decode(ids, decoded).has_value(), "encoded ids decode");
  require(is_valid_utf8(decoded), "decoded text is UTF-8");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petrel;
  convert::SpmModel model;
  try {
    model = convert::parse_spm_model(std::string(reinterpret_cast<const char*>(data), size), "fuzz.spm");
  } catch (const convert::ConvertError& e) {
    if (verbose()) std::fprintf(stderr, "fuzz_spm_model: refused: %s\n", e.what());
    return 0;
  }
  const size_t n = model.pieces.size();
  require(n > 0 && model.scores.size() == n && model.types.size() == n, "one score and type per piece");
  for (std::string_view piece : model.pieces) require(is_valid_utf8(piece), "the reader keeps UTF-8 pieces only");
  require(is_valid_utf8(model.unk_surface) && is_valid_utf8(model.normalizer_name), "the reader keeps UTF-8 names");

  auto created = text::SentencePiece::create(model.spec(), "fuzz.spm");
  if (!created) {
    if (verbose()) std::fprintf(stderr, "fuzz_spm_model: not built: %s\n", created.error().message.c_str());
    require(created.error().code == ErrorCode::kFormat && !created.error().message.empty(),
            "a refused spec gets a kFormat message");
    return 0;
  }
  const text::SentencePiece& sp = created.value();
  require(sp.size() == static_cast<int32_t>(n), "every piece is kept");
  require(sp.type(sp.unk_id()) == text::PieceType::kUnknown, "the unknown id is the unknown piece");

  text::Encoding e;
  for (std::string_view t : kTexts) check_encoding(sp, t, e);
  // Text made of the model's pieces (▁ spelled as a space), so the segmenters find them.
  std::string own;
  for (size_t i = 0; i < n && own.size() < 512; i += 1 + n / 24) {
    std::string piece(model.pieces[i]);
    for (size_t at; (at = piece.find("\xe2\x96\x81")) != std::string::npos;) piece.replace(at, 3, " ");
    own += piece;
  }
  check_encoding(sp, own, e);

  // Every id decodes, alone and all together; one past the end is refused.
  std::vector<int32_t> all;
  std::string decoded;
  for (int32_t id = 0; id < sp.size(); ++id) {
    require(sp.piece_to_id(sp.id_to_piece(id)) == id, "pieces and ids convert both ways");
    all.push_back(id);
  }
  require(sp.decode(all, decoded).has_value() && is_valid_utf8(decoded), "every id decodes to UTF-8");
  all.push_back(sp.size());
  const auto refused = sp.decode(all, decoded);
  require(!refused.has_value() && refused.error().code == ErrorCode::kInvalidArgument, "an id past the end is refused");
  std::vector<std::string_view> pieces(model.pieces.begin(), model.pieces.end());
  pieces.push_back("no such piece");
  sp.decode_pieces(pieces, decoded);
  require(is_valid_utf8(decoded), "decoded pieces are UTF-8");
  return 0;
}
