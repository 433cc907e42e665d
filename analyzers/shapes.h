// Parsing the operator inputs recorded with record_shapes (private to analyzers/).
//
// Kineto (torch.profiler record_shapes=True) and our collector write, per op, "Input Dims" and
// "Input type" as JSON arrays; the reader keeps their raw text (profiler::OpInputs). These parse
// that text once, at the point of use, into typed values:
//   "[[16, 32], [10, 32], [10]]"               -> {{16, 32}, {10, 32}, {10}}
//   "[\"c10::BFloat16\", \"float\", \"\"]"   -> {"c10::BFloat16", "float", ""}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

using Dims = std::vector<std::vector<int64_t>>;

// "[[32, 3, 224, 224], [64, 3, 7, 7], [64], []]" -> {{32,3,224,224},{64,3,7,7},{64},{}}.
// Nested deeper than two levels (tensor lists) is flattened into its first level. nullopt when
// the text is not a dims array.
std::optional<Dims> ParseDims(std::string_view s);

// "[\"float\", \"c10::BFloat16\", \"\"]" -> {"float", "c10::BFloat16", ""}. nullopt when the
// text is not an array of strings.
std::optional<std::vector<std::string>> ParseTypes(std::string_view s);

// The op's parsed inputs, or nullopt when it has none recorded.
std::optional<Dims> OpDims(const profiler::Trace& trace, const profiler::Event& e);
std::optional<std::vector<std::string>> OpTypes(const profiler::Trace& trace, const profiler::Event& e);
// Its concrete inputs ("Concrete Inputs": scalars' values; our collector's tensor layouts).
std::optional<std::vector<std::string>> OpConcrete(const profiler::Trace& trace, const profiler::Event& e);

// 16-bit floating point as Kineto / c10 name it: "c10::BFloat16", "c10::Half" (also the bare
// "BFloat16", "Half", "bfloat16", "half", "float16").
bool IsHalfType(std::string_view t);

}  // namespace trainrx::analyzers
