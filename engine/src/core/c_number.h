// Decimal numbers written and read as the C locale does ('.' as the radix), whatever
// LC_NUMERIC the embedding application chose: snprintf and strtod use the current
// locale's radix (',' in German, U+066B in some Arabic locales), so in a German app a
// chat template's 1.5 would read as 1 and print as "1,5". Both swap the radix around
// the C library call; std::from_chars would do without, but emscripten's libc++ has no
// floating-point from_chars.
#pragma once

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace petrel::core {

// The current locale's radix ("." in the C locale).
inline std::string_view locale_radix() {
  const char* radix = std::localeconv()->decimal_point;
  return radix != nullptr && *radix != '\0' ? std::string_view(radix) : std::string_view(".");
}

// printf's `format` (one conversion of a double, and a precision: "%.*e", "%.*g") with
// '.' as the radix.
inline std::string format_c_double(const char* format, int precision, double v) {
  char buffer[64];
  const int n = std::snprintf(buffer, sizeof buffer, format, precision, v);
  std::string text(buffer, n < 0 ? 0 : static_cast<size_t>(n) < sizeof buffer ? static_cast<size_t>(n) : sizeof buffer - 1);
  const std::string_view radix = locale_radix();
  if (radix != ".") {
    const size_t at = text.find(radix);
    if (at != std::string::npos) text.replace(at, radix.size(), ".");
  }
  return text;
}

// strtod of `text` read with '.' as the radix, as in the C locale; *consumed (when
// given) is the number of bytes read (0: no number).
inline double parse_c_double(std::string_view text, size_t* consumed = nullptr) {
  std::string local(text);
  const std::string_view radix = locale_radix();
  size_t dot = std::string::npos;
  if (radix != ".") {
    // The C locale stops at the locale's radix: so does the copy; then '.' becomes it.
    const size_t stop = local.find(radix);
    if (stop != std::string::npos) local.resize(stop);
    dot = local.find('.');
    if (dot != std::string::npos) local.replace(dot, 1, radix);
  }
  char* end = nullptr;
  const double v = std::strtod(local.c_str(), &end);
  size_t used = static_cast<size_t>(end - local.c_str());
  if (dot != std::string::npos && used > dot) used -= radix.size() - 1;
  if (consumed != nullptr) *consumed = used;
  return v;
}

}  // namespace petrel::core
