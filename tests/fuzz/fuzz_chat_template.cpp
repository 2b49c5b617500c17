// Fuzz target: a chat template (text::ChatTemplate) from an untrusted model file,
// rendered over messages from the input. Layout: template NUL message NUL message ...;
// a message's first byte picks its role (system / user / assistant / tool) and sets
// enable_thinking when bit 2 is set; the rest is its content. parse() must refuse what
// it cannot run with an Error; render() must end with the text or an Error within its
// limits (output size, work budget). A crash, a hang or a sanitizer report is a finding.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "text/chat_template.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_chat_template: broken promise: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t template_end = std::min(input.find('\0'), input.size());
  auto parsed = petrel::text::ChatTemplate::parse(input.substr(0, template_end));
  if (!parsed) {
    require(!parsed.error().message.empty(), "a parse error has a message");
    return 0;
  }
  petrel::text::ChatTemplateInputs inputs;
  bool thinking = false;
  for (size_t at = template_end; at < input.size();) {
    const size_t start = at + 1;
    const size_t end = std::min(input.find('\0', start), input.size());
    if (start < end) {
      static const char* const kRoles[] = {"system", "user", "assistant", "tool"};
      const auto control = static_cast<uint8_t>(input[start]);
      inputs.messages.push_back({kRoles[control & 3], std::string(input.substr(start + 1, end - start - 1))});
      thinking = thinking || (control & 4) != 0;
    }
    at = end;
  }
  inputs.strings = {{"bos_token", "<bos>"}, {"eos_token", "<eos>"}};
  inputs.flags = {{"enable_thinking", thinking}};
  for (const bool prompt : {true, false}) {
    inputs.add_generation_prompt = prompt;
    auto rendered = parsed.value().render(inputs);
    if (rendered) require(rendered.value().size() <= petrel::text::ChatTemplate::kMaxOutputBytes, "output within its limit");
    else require(!rendered.error().message.empty(), "a render error has a message");
  }
  return 0;
}
