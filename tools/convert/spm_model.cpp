#include "convert/spm_model.h"

#include <cstdio>
#include <cstring>

#include "convert/config_reader.h"
#include "convert/convert_error.h"
#include "core/bytes.h"
#include "core/utf8.h"

namespace petrel::convert {
namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// One message of the wire format: a sequence of (tag, value) fields in [at, end).
// Offsets in messages count from the start of the file.
class MessageReader {
 public:
  MessageReader(const SpmModel& model, const char* begin, const char* end, std::string name)
      : model_(model), at_(begin), end_(end), name_(std::move(name)) {}

  bool done() const { return at_ == end_; }
  const std::string& name() const { return name_; }

  // Reads the next tag; returns the field number and sets `wire`.
  uint32_t next_field(int& wire) {
    field_offset_ = offset();
    const uint64_t tag = varint("a field tag");
    wire = static_cast<int>(tag & 7);
    const uint64_t number = tag >> 3;
    if (number == 0 || number > 0x1fffffff) fail("field number " + std::to_string(number) + " is invalid");
    if (wire == kStartGroup || wire == kEndGroup) fail("groups (wire type " + std::to_string(wire) + ") are not supported");
    if (wire > kFixed32) fail("wire type " + std::to_string(wire) + " is invalid");
    return static_cast<uint32_t>(number);
  }

  void expect(int wire, int expected, const char* field) {
    static const char* const kNames[] = {"varint", "64-bit", "length-delimited", "group start", "group end", "32-bit"};
    if (wire != expected)
      fail(std::string(field) + ": wire type " + kNames[wire] + ", expected " + kNames[expected]);
  }

  uint64_t varint(const char* what) {
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (at_ == end_) fail(std::string("truncated varint in ") + what);
      const auto byte = static_cast<unsigned char>(*at_++);
      if (shift == 63 && byte > 1) fail(std::string("bad varint in ") + what + " (more than 64 bits)");
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail(std::string("bad varint in ") + what + " (longer than 10 bytes)");
  }
  bool boolean(const char* field) { return varint(field) != 0; }
  // int32 fields: negative values are sign-extended to 64 bits on the wire.
  int32_t int32(const char* field) { return static_cast<int32_t>(static_cast<uint32_t>(varint(field))); }

