// The model file's format version: the newest this library reads (any minor of its
// major: model_file.cpp refuses another major) and the one petrel-convert writes; the C
// API reports it (petrel_format_major(), petrel_format_minor()).
#pragma once

#include <cstdint>

namespace petrel::detail {

// The newest model-file format this library reads (any minor of its major).
inline constexpr uint32_t kFormatMajor = 1;
// 1.1: optional shortlist; 1.2: generation defaults; 1.3: multilingual families;
// 1.4: Marian C++ models (SSRU decoder layers, zero start embedding, static activation scales);
// 1.5: SentencePiece models' piece tries stored by the converter (loaded in place);
// 1.6: a tokenizer's strings as one blob and spans of it (loaded in place);
// 1.7: decoder-only models (RMSNorm, RoPE, grouped-query and sliding-window attention,
// gated feed-forward layers, generation defaults of language models);
// 1.10: Panel16 int4 holds its block scales inside the panels (core/tensor.h)
inline constexpr uint32_t kFormatMinor = 10;
// The first minor whose int4 panels hold their block scales; older ones are refused.
inline constexpr uint32_t kInt4ScalesInPanelsMinor = 10;

}  // namespace petrel::detail
