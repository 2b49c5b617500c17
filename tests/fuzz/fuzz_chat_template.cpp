// Fuzz target: a chat template (text::ChatTemplate) from an untrusted model file,
// rendered over messages from the input. Layout: template NUL message NUL message ...;
// a message's first byte picks its role (system / user / assistant / tool) and sets
// enable_thinking when bit 2 is set; bits 3-5 of the first message's first byte pick
// the caller's output limit (0: kMaxOutputBytes; 1-6: 64 B to 64 KiB; 7: nothing); the
// rest is its content. parse() must refuse what it cannot run with an Error; render()
// must end with the text or an Error within its limits (output size, work and value
// budgets), every message starting with "chat template". A crash, a hang or a sanitizer
// report is a finding.
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
    require(parsed.error().message.rfind("chat template", 0) == 0, "a parse error's message starts with \"chat template\"");
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
  if (template_end + 1 < input.size()) {
    const unsigned limit = (static_cast<uint8_t>(input[template_end + 1]) >> 3) & 7;
    if (limit != 0) inputs.max_output_bytes = limit == 7 ? 0 : size_t{16} << (2 * limit);
  }
  for (const bool prompt : {true, false}) {
    inputs.add_generation_prompt = prompt;
    auto rendered = parsed.value().render(inputs);
    if (rendered) {
      require(rendered.value().size() <= inputs.max_output_bytes, "output within the caller's limit");
    } else {
      const std::string& message = rendered.error().message;
      require(message.rfind("chat template", 0) == 0, "a render error's message starts with \"chat template\"");
      require(message.find("chat template", 1) == std::string::npos || message.find("raise_exception") != std::string::npos,
              "\"chat template\" once in a render error's message");
    }
  }
  return 0;
}
