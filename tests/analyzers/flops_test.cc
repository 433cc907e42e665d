// The FLOP and byte models of analyzers/cost/flops.h against hand counts (issue 52), and the device
// peak table's lookups.
#include <gtest/gtest.h>

#include "cost/device_peaks.h"
#include "cost/flops.h"

namespace trainrx::analyzers {
namespace {

struct Op {
  Dims dims;
  std::vector<std::string> types, concrete;
};

std::optional<OpCost> Cost(const std::string& name, const Op& op, const ConvOutputHint* hint = nullptr) {
  OpArgs a{&op.dims, op.types.empty() ? nullptr : &op.types, op.concrete.empty() ? nullptr : &op.concrete};
  return CostOf(name, a, hint);
}

TEST(FlopsTest, Matmuls) {
  auto mm = Cost("aten::mm", {{{64, 128}, {128, 256}}, {"float", "float"}, {}});
  ASSERT_TRUE(mm);
  EXPECT_EQ(mm->flops, 2.0 * 64 * 128 * 256);
  EXPECT_EQ(mm->bytes, 4.0 * (64 * 128 + 128 * 256 + 64 * 256));
  EXPECT_EQ(mm->cls, OpClass::kMatmul);
  EXPECT_EQ(mm->dtype, "fp32");
  // addmm(bias, a, b): the bias add is not counted (as torch.utils.flop_counter).
  auto addmm = Cost("aten::addmm", {{{10}, {64, 128}, {128, 10}, {}, {}}, {"c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"}, {}});
  ASSERT_TRUE(addmm);
  EXPECT_EQ(addmm->flops, 2.0 * 64 * 128 * 10);
  EXPECT_EQ(addmm->dtype, "bf16");
  EXPECT_EQ(addmm->bytes, 2.0 * (10 + 64 * 128 + 128 * 10 + 64 * 10));
  EXPECT_EQ(Cost("aten::bmm", {{{12, 64, 32}, {12, 32, 64}}, {}, {}})->flops, 2.0 * 12 * 64 * 32 * 64);
  EXPECT_EQ(Cost("aten::baddbmm", {{{12, 64, 64}, {12, 64, 32}, {12, 32, 64}}, {}, {}})->flops, 2.0 * 12 * 64 * 32 * 64);
  // linear(x [B, T, K], weight [N, K]): rows B*T.
  EXPECT_EQ(Cost("aten::linear", {{{8, 16, 32}, {48, 32}, {48}}, {}, {}})->flops, 2.0 * 8 * 16 * 32 * 48);
  // matmul with broadcast batch: [2, 3, 4, 5] @ [5, 6] -> batch 6; a vector on the right: N = 1.
  EXPECT_EQ(Cost("aten::matmul", {{{2, 3, 4, 5}, {5, 6}}, {}, {}})->flops, 2.0 * 6 * 4 * 5 * 6);
  EXPECT_EQ(Cost("aten::matmul", {{{7, 5}, {5}}, {}, {}})->flops, 2.0 * 7 * 5);
  EXPECT_EQ(Cost("aten::_scaled_mm", {{{16, 32}, {32, 64}}, {"c10::Float8_e4m3fn", "c10::Float8_e4m3fn"}, {}})->dtype, "fp8");
  // Shapes that do not fit: not costed.
  EXPECT_FALSE(Cost("aten::mm", {{{64, 128}, {64, 256}}, {}, {}}));
  EXPECT_FALSE(Cost("aten::bmm", {{{2, 4, 8}, {3, 8, 4}}, {}, {}}));
  EXPECT_FALSE(Cost("aten::mm", {{{64, 128}}, {}, {}}));
}

TEST(FlopsTest, ConvolutionsForwardFromConcreteInputsOrTheirBackward) {
  // conv2d(input [4, 3, 32, 32], weight [8, 3, 3, 3], bias, stride 2, padding 1, dilation 1, groups 1): out [4, 8, 16, 16].
  const Op conv{{{4, 3, 32, 32}, {8, 3, 3, 3}, {8}, {}, {}, {}, {}},
                {"float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"},
                {"", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"}};
  auto c = Cost("aten::conv2d", conv);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->flops, 2.0 * 4 * 8 * 16 * 16 * 3 * 3 * 3);
  EXPECT_EQ(c->bytes, 4.0 * (4 * 3 * 32 * 32 + 8 * 27 + 8 + 4 * 8 * 16 * 16));
  EXPECT_EQ(c->cls, OpClass::kConv);
  // mkldnn_convolution(self, weight, bias, padding, stride, dilation, groups): the same conv.
  const Op mkldnn{{{4, 3, 32, 32}, {8, 3, 3, 3}, {8}, {}, {}, {}, {}}, {}, {"", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"}};
  EXPECT_EQ(Cost("aten::mkldnn_convolution", mkldnn)->flops, c->flops);
  // cudnn_convolution(self, weight, padding, stride, dilation, groups, ...).
  const Op cudnn{{{4, 3, 32, 32}, {8, 3, 3, 3}, {}, {}, {}, {}}, {}, {"", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"}};
  EXPECT_EQ(Cost("aten::cudnn_convolution", cudnn)->flops, c->flops);
  // Depthwise (groups 16, weight [16, 1, 3, 3]), 3-d dilation 2 and padding 2 keep 10x10.
  const Op depthwise{{{2, 16, 10, 10}, {16, 1, 3, 3}, {}, {}, {}, {}, {}}, {}, {"", "", "", "[1]", "[2]", "[2]", "16"}};
  EXPECT_EQ(Cost("aten::conv2d", depthwise)->flops, 2.0 * 2 * 16 * 10 * 10 * 1 * 9);
  // Transposed (convolution(..., transposed True, output_padding, groups)): input [1, 8, 5, 5],
  // weight [8, 4, 4, 4] (C_in, C_out/g, k), stride 2, padding 1: every input element meets 4*16 weights.
  const Op transposed{{{1, 8, 5, 5}, {8, 4, 4, 4}, {}, {}, {}, {}, {}, {}, {}}, {},
                      {"", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[0, 0]", "1"}};
  EXPECT_EQ(Cost("aten::convolution", transposed)->flops, 2.0 * 8 * 25 * 4 * 16);
  // No strides recorded (our collector, older torch.profiler): from a backward of the same shapes, else not costed.
  const Op bare{{{4, 3, 32, 32}, {8, 3, 3, 3}, {}, {}, {}, {}, {}}, {}, {}};
  EXPECT_FALSE(Cost("aten::conv2d", bare));
  const std::vector<int64_t> out = {4, 8, 16, 16};
  const ConvOutputHint hint = [&](const std::vector<int64_t>& in, const std::vector<int64_t>& w) -> const std::vector<int64_t>* {
    return in == std::vector<int64_t>{4, 3, 32, 32} && w == std::vector<int64_t>{8, 3, 3, 3} ? &out : nullptr;
  };
  EXPECT_EQ(Cost("aten::conv2d", bare, &hint)->flops, c->flops);
}

TEST(FlopsTest, ConvolutionBackwardCountsTheGradientsItComputes) {
  const double fwd = 2.0 * 4 * 8 * 16 * 16 * 27;
  // convolution_backward(grad_output, input, weight, ..., output_mask): the first layer computes
  // no input gradient.
  Op bwd{{{4, 8, 16, 16}, {4, 3, 32, 32}, {8, 3, 3, 3}, {}, {}, {}, {}, {}, {}, {}, {}}, {},
         {"", "", "", "[8]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[False, True, True]"}};
  EXPECT_EQ(Cost("aten::convolution_backward", bwd)->flops, fwd);
  bwd.concrete[10] = "[True, True, False]";
  EXPECT_EQ(Cost("aten::convolution_backward", bwd)->flops, 2 * fwd);
  bwd.concrete.clear();  // no mask recorded: both
  EXPECT_EQ(Cost("aten::convolution_backward", bwd)->flops, 2 * fwd);
  // cudnn_convolution_backward(self, grad_output, weight, ...) and its input-gradient child.
  const Op cudnn{{{4, 3, 32, 32}, {4, 8, 16, 16}, {8, 3, 3, 3}, {}, {}, {}, {}, {}, {}, {}, {}}, {}, {}};
  EXPECT_EQ(Cost("aten::cudnn_convolution_backward", cudnn)->flops, 2 * fwd);
  const Op input_grad{{{}, {4, 8, 16, 16}, {8, 3, 3, 3}}, {}, {}};
  EXPECT_EQ(Cost("aten::cudnn_convolution_backward_input", input_grad)->flops, fwd);
  const auto shapes = ConvShapesOfBackward("aten::convolution_backward", bwd.dims);
  ASSERT_TRUE(shapes);
  EXPECT_EQ(shapes->output, (std::vector<int64_t>{4, 8, 16, 16}));
  EXPECT_EQ(shapes->input, (std::vector<int64_t>{4, 3, 32, 32}));
}

TEST(FlopsTest, AttentionForwardBackwardAndCausal) {
  // [B, H, S, D] = [2, 8, 128, 64]: QK^T and PV, 2*B*H*S*S*(D + Dv).
  const double full = 2.0 * 2 * 8 * 128 * 128 * (64 + 64);
  Op sdpa{{{2, 8, 128, 64}, {2, 8, 128, 64}, {2, 8, 128, 64}, {}, {}, {}, {}}, {"c10::BFloat16", "c10::BFloat16", "c10::BFloat16"}, {}};
  auto f = Cost("aten::scaled_dot_product_attention", sdpa);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->flops, full);
  EXPECT_EQ(f->cls, OpClass::kAttention);
  EXPECT_EQ(f->dtype, "bf16");
  sdpa.concrete = {"", "", "", "", "0.0", "True", ""};  // is_causal
  EXPECT_EQ(Cost("aten::scaled_dot_product_attention", sdpa)->flops, full / 2);
  // flash forward (q, k, v, dropout_p, is_causal, ...) and backward (grad_out, q, k, v, ...): twice.
  const Op flash{{{2, 8, 128, 64}, {2, 8, 128, 64}, {2, 8, 128, 64}, {}, {}}, {}, {"", "", "", "0.0", "False"}};
  EXPECT_EQ(Cost("aten::_scaled_dot_product_flash_attention", flash)->flops, full);
  const Op back{{{2, 8, 128, 64}, {2, 8, 128, 64}, {2, 8, 128, 64}, {2, 8, 128, 64}}, {}, {}};
  EXPECT_EQ(Cost("aten::_scaled_dot_product_efficient_attention_backward", back)->flops, 2 * full);
  // Grouped-query: K/V with 2 heads, Q with 8: the query's heads count.
  const Op gqa{{{2, 8, 128, 64}, {2, 2, 256, 64}, {2, 2, 256, 32}}, {}, {}};
  EXPECT_EQ(Cost("aten::scaled_dot_product_attention", gqa)->flops, 2.0 * 2 * 8 * 128 * 256 * (64 + 32));
}

TEST(FlopsTest, PerElementOpsAndEmbedding) {
  EXPECT_EQ(Cost("aten::layer_norm", {{{8, 128, 512}, {}, {512}, {512}, {}}, {"float"}, {}})->flops, 5.0 * 8 * 128 * 512);
  // add broadcasts [4, 1, 8] with [1, 5, 8]: 160 outputs; bytes read both and write the output.
  auto add = Cost("aten::add", {{{4, 1, 8}, {1, 5, 8}, {}}, {"float", "float", "Scalar"}, {}});
  ASSERT_TRUE(add);
  EXPECT_EQ(add->flops, 160);
  EXPECT_EQ(add->bytes, 4.0 * (32 + 40 + 160));
  EXPECT_EQ(add->cls, OpClass::kElementwise);
  EXPECT_FALSE(Cost("aten::add", {{{4, 3}, {5, 3}}, {}, {}}));  // does not broadcast
  EXPECT_EQ(Cost("aten::_softmax", {{{16, 1000}, {}, {}}, {"float"}, {}})->flops, 5.0 * 16 * 1000);
  auto emb = Cost("aten::embedding", {{{50000, 256}, {8, 128}}, {"float", "long int"}, {}});
  ASSERT_TRUE(emb);
  EXPECT_EQ(emb->flops, 0);
  EXPECT_EQ(emb->bytes, 2.0 * 8 * 128 * 256 * 4 + 8 * 128 * 8);
  EXPECT_EQ(emb->cls, OpClass::kEmbedding);
}

TEST(FlopsTest, NamesTypesAndLists) {
  EXPECT_TRUE(HasCostModel("aten::mm"));
  EXPECT_TRUE(HasCostModel("aten::_scaled_dot_product_flash_attention_backward"));
  EXPECT_FALSE(HasCostModel("mm"));  // only aten ops
  EXPECT_FALSE(HasCostModel("aten::einsum"));  // its inner bmm are costed instead
  EXPECT_FALSE(HasCostModel("aten::_foreach_add_"));
  EXPECT_EQ(DtypeOf("c10::BFloat16"), "bf16");
  EXPECT_EQ(DtypeOf("c10::Half"), "fp16");
  EXPECT_EQ(DtypeOf("float"), "fp32");
  EXPECT_EQ(DtypeOf("double"), "fp64");
  EXPECT_EQ(DtypeOf("long int"), "int");
  EXPECT_EQ(DtypeOf("ScalarList"), "");
  EXPECT_EQ(ElementBytes("c10::Float8_e5m2"), 1);
  EXPECT_EQ(ElementBytes("long int"), 8);
  EXPECT_EQ(ElementBytes("Scalar"), 0);
  EXPECT_EQ(ParseIntList("[2, 2]"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ParseIntList("3"), (std::vector<int64_t>{3}));
  EXPECT_EQ(ParseIntList("[-1, 0]"), (std::vector<int64_t>{-1, 0}));
  EXPECT_FALSE(ParseIntList(""));
  EXPECT_FALSE(ParseIntList("True"));
  EXPECT_FALSE(ParseIntList("[1.5]"));
}

// Dense peaks: the datasheets' sparse figures halved; devices named as traces name them.
TEST(DevicePeaksTest, DenseFiguresByNameAndByProperties) {
  auto h100 = PeakOfDevice("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->model, "H100 SXM5");
  EXPECT_DOUBLE_EQ(PeakTflops(*h100, "bf16"), 989.5);  // not 1979 (with sparsity)
  EXPECT_DOUBLE_EQ(PeakTflops(*h100, "fp32"), 67);
  EXPECT_EQ(PeakOfDevice("NVIDIA H100 PCIe")->model, "H100 PCIe");
  EXPECT_EQ(PeakOfDevice("NVIDIA A100-SXM4-80GB")->model, "A100 80GB SXM");
  EXPECT_EQ(PeakOfDevice("Tesla V100-DGXS-32GB")->model, "V100");
  EXPECT_DOUBLE_EQ(PeakTflops(*PeakOfDevice("Tesla V100-SXM2-16GB"), "bf16"), 0);  // Volta has no bf16
  EXPECT_EQ(PeakOfDevice("AMD Instinct MI300X")->model, "MI300X");
  EXPECT_EQ(PeakOfDevice("NVIDIA L4")->model, "L4");
  EXPECT_FALSE(PeakOfDevice("NVIDIA L40S"));
  EXPECT_FALSE(PeakOfDevice("MTIA"));
  EXPECT_EQ(PeakOfProperties(9, 0, 132, 85017493504)->model, "H100 SXM5");
  EXPECT_EQ(PeakOfProperties(9, 0, 132, 150'000'000'000)->model, "H200 SXM");
  EXPECT_FALSE(PeakOfProperties(8, 6, 84, 24'000'000'000));
  for (const char* n : {"NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-PCIE-40GB", "AMD Instinct MI250X"}) {
    const auto p = PeakOfDevice(n);
    ASSERT_TRUE(p) << n;
    EXPECT_FALSE(p->source.empty());
    EXPECT_GT(p->memory_gbps, 0);
  }
}

}  // namespace
}  // namespace trainrx::analyzers
