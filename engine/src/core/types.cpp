// The public value types' names (petrel/types.h: to_string, parse_activation_scales).
// Here, below every layer, rather than with the model (model.cpp): the loader's messages
// name dtypes, and no layer may depend on the top.
#include "petrel/types.h"

#include <string>

namespace petrel {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kInt8: return "int8";
    case DType::kInt4: return "int4";
  }
  return "?";
}
const char* to_string(Activation a) {
  switch (a) {
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kSwish: return "swish";
    case Activation::kGeluTanh: return "gelu-tanh";
  }
  return "?";
}
const char* to_string(NormPlacement n) { return n == NormPlacement::kPre ? "pre" : "post"; }
const char* to_string(NormKind k) { return k == NormKind::kRmsNorm ? "rms-norm" : "layer-norm"; }
const char* to_string(PositionKind k) {
  switch (k) {
    case PositionKind::kNone: return "none";
    case PositionKind::kSinusoidalInterleaved: return "sinusoidal-interleaved";
    case PositionKind::kSinusoidalConcatenated: return "sinusoidal-concatenated";
    case PositionKind::kLearned: return "learned";
    case PositionKind::kRotary: return "rotary";
  }
  return "?";
}
const char* to_string(BeamStop stop) {
  switch (stop) {
    case BeamStop::kDefault: return "default";
    case BeamStop::kHeuristic: return "heuristic";
    case BeamStop::kFirstK: return "first-k";
  }
  return "?";
}
const char* to_string(FrequencyConvention f) {
  return f == FrequencyConvention::kPaper ? "paper" : "marian-cpp";
}
const char* to_string(ActivationScales scales) {
  return scales == ActivationScales::kFile ? "file" : "dynamic";
}
bool parse_activation_scales(const std::string& text, ActivationScales* out) {
  if (text == "dynamic") *out = ActivationScales::kDynamic;
  else if (text == "file") *out = ActivationScales::kFile;
  else return false;
  return true;
}

}  // namespace petrel
