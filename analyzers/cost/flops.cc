#include "flops.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

namespace trainrx::analyzers {
namespace {

using Shape = std::vector<int64_t>;

double Numel(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(std::max<int64_t>(d, 0));
  return n;
}

std::string_view Strip(std::string_view name) {
  if (name.substr(0, 6) == "aten::") name.remove_prefix(6);
  return name;
}

const std::string* TypeAt(const OpArgs& a, size_t i) {
  return a.types != nullptr && i < a.types->size() ? &(*a.types)[i] : nullptr;
}
int BytesAt(const OpArgs& a, size_t i) {
  const std::string* t = TypeAt(a, i);
  const int b = t ? ElementBytes(*t) : 0;
  return b > 0 ? b : 4;  // unknown: fp32
}
std::string_view DtypeAt(const OpArgs& a, size_t i) {
  const std::string* t = TypeAt(a, i);
  const std::string_view d = t ? DtypeOf(*t) : std::string_view();
  return d.empty() ? std::string_view("fp32") : d;
}
const Shape* DimsAt(const OpArgs& a, size_t i) { return i < a.dims->size() ? &(*a.dims)[i] : nullptr; }
// A concrete argument's text ("" when absent).
std::string_view ConcreteAt(const OpArgs& a, size_t i) {
  return a.concrete != nullptr && i < a.concrete->size() ? std::string_view((*a.concrete)[i]) : std::string_view();
}
std::optional<bool> ConcreteBool(const OpArgs& a, size_t i) {
  const std::string_view s = ConcreteAt(a, i);
  if (s == "True" || s == "true" || s == "1") return true;
  if (s == "False" || s == "false" || s == "0") return false;
  return std::nullopt;
}
// Bytes of every tensor input (rank >= 1, or a 0-dim tensor typed as one).
double InputBytes(const OpArgs& a) {
  double b = 0;
  for (size_t i = 0; i < a.dims->size(); ++i) {
    const Shape& s = (*a.dims)[i];
    const std::string* t = TypeAt(a, i);
    const int eb = t ? ElementBytes(*t) : (s.empty() ? 0 : 4);
    if (eb == 0) continue;
    b += Numel(s) * eb;
  }
  return b;
}

// Broadcast of two shapes (numpy rules); nullopt when they do not broadcast.
std::optional<Shape> Broadcast(const Shape& x, const Shape& y) {
  Shape out(std::max(x.size(), y.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t a = i < x.size() ? x[x.size() - 1 - i] : 1, b = i < y.size() ? y[y.size() - 1 - i] : 1;
    if (a != b && a != 1 && b != 1) return std::nullopt;
    out[out.size() - 1 - i] = a == 1 ? b : a;
  }
  return out;
}

// ---- matmul -----------------------------------------------------------------------------------
std::optional<OpCost> Matmul(double batch, int64_t m, int64_t k, int64_t n, const OpArgs& a, size_t main) {
  if (m <= 0 || k <= 0 || n <= 0 || batch <= 0) return std::nullopt;
  OpCost c;
  c.cls = OpClass::kMatmul;
  c.flops = 2.0 * batch * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
  c.bytes = InputBytes(a) + batch * static_cast<double>(m) * static_cast<double>(n) * BytesAt(a, main);
  c.dtype = DtypeAt(a, main);
  return c;
}

std::optional<OpCost> MatmulGeneral(const OpArgs& a) {  // aten::matmul(a, b): any ranks >= 1
  const Shape *x = DimsAt(a, 0), *y = DimsAt(a, 1);
  if (!x || !y || x->empty() || y->empty()) return std::nullopt;
  const int64_t m = x->size() >= 2 ? (*x)[x->size() - 2] : 1, k = x->back();
  const int64_t n = y->size() >= 2 ? y->back() : 1, ky = y->size() >= 2 ? (*y)[y->size() - 2] : y->front();
  if (k != ky) return std::nullopt;
  const Shape bx(x->begin(), x->end() - std::min<ptrdiff_t>(2, static_cast<ptrdiff_t>(x->size())));
  const Shape by(y->begin(), y->end() - std::min<ptrdiff_t>(2, static_cast<ptrdiff_t>(y->size())));
  const auto batch = Broadcast(bx, by);
  if (!batch) return std::nullopt;
  return Matmul(Numel(*batch), m, k, n, a, 0);
}

// ---- convolution ------------------------------------------------------------------------------
// Where a convolution op keeps its arguments (indices into its inputs); -1: not an argument.
struct ConvLayout {
  int stride = -1, padding = -1, dilation = -1, transposed = -1, output_padding = -1, groups = -1;
};
const ConvLayout* ConvForwardLayout(std::string_view op) {
  static const ConvLayout kConvNd{3, 4, 5, -1, -1, 6};          // conv1d/2d/3d(input, weight, bias, stride, padding, dilation, groups)
  static const ConvLayout kConvolution{3, 4, 5, 6, 7, 8};       // convolution / _convolution
  static const ConvLayout kCudnn{3, 2, 4, -1, -1, 5};           // cudnn_convolution(self, weight, padding, stride, dilation, groups, ...)
  static const ConvLayout kMkldnn{4, 3, 5, -1, -1, 6};          // mkldnn / miopen_convolution(self, weight, bias, padding, stride, dilation, groups)
  if (op == "conv1d" || op == "conv2d" || op == "conv3d") return &kConvNd;
  if (op == "convolution" || op == "_convolution") return &kConvolution;
  if (op == "cudnn_convolution") return &kCudnn;
  if (op == "mkldnn_convolution" || op == "miopen_convolution") return &kMkldnn;
  return nullptr;
}

// The i-th of a per-dimension list (a 1-element list applies to every dimension).
int64_t Nth(const std::optional<std::vector<int64_t>>& v, size_t i, int64_t fallback) {
  if (!v || v->empty()) return fallback;
  return v->size() == 1 ? v->front() : i < v->size() ? (*v)[i] : fallback;
}

// FLOPs of one convolution pass from input [N, Cin, *in], weight [Cout, Cin/g, *k] (transposed:
// [Cin, Cout/g, *k]) and output [N, Cout, *out].
double ConvFlops(const Shape& input, const Shape& weight, const Shape& output, bool transposed) {
  double kernel = 1;
  for (size_t i = 2; i < weight.size(); ++i) kernel *= static_cast<double>(weight[i]);
  if (transposed)  // every input element meets Cout/g * prod(k) weights
    return 2.0 * Numel(input) * static_cast<double>(weight[1]) * kernel;
  // every output element: C_in/g * prod(k) multiply-adds
  return 2.0 * Numel(output) * static_cast<double>(weight[1]) * kernel;
}

bool ConvRanksMatch(const Shape& input, const Shape& weight) {
  return input.size() >= 3 && weight.size() == input.size() && weight[1] > 0;
}

std::optional<OpCost> ConvForward(std::string_view op, const OpArgs& a, const ConvOutputHint* hint) {
  const ConvLayout* l = ConvForwardLayout(op);
  const Shape *in = DimsAt(a, 0), *w = DimsAt(a, 1);
  if (!l || !in || !w || !ConvRanksMatch(*in, *w)) return std::nullopt;
  const bool transposed = l->transposed >= 0 && ConcreteBool(a, static_cast<size_t>(l->transposed)).value_or(false);
  const auto stride = l->stride >= 0 ? ParseIntList(ConcreteAt(a, static_cast<size_t>(l->stride))) : std::nullopt;
  const auto padding = l->padding >= 0 ? ParseIntList(ConcreteAt(a, static_cast<size_t>(l->padding))) : std::nullopt;
  const auto dilation = l->dilation >= 0 ? ParseIntList(ConcreteAt(a, static_cast<size_t>(l->dilation))) : std::nullopt;
  const auto out_pad = l->output_padding >= 0 ? ParseIntList(ConcreteAt(a, static_cast<size_t>(l->output_padding))) : std::nullopt;
  const auto groups = l->groups >= 0 ? ParseIntList(ConcreteAt(a, static_cast<size_t>(l->groups))) : std::nullopt;
  const int64_t g = Nth(groups, 0, 1);
  Shape out;
  if (stride && padding) {
    out = {(*in)[0], transposed ? (*w)[1] * g : (*w)[0]};
    for (size_t i = 2; i < in->size(); ++i) {
      const int64_t s = Nth(stride, i - 2, 1), p = Nth(padding, i - 2, 0), d = Nth(dilation, i - 2, 1), k = (*w)[i];
      const int64_t o = transposed ? ((*in)[i] - 1) * s - 2 * p + d * (k - 1) + Nth(out_pad, i - 2, 0) + 1
                                   : ((*in)[i] + 2 * p - d * (k - 1) - 1) / s + 1;
      out.push_back(o);
    }
  } else if (hint != nullptr && *hint) {
    const Shape* o = (*hint)(*in, *w);
    if (o == nullptr) return std::nullopt;
    out = *o;
  } else {
    return std::nullopt;
  }
  for (int64_t d : out)
    if (d <= 0) return std::nullopt;
  OpCost c;
  c.cls = OpClass::kConv;
  c.flops = ConvFlops(*in, *w, out, transposed);
  c.bytes = InputBytes(a) + Numel(out) * BytesAt(a, 0);
  c.dtype = DtypeAt(a, 0);
  return c;
}

// convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
// transposed, output_padding, groups, output_mask); the cudnn / miopen / mkldnn forms
// (self, grad_output, weight, padding, stride, dilation, groups, ..., output_mask).
struct ConvBackwardLayout {
  int grad_output, input, weight, transposed, mask;
};
const ConvBackwardLayout* ConvBackwardLayoutOf(std::string_view op) {
  static const ConvBackwardLayout kGeneric{0, 1, 2, 7, 10};
  static const ConvBackwardLayout kCudnn{1, 0, 2, -1, 10};
  static const ConvBackwardLayout kMiopen{1, 0, 2, -1, 9};  // (self, grad_output, weight, padding, stride, dilation, groups, benchmark, deterministic, output_mask)
  if (op == "convolution_backward") return &kGeneric;
  if (op == "cudnn_convolution_backward") return &kCudnn;
  if (op == "miopen_convolution_backward" || op == "mkldnn_convolution_backward") return &kMiopen;
  return nullptr;
}

std::optional<OpCost> ConvBackward(std::string_view op, const OpArgs& a) {
  const ConvBackwardLayout* l = ConvBackwardLayoutOf(op);
  if (!l) return std::nullopt;
  const Shape *go = DimsAt(a, static_cast<size_t>(l->grad_output)), *in = DimsAt(a, static_cast<size_t>(l->input)),
              *w = DimsAt(a, static_cast<size_t>(l->weight));
  if (!go || !in || !w || !ConvRanksMatch(*in, *w) || go->size() != in->size()) return std::nullopt;
  const bool transposed = l->transposed >= 0 && ConcreteBool(a, static_cast<size_t>(l->transposed)).value_or(false);
  // output_mask "[True, True, True]" (input, weight, bias): the gradients computed.
  int grads = 2;
  if (const std::string_view m = ConcreteAt(a, static_cast<size_t>(l->mask)); !m.empty()) {
    grads = 0;
    size_t pos = 0;
    for (int i = 0; i < 2; ++i) {
      const size_t t = m.find_first_of("TtFf", pos);
      if (t == std::string_view::npos) break;
      grads += m[t] == 'T' || m[t] == 't';
      pos = m.find_first_of(",]", t);
    }
  }
  OpCost c;
  c.cls = OpClass::kConv;
  c.flops = grads * ConvFlops(*in, *w, *go, transposed);
  c.bytes = InputBytes(a) + (grads >= 1 ? Numel(*in) * BytesAt(a, static_cast<size_t>(l->input)) : 0) +
            (grads >= 2 ? Numel(*w) * BytesAt(a, static_cast<size_t>(l->weight)) : 0);
  c.dtype = DtypeAt(a, static_cast<size_t>(l->grad_output));
  return c;
}

// cudnn_convolution_backward_input(self_size, grad_output, weight, ...): one pass, from grad_output
// [N, Cout, *out] and weight [Cout, Cin/g, *k].
std::optional<OpCost> ConvBackwardInput(const OpArgs& a) {
  const Shape *go = DimsAt(a, 1), *w = DimsAt(a, 2);
  if (!go || !w || !ConvRanksMatch(*go, *w)) return std::nullopt;
  OpCost c;
  c.cls = OpClass::kConv;
  c.flops = ConvFlops(*go, *w, *go, false);  // output-side count: grad_output is the forward's output
  c.bytes = InputBytes(a) * 2;                // the input gradient is about the size of what was read
  c.dtype = DtypeAt(a, 1);
  return c;
}

// ---- attention --------------------------------------------------------------------------------
struct AttentionLayout {
  int q, k, v, causal;  // input indices; causal -1: not an argument
  bool backward;
};
const AttentionLayout* AttentionLayoutOf(std::string_view op) {
  static const std::unordered_map<std::string_view, AttentionLayout> kLayouts = {
      {"scaled_dot_product_attention", {0, 1, 2, 5, false}},
      {"_scaled_dot_product_flash_attention", {0, 1, 2, 4, false}},
      {"_scaled_dot_product_flash_attention_for_cpu", {0, 1, 2, 4, false}},
      {"_scaled_dot_product_efficient_attention", {0, 1, 2, 6, false}},
      {"_scaled_dot_product_cudnn_attention", {0, 1, 2, 6, false}},
      {"_scaled_dot_product_fused_attention_overrideable", {0, 1, 2, 5, false}},
      {"_scaled_dot_product_flash_attention_backward", {1, 2, 3, 11, true}},
      {"_scaled_dot_product_flash_attention_for_cpu_backward", {1, 2, 3, 7, true}},
      {"_scaled_dot_product_efficient_attention_backward", {1, 2, 3, 11, true}},
      {"_scaled_dot_product_cudnn_attention_backward", {1, 2, 3, -1, true}},
      {"_efficient_attention_backward", {1, 2, 3, -1, true}},
  };
  auto it = kLayouts.find(op);
  return it == kLayouts.end() ? nullptr : &it->second;
}

std::optional<OpCost> Attention(std::string_view op, const OpArgs& a) {
  const AttentionLayout* l = AttentionLayoutOf(op);
  if (!l) return std::nullopt;
  const Shape *q = DimsAt(a, static_cast<size_t>(l->q)), *k = DimsAt(a, static_cast<size_t>(l->k)),
              *v = DimsAt(a, static_cast<size_t>(l->v));
  // [B, H, S, D] (leading batch dimensions of any number; at least [S, D]).
  if (!q || !k || !v || q->size() < 2 || k->size() < 2 || v->size() < 2) return std::nullopt;
  const double sq = static_cast<double>((*q)[q->size() - 2]), d = static_cast<double>(q->back());
  const double sk = static_cast<double>((*k)[k->size() - 2]), dv = static_cast<double>(v->back());
  double batch_heads = 1;
  for (size_t i = 0; i + 2 < q->size(); ++i) batch_heads *= static_cast<double>((*q)[i]);
  double flops = 2.0 * batch_heads * sq * sk * (d + dv);
  if (l->backward) flops *= 2;
  if (l->causal >= 0 && ConcreteBool(a, static_cast<size_t>(l->causal)).value_or(false)) flops /= 2;
  OpCost c;
  c.cls = OpClass::kAttention;
  c.flops = flops;
  c.bytes = InputBytes(a) + batch_heads * sq * dv * BytesAt(a, static_cast<size_t>(l->q)) * (l->backward ? 3 : 1);
  c.dtype = DtypeAt(a, static_cast<size_t>(l->q));
  return c;
}

// ---- per-element ops --------------------------------------------------------------------------
struct ElementModel {
  OpClass cls;
  double flops_per_element;
};
const ElementModel* ElementModelOf(std::string_view op) {
  static const std::unordered_map<std::string_view, ElementModel> kModels = {
      // normalization: statistics, normalize, scale and shift
      {"layer_norm", {OpClass::kNorm, 5}}, {"native_layer_norm", {OpClass::kNorm, 5}},
      {"batch_norm", {OpClass::kNorm, 5}}, {"native_batch_norm", {OpClass::kNorm, 5}},
      {"cudnn_batch_norm", {OpClass::kNorm, 5}}, {"_batch_norm_impl_index", {OpClass::kNorm, 5}},
      {"miopen_batch_norm", {OpClass::kNorm, 5}}, {"group_norm", {OpClass::kNorm, 5}},
      {"native_group_norm", {OpClass::kNorm, 5}}, {"instance_norm", {OpClass::kNorm, 5}},
      {"rms_norm", {OpClass::kNorm, 4}}, {"_fused_rms_norm", {OpClass::kNorm, 4}},
      {"native_layer_norm_backward", {OpClass::kNorm, 10}}, {"native_batch_norm_backward", {OpClass::kNorm, 10}},
      {"cudnn_batch_norm_backward", {OpClass::kNorm, 10}}, {"native_group_norm_backward", {OpClass::kNorm, 10}},
      {"_fused_rms_norm_backward", {OpClass::kNorm, 8}},
      // softmax: max, subtract, exp, sum, divide
      {"softmax", {OpClass::kSoftmax, 5}}, {"_softmax", {OpClass::kSoftmax, 5}},
      {"log_softmax", {OpClass::kSoftmax, 5}}, {"_log_softmax", {OpClass::kSoftmax, 5}},
      {"_softmax_backward_data", {OpClass::kSoftmax, 4}}, {"_log_softmax_backward_data", {OpClass::kSoftmax, 4}},
      // losses over logits
      {"cross_entropy_loss", {OpClass::kLoss, 5}}, {"nll_loss", {OpClass::kLoss, 1}},
      {"nll_loss_nd", {OpClass::kLoss, 1}}, {"nll_loss_forward", {OpClass::kLoss, 1}},
      {"mse_loss", {OpClass::kLoss, 3}}, {"binary_cross_entropy_with_logits", {OpClass::kLoss, 6}},
      // elementwise arithmetic and activations
      {"add", {OpClass::kElementwise, 1}}, {"add_", {OpClass::kElementwise, 1}},
      {"sub", {OpClass::kElementwise, 1}}, {"sub_", {OpClass::kElementwise, 1}},
      {"mul", {OpClass::kElementwise, 1}}, {"mul_", {OpClass::kElementwise, 1}},
      {"div", {OpClass::kElementwise, 1}}, {"div_", {OpClass::kElementwise, 1}},
      {"addcmul_", {OpClass::kElementwise, 2}}, {"addcdiv_", {OpClass::kElementwise, 2}},
      {"lerp_", {OpClass::kElementwise, 2}}, {"sqrt", {OpClass::kElementwise, 1}},
      {"rsqrt", {OpClass::kElementwise, 1}}, {"neg", {OpClass::kElementwise, 1}},
      {"pow", {OpClass::kElementwise, 1}}, {"exp", {OpClass::kElementwise, 1}},
      {"relu", {OpClass::kElementwise, 1}}, {"relu_", {OpClass::kElementwise, 1}},
      {"clamp_min", {OpClass::kElementwise, 1}}, {"clamp_min_", {OpClass::kElementwise, 1}},
      {"threshold_backward", {OpClass::kElementwise, 1}}, {"leaky_relu", {OpClass::kElementwise, 2}},
      {"gelu", {OpClass::kElementwise, 8}}, {"gelu_backward", {OpClass::kElementwise, 8}},
      {"silu", {OpClass::kElementwise, 4}}, {"silu_", {OpClass::kElementwise, 4}},
      {"silu_backward", {OpClass::kElementwise, 4}}, {"sigmoid", {OpClass::kElementwise, 4}},
      {"sigmoid_backward", {OpClass::kElementwise, 2}}, {"tanh", {OpClass::kElementwise, 4}},
      {"tanh_backward", {OpClass::kElementwise, 2}}, {"dropout", {OpClass::kElementwise, 2}},
      {"native_dropout", {OpClass::kElementwise, 2}},
  };
  auto it = kModels.find(op);
  return it == kModels.end() ? nullptr : &it->second;
}

std::optional<OpCost> PerElement(const ElementModel& m, const OpArgs& a) {
  // The output: the broadcast of the tensor inputs for arithmetic; the first input otherwise (a
  // loss reduces, but its work is per logit).
  const Shape* first = DimsAt(a, 0);
  if (!first) return std::nullopt;
  Shape out = *first;
  if (m.cls == OpClass::kElementwise) {
    for (size_t i = 1; i < a.dims->size(); ++i) {
      const Shape& s = (*a.dims)[i];
      if (s.empty()) continue;  // a scalar or a non-tensor argument
      const auto b = Broadcast(out, s);
      if (!b) return std::nullopt;
      out = *b;
    }
  }
  const double n = Numel(out);
  if (n <= 0) return std::nullopt;
  OpCost c;
  c.cls = m.cls;
  c.flops = m.flops_per_element * n;
  const double written = m.cls == OpClass::kLoss ? 0 : n * BytesAt(a, 0);
  c.bytes = InputBytes(a) + written;
  c.dtype = DtypeAt(a, 0);
  return c;
}

// embedding(weight [V, D], indices): the rows gathered, read and written.
std::optional<OpCost> Embedding(std::string_view op, const OpArgs& a) {
  const Shape *w = DimsAt(a, 0), *idx = DimsAt(a, 1);
  if (op == "embedding_dense_backward") {  // (grad_output [..., D], indices, num_weights, ...)
    if (!w || !idx || w->empty()) return std::nullopt;
    OpCost c;
    c.cls = OpClass::kEmbedding;
    c.bytes = 2 * Numel(*w) * BytesAt(a, 0) + Numel(*idx) * BytesAt(a, 1);
    c.dtype = DtypeAt(a, 0);
    return c;
  }
  if (!w || !idx || w->size() != 2) return std::nullopt;
  OpCost c;
  c.cls = OpClass::kEmbedding;
  c.bytes = 2 * Numel(*idx) * static_cast<double>((*w)[1]) * BytesAt(a, 0) + Numel(*idx) * BytesAt(a, 1);
  c.dtype = DtypeAt(a, 0);
  return c;
}

}  // namespace

std::string_view OpClassName(OpClass c) {
  switch (c) {
    case OpClass::kMatmul: return "matmul";
    case OpClass::kConv: return "conv";
    case OpClass::kAttention: return "attention";
    case OpClass::kNorm: return "norm";
    case OpClass::kSoftmax: return "softmax";
    case OpClass::kLoss: return "loss";
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kEmbedding: return "embedding";
  }
  return "elementwise";
}

std::string_view DtypeOf(std::string_view t) {
  if (t.substr(0, 5) == "c10::") t.remove_prefix(5);
  if (t == "float" || t == "Float" || t == "float32") return "fp32";
  if (t == "BFloat16" || t == "bfloat16") return "bf16";
  if (t == "Half" || t == "half" || t == "float16") return "fp16";
  if (t == "double" || t == "Double" || t == "float64") return "fp64";
  if (t.substr(0, 6) == "Float8" || t.substr(0, 6) == "float8") return "fp8";
  if (t == "long int" || t == "long" || t == "int" || t == "Long" || t == "Int" || t == "short int" ||
      t == "signed char" || t == "unsigned char" || t == "bool" || t == "Bool" || t == "int64" || t == "int32")
    return "int";
  return "";
}

int ElementBytes(std::string_view t) {
  if (t.substr(0, 5) == "c10::") t.remove_prefix(5);
  const std::string_view d = DtypeOf(t);
  if (d == "fp32") return 4;
  if (d == "bf16" || d == "fp16") return 2;
  if (d == "fp64") return 8;
  if (d == "fp8") return 1;
  if (d == "int") {
    if (t == "long int" || t == "long" || t == "Long" || t == "int64") return 8;
    if (t == "short int") return 2;
    if (t == "signed char" || t == "unsigned char" || t == "bool" || t == "Bool") return 1;
    return 4;
  }
  return 0;
}

std::optional<std::vector<int64_t>> ParseIntList(std::string_view s) {
  std::vector<int64_t> out;
  int64_t num = 0;
  bool in_num = false, neg = false, any = false;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      if (num > (INT64_MAX - (c - '0')) / 10) return std::nullopt;
      num = num * 10 + (c - '0');
      in_num = true;
    } else if (c == '-' && !in_num) {
      neg = true;
    } else if (c == ',' || c == ']') {
      if (in_num) out.push_back(neg ? -num : num), any = true;
      num = 0, in_num = false, neg = false;
    } else if (c != '[' && c != ' ') {
      return std::nullopt;
    }
  }
  if (in_num) out.push_back(neg ? -num : num), any = true;
  if (!any) return std::nullopt;
  return out;
}