  std::string_view bytes(const char* field) {
    const uint64_t length = varint(field);
    if (length > static_cast<uint64_t>(end_ - at_))
      fail(std::string(field) + ": length " + std::to_string(length) + " runs past the end of " +
           (name_.empty() ? std::string("the file") : name_) + " (" + std::to_string(end_ - at_) + " bytes left)");
    const std::string_view out(at_, static_cast<size_t>(length));
    at_ += length;
    return out;
  }
  // A string field the model file stores: Petrel hands pieces and names out as text,
  // so they must be UTF-8 (spm_train writes UTF-8; proto2 does not check).
  std::string_view text(const char* field) {
    const std::string_view out = bytes(field);
    const size_t bad = detail::utf8_invalid_at(out);
    if (bad != out.size()) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(out[bad])));
      fail(std::string(field) + ": not valid UTF-8 (byte " + byte + " at file offset " +
           std::to_string(offset() - out.size() + bad) + ")");
    }
    return out;
  }
  MessageReader message(const char* field, std::string name) {
    const std::string_view body = bytes(field);
    return MessageReader(model_, body.data(), body.data() + body.size(), std::move(name));
  }
  float fixed32_float(const char* field) {
    if (end_ - at_ < 4) fail(std::string(field) + ": truncated 32-bit value");
    const uint32_t bits = detail::load_le32(at_);
    at_ += 4;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  void skip(int wire) {
    switch (wire) {
      case kVarint: varint("an unknown field"); break;
      case kFixed64:
        if (end_ - at_ < 8) fail("truncated 64-bit value of an unknown field");
        at_ += 8;
        break;
      case kLengthDelimited: bytes("an unknown field"); break;
      case kFixed32:
        if (end_ - at_ < 4) fail("truncated 32-bit value of an unknown field");
        at_ += 4;
        break;
      default: fail("wire type " + std::to_string(wire) + " is invalid");
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw ConvertError(model_.path + ": " + (name_.empty() ? std::string() : name_ + ": ") + what +
                       " (field at byte offset " + std::to_string(field_offset_) + ")");
  }

 private:
  size_t offset() const { return static_cast<size_t>(at_ - model_.data->data()); }

  const SpmModel& model_;
  const char* at_;
  const char* end_;
  std::string name_;
  size_t field_offset_ = 0;
};

void read_piece(MessageReader r, SpmModel& m) {
  std::string_view piece;
  bool has_piece = false;
  float score = 0.0f;
  auto type = text::PieceType::kNormal;
  while (!r.done()) {
    int wire = 0;
    switch (r.next_field(wire)) {
      case 1:
        r.expect(wire, kLengthDelimited, "piece");
        piece = r.text("piece");
        has_piece = true;
        if (piece.size() > detail::kMaxPieceBytes)
          r.fail("piece: " + std::to_string(piece.size()) + " bytes, more than the " +
                 std::to_string(detail::kMaxPieceBytes) + " a piece may have");
        break;
      case 2:
        r.expect(wire, kFixed32, "score");
        score = r.fixed32_float("score");
        break;
      case 3: {
        r.expect(wire, kVarint, "type");
        const uint64_t value = r.varint("type");
        if (value < 1 || value > 6) r.fail("type: " + std::to_string(value) + " is no SentencePiece.Type (1..6)");
        type = static_cast<text::PieceType>(value);
        break;
      }
      default: r.skip(wire);
    }
  }
  if (!has_piece) r.fail("no piece string (field 1)");
  m.pieces.push_back(piece);
  m.scores.push_back(score);
  m.types.push_back(type);
}

void read_trainer_spec(MessageReader r, SpmModel& m) {
  while (!r.done()) {
    int wire = 0;
    const uint32_t field = r.next_field(wire);
    auto string_field = [&](const char* name, std::string_view& to) {
      r.expect(wire, kLengthDelimited, name);
      to = r.bytes(name);
    };
    auto int32_field = [&](const char* name, int32_t& to) {
      r.expect(wire, kVarint, name);
      to = r.int32(name);
    };
    auto bool_field = [&](const char* name, bool& to) {
      r.expect(wire, kVarint, name);
      to = r.boolean(name);
    };
    switch (field) {
      case 3: {
        r.expect(wire, kVarint, "model_type");
        const uint64_t type = r.varint("model_type");
        if (type == 1 || type == 2) {
          m.algorithm = static_cast<text::SpmAlgorithm>(type);
        } else if (type == 3 || type == 4) {
          r.fail(std::string("model_type: ") + (type == 3 ? "WORD" : "CHAR") +
                 " models are not supported (only UNIGRAM and BPE)");
        } else {
          r.fail("model_type: " + std::to_string(type) + " is no ModelType (1..4)");
        }
        break;
      }
      case 24: bool_field("treat_whitespace_as_suffix", m.treat_whitespace_as_suffix); break;
      case 35: bool_field("byte_fallback", m.byte_fallback); break;
      case 40: int32_field("unk_id", m.unk_id); break;
      case 41: int32_field("bos_id", m.bos_id); break;
      case 42: int32_field("eos_id", m.eos_id); break;
      case 43: int32_field("pad_id", m.pad_id); break;
      case 44:
        r.expect(wire, kLengthDelimited, "unk_surface");
        m.unk_surface = r.text("unk_surface");
        break;
      case 45: string_field("unk_piece", m.unk_piece); break;
      case 46: string_field("bos_piece", m.bos_piece); break;
      case 47: string_field("eos_piece", m.eos_piece); break;
      case 48: string_field("pad_piece", m.pad_piece); break;
      default: r.skip(wire);
    }
  }
}

// `denormalizer`: the spec of decoding rules, which Petrel does not implement.
void read_normalizer_spec(MessageReader r, SpmModel& m, bool denormalizer) {
  SpmModel ignored;
  SpmModel& to = denormalizer ? ignored : m;
  while (!r.done()) {
    int wire = 0;
    const uint32_t field = r.next_field(wire);
    switch (field) {
      case 1:
        r.expect(wire, kLengthDelimited, "name");
        to.normalizer_name = r.text("name");
        break;
      case 2:
        r.expect(wire, kLengthDelimited, "precompiled_charsmap");
        to.precompiled_charsmap = r.bytes("precompiled_charsmap");
        break;
      case 3:
        r.expect(wire, kVarint, "add_dummy_prefix");
        to.add_dummy_prefix = r.boolean("add_dummy_prefix");
        break;
      case 4:
        r.expect(wire, kVarint, "remove_extra_whitespaces");
        to.remove_extra_whitespaces = r.boolean("remove_extra_whitespaces");
        break;
      case 5:
        r.expect(wire, kVarint, "escape_whitespaces");
        to.escape_whitespaces = r.boolean("escape_whitespaces");
        break;
      default: r.skip(wire);
    }
  }
  if (denormalizer && !ignored.precompiled_charsmap.empty())
    r.fail("precompiled_charsmap: decoding rules (spm_train --decode_normalization_rule_tsv) are not supported");
}

}  // namespace

