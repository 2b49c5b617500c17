// petrel-run --tokenize / --detokenize: the model's tokenizer alone, nothing translated.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/modes.h"

namespace petrel::run {

int run_tokenizer(const RunRequest& r, RunIo& io) {
  const cli::Parser& p = r.flags;
  const Model& model = *r.model;
  const TranslateOptions& options = r.translate;
  for (; io.next_window(256); io.base += io.window.size()) {
    for (size_t k = 0; k < io.window.size(); ++k) {
      Input& in = io.window[k];
      const size_t i = io.base + k;
      if (p.has("tokenize")) {
        if (RunIo::blank(in)) {
          io.emit({{"index", i}, {"text", in.text}, {"pieces", nlohmann::json::array()}, {"ids", nlohmann::json::array()}}, "");
          continue;
        }
        if (in.error) { io.report(i, *in.error); continue; }
        auto t = tokenize(model, in.text, options.source_language);
        if (!t) { io.report(i, t.error().message); continue; }
        std::string pieces;
        for (const auto& piece : t.value().pieces) pieces += (pieces.empty() ? "" : " ") + piece;
        io.emit({{"index", i}, {"text", in.text}, {"pieces", t.value().pieces}, {"ids", t.value().ids}},
             pieces + "\t" + ids_text(t.value().ids));
      } else {
        const std::vector<int32_t> ids = io.parse_ids(in, i);
        if (in.error) { io.report(i, *in.error); continue; }
        auto t = decode_text(model, ids);
        if (!t) { io.report(i, t.error().message); continue; }
        io.emit({{"index", i}, {"ids", ids}, {"text", t.value()}}, t.value());
      }
    }
  }
  io.finish();
  io.print_results();
  return io.status();
}

}  // namespace petrel::run
