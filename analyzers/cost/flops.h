// FLOPs and bytes of one operator from its recorded input shapes and dtypes (issue 52; private to
// analyzers/, used by utilization.cc). Pure functions of the op's name, "Input Dims", "Input type"
// and, where the trace has them, torch.profiler's "Concrete Inputs" (strides, paddings, flags).
//
// What is counted (a multiply-add is 2 FLOPs, as torch.utils.flop_counter, cuBLAS and every MFU
// paper count it):
//   matmul     mm, addmm, bmm, baddbmm, linear, matmul, _scaled_mm: 2·batch·M·K·N (the bias add of
//              addmm / linear is not counted, as flop_counter does not)
//   conv       conv1d/2d/3d, convolution, _convolution, cudnn/mkldnn/miopen_convolution, transposed
//              too: 2·N·C_out·prod(out)·(C_in/groups)·prod(kernel); backward (convolution_backward,
//              cudnn_convolution_backward, ..._input): one forward's FLOPs per gradient computed
//              (output_mask where recorded, else both). The output size comes from stride, padding
//              and dilation ("Concrete Inputs"), else from a backward of the same input and weight
//              shapes in the trace (its grad_output is the output), else the op is not costed.
//   attention  scaled_dot_product_attention and its flash / efficient / cudnn / CPU forms:
//              2·B·H·Sq·Sk·(D + Dv), backward twice that; causal (is_causal recorded true) halves
//              it (torch.utils.flop_counter does not halve: a causal model reads 2x higher there).
//   norm, softmax, loss, elementwise: per-element estimates (layer/batch/group norm 5, RMS norm 4,
//              softmax and log_softmax 5, their backwards 2x, cross-entropy 5 per logit, simple
//              arithmetic 1, transcendental activations 4-8); small next to the matmuls, they are
//              shown but not part of model FLOPs.
//   embedding  no FLOPs; bytes only.
// Bytes: every input tensor read once and the output written once (the lower bound a roofline
// uses); an in-place op writes its first input.
// Not modeled (reported as uncovered time): einsum and other ops whose inner mm / bmm are costed
// instead, the optimizer's foreach / fused kernels (tensor lists), custom and Triton kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shapes.h"

namespace trainrx::analyzers {

enum class OpClass : uint8_t { kMatmul, kConv, kAttention, kNorm, kSoftmax, kLoss, kElementwise, kEmbedding };
std::string_view OpClassName(OpClass c);  // "matmul", "conv", ...
// Matmul, convolution and attention: the FLOPs that count in MFU (model FLOPs).
inline bool IsModelFlopClass(OpClass c) { return c == OpClass::kMatmul || c == OpClass::kConv || c == OpClass::kAttention; }

// "fp32", "bf16", "fp16", "fp8", "fp64", "int" from a recorded type name ("float",
// "c10::BFloat16", "c10::Float8_e4m3fn", "long int" ...); "" when not a tensor type.
std::string_view DtypeOf(std::string_view type_name);
// Bytes per element of a recorded type name (0 when not a tensor type).
int ElementBytes(std::string_view type_name);

struct OpCost {
  double flops = 0;
  double bytes = 0;
  OpClass cls = OpClass::kElementwise;
  std::string_view dtype;  // of its main input: "bf16", "fp32", ...
};

struct OpArgs {
  const Dims* dims = nullptr;                        // required
  const std::vector<std::string>* types = nullptr;   // may be null: fp32 assumed for bytes
  const std::vector<std::string>* concrete = nullptr;  // may be null
};

// A convolution's output shape from its input and weight shapes, when the trace says (a backward
// of the same shapes); nullptr when unknown.
using ConvOutputHint = std::function<const std::vector<int64_t>*(const std::vector<int64_t>& input,
                                                                 const std::vector<int64_t>& weight)>;

// Whether `name` ("aten::mm") has a model at all (cheap: ops without one are never parsed).
bool HasCostModel(std::string_view name);
// The op's cost, or nullopt when its shapes do not resolve (too few inputs, a rank the model does
// not know, a convolution's output size unknown).
std::optional<OpCost> CostOf(std::string_view name, const OpArgs& args, const ConvOutputHint* hint = nullptr);

// A convolution backward's (input dims, weight dims, grad_output dims) when `name` is one whose
// inputs carry all three (convolution_backward, cudnn/miopen/mkldnn_convolution_backward): the
// source of ConvOutputHint.
struct ConvShapes {
  std::vector<int64_t> input, weight, output;
};
std::optional<ConvShapes> ConvShapesOfBackward(std::string_view name, const Dims& dims);

// "[2, 2]" -> {2, 2}; "3" -> {3}; nullopt when not integers.
std::optional<std::vector<int64_t>> ParseIntList(std::string_view s);

}  // namespace trainrx::analyzers
