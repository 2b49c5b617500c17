// Test-only twin of Debian's spm_encode / spm_decode on Petrel's SentencePiece, so the
// two can be diffed line for line (tests/spm_oracle.sh):
//   spm_tool MODEL.spm encode piece|id < lines     (as spm_encode --output_format=...)
//   spm_tool MODEL.spm decode id|piece < lines     (as spm_decode --input_format=...)
// Lines are split on '\n' only, like std::getline; output lines end with '\n'.
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "convert/convert_error.h"
#include "convert/spm_model.h"
#include "text/sentencepiece.h"

namespace {

// spm_decode splits on spaces and drops empty fields (its bundled absl::StrSplit):
// "a  b" is two pieces, an empty line none.
std::vector<std::string_view> split_spaces(std::string_view line) {
  std::vector<std::string_view> out;
  for (size_t at = 0; at < line.size();) {
    size_t space = line.find(' ', at);
    if (space == std::string_view::npos) space = line.size();
    if (space > at) out.push_back(line.substr(at, space - at));
    at = space + 1;
  }
  return out;
}

// atoi as spm_decode uses it, without its undefined overflow: leading blanks, a sign,
// digits; anything else ends the number (0 if none); out-of-range values saturate.
int32_t parse_id(std::string_view s) {
  const std::string copy(s);
  errno = 0;
  const long value = std::strtol(copy.c_str(), nullptr, 10);
  if (value > INT_MAX) return INT_MAX;
  if (value < INT_MIN) return INT_MIN;
  return static_cast<int32_t>(value);
}

int usage() {
  std::cerr << "usage: spm_tool MODEL.spm encode piece|id < lines\n"
               "       spm_tool MODEL.spm decode id|piece < lines\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return usage();
  const std::string mode = argv[2], format = argv[3];
  if ((mode != "encode" && mode != "decode") || (format != "piece" && format != "id")) return usage();

  petrel::convert::SpmModel model;
  try {
    model = petrel::convert::read_spm_model(argv[1]);
  } catch (const petrel::convert::ConvertError& e) {
    std::cerr << "spm_tool: " << e.what() << "\n";
    return 1;
  }
  auto created = petrel::text::SentencePiece::create(model.spec(), argv[1]);
  if (!created) {
    std::cerr << "spm_tool: " << created.error().message << "\n";
    return 1;
  }
  const petrel::text::SentencePiece& sp = created.value();

  std::ios::sync_with_stdio(false);
  std::string line, out;
  petrel::text::Encoding encoding;
  std::vector<int32_t> ids;
  size_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    out.clear();
    if (mode == "encode") {
      if (auto status = sp.encode(line, encoding); !status) {
        std::cerr << "spm_tool: line " << line_number << ": " << status.error().message << "\n";
        return 1;
      }
      for (const petrel::text::Piece& piece : encoding.pieces()) {
        if (&piece != &encoding.pieces().front()) out += ' ';
        if (format == "piece")
          out.append(piece.text.data(), piece.text.size());
        else
          out += std::to_string(piece.id);
      }
    } else {
      const std::vector<std::string_view> fields = split_spaces(line);
      if (format == "piece") {
        sp.decode_pieces(fields, out);
      } else {
        ids.clear();
        for (std::string_view f : fields) ids.push_back(parse_id(f));
        if (auto status = sp.decode(ids, out); !status) {
          std::cerr << "spm_tool: line " << line_number << ": " << status.error().message << "\n";
          return 1;
        }
      }
    }
    out += '\n';
    std::cout.write(out.data(), static_cast<std::streamsize>(out.size()));
  }
  std::cout.flush();
  return std::cout ? 0 : 1;
}