text::SentencePieceSpec SpmModel::spec() const {
  text::SentencePieceSpec s;
  s.algorithm = algorithm;
  s.pieces = StringTable(pieces);
  s.scores = scores;
  s.types = types;
  s.precompiled_charsmap = precompiled_charsmap;
  s.add_dummy_prefix = add_dummy_prefix;
  s.remove_extra_whitespaces = remove_extra_whitespaces;
  s.escape_whitespaces = escape_whitespaces;
  s.treat_whitespace_as_suffix = treat_whitespace_as_suffix;
  s.byte_fallback = byte_fallback;
  s.unk_surface = unk_surface;
  return s;
}

SpmModel parse_spm_model(std::string bytes, const std::string& name) {
  SpmModel m;
  m.path = name;
  m.data = std::make_shared<const std::string>(std::move(bytes));
  const std::string& data = *m.data;
  MessageReader model(m, data.data(), data.data() + data.size(), "");
  while (!model.done()) {
    int wire = 0;
    const uint32_t field = model.next_field(wire);
    switch (field) {
      case 1: {
        const std::string piece_name = "pieces[" + std::to_string(m.pieces.size()) + "]";
        model.expect(wire, kLengthDelimited, piece_name.c_str());
        read_piece(model.message(piece_name.c_str(), piece_name), m);
        break;
      }
      // An embedded message that occurs twice is merged (proto semantics): reading both
      // into the same fields does that.
      case 2:
        model.expect(wire, kLengthDelimited, "trainer_spec");
        read_trainer_spec(model.message("trainer_spec", "trainer_spec"), m);
        break;
      case 3:
        model.expect(wire, kLengthDelimited, "normalizer_spec");
        read_normalizer_spec(model.message("normalizer_spec", "normalizer_spec"), m, false);
        break;
      case 5:
        model.expect(wire, kLengthDelimited, "denormalizer_spec");
        read_normalizer_spec(model.message("denormalizer_spec", "denormalizer_spec"), m, true);
        break;
      default: model.skip(wire);  // self_test_data (4), extensions, fields of newer versions
    }
  }
  if (m.pieces.empty()) throw ConvertError(name + ": pieces: the model has no pieces (is this a SentencePiece model?)");
  return m;
}

SpmModel read_spm_model(const std::string& path) {
  return parse_spm_model(read_text(path, " the SentencePiece model"), path);
}

}  // namespace petrel::convert