bool HasCostModel(std::string_view name) {
  const std::string_view op = Strip(name);
  if (op.size() == name.size()) return false;  // only aten ops
  static const std::unordered_map<std::string_view, bool> kOther = {
      {"mm", true}, {"addmm", true}, {"bmm", true}, {"baddbmm", true}, {"linear", true}, {"matmul", true},
      {"_scaled_mm", true}, {"cudnn_convolution_backward_input", true}, {"embedding", true},
      {"embedding_dense_backward", true}};
  return kOther.count(op) > 0 || ConvForwardLayout(op) != nullptr || ConvBackwardLayoutOf(op) != nullptr ||
         AttentionLayoutOf(op) != nullptr || ElementModelOf(op) != nullptr;
}

std::optional<OpCost> CostOf(std::string_view name, const OpArgs& a, const ConvOutputHint* hint) {
  if (a.dims == nullptr) return std::nullopt;
  const std::string_view op = Strip(name);
  const Shape *x = DimsAt(a, 0), *y = DimsAt(a, 1), *z = DimsAt(a, 2);
  if (op == "mm" || op == "_scaled_mm") {
    if (!x || !y || x->size() != 2 || y->size() != 2 || (*x)[1] != (*y)[0]) return std::nullopt;
    return Matmul(1, (*x)[0], (*x)[1], (*y)[1], a, 0);
  }
  if (op == "addmm") {
    if (!y || !z || y->size() != 2 || z->size() != 2 || (*y)[1] != (*z)[0]) return std::nullopt;
    return Matmul(1, (*y)[0], (*y)[1], (*z)[1], a, 1);
  }
  if (op == "bmm") {
    if (!x || !y || x->size() != 3 || y->size() != 3 || (*x)[2] != (*y)[1] || (*x)[0] != (*y)[0]) return std::nullopt;
    return Matmul(static_cast<double>((*x)[0]), (*x)[1], (*x)[2], (*y)[2], a, 0);
  }
  if (op == "baddbmm") {
    if (!y || !z || y->size() != 3 || z->size() != 3 || (*y)[2] != (*z)[1] || (*y)[0] != (*z)[0]) return std::nullopt;
    return Matmul(static_cast<double>((*y)[0]), (*y)[1], (*y)[2], (*z)[2], a, 1);
  }
  if (op == "linear") {  // x [..., K], weight [N, K]
    if (!x || !y || x->empty() || y->size() != 2 || x->back() != (*y)[1]) return std::nullopt;
    const Shape rows(x->begin(), x->end() - 1);
    return Matmul(1, static_cast<int64_t>(Numel(rows)), (*y)[1], (*y)[0], a, 0);
  }
  if (op == "matmul") return MatmulGeneral(a);
  if (ConvForwardLayout(op)) return ConvForward(op, a, hint);
  if (ConvBackwardLayoutOf(op)) return ConvBackward(op, a);
  if (op == "cudnn_convolution_backward_input") return ConvBackwardInput(a);
  if (AttentionLayoutOf(op)) return Attention(op, a);
  if (op == "embedding" || op == "embedding_dense_backward") return Embedding(op, a);
  if (const ElementModel* m = ElementModelOf(op)) return PerElement(*m, a);
  return std::nullopt;
}

std::optional<ConvShapes> ConvShapesOfBackward(std::string_view name, const Dims& dims) {
  const ConvBackwardLayout* l = ConvBackwardLayoutOf(Strip(name));
  if (!l) return std::nullopt;
  const auto at = [&](int i) -> const Shape* { return static_cast<size_t>(i) < dims.size() ? &dims[static_cast<size_t>(i)] : nullptr; };
  const Shape *go = at(l->grad_output), *in = at(l->input), *w = at(l->weight);
  if (!go || !in || !w || !ConvRanksMatch(*in, *w) || go->size() != in->size()) return std::nullopt;
  return ConvShapes{*in, *w, *go};
}

}  // namespace trainrx::analyzers
