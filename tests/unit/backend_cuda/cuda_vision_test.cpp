// The CUDA side of images against the CPU twins: layer_norm and clamp (the vision towers'
// ops), and paged attention with images (AttentionParams::media_bidirectional) on both
// prefill kernels (mma.sync and, on Hopper, wgmma) — a token of an image sees the rest of
// its image, the window still cutting the past — beside decode rows in one step.
#include <gtest/gtest.h>

#include <limits>

#include "../backend/step_builder.h"
#include "backend/cuda/cuda_attention_prefill.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_vision_test {

using test::kBf16Tol;
using test::put;
using test::put_as;
using test::rel_err_between;

TEST(CudaVisionOps, LayerNormMatchesCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  for (uint32_t seed : test::test_seeds()) {
    std::mt19937 rng(seed);
    for (auto [R, C] : {std::pair{1, 1}, {7, 33}, {65, 1152}, {3, 4000}})
      for (DType wd : {DType::BF16, DType::F32}) {
        SCOPED_TRACE(testing::Message()
                     << R << "x" << C << " " << dtype_name(wd) << " seed " << seed);
        auto x = test::random_bf16(rng, size_t(R * C), 1.f, 5.f);
        auto w = test::random_bf16(rng, size_t(C), 0.5f, 1.5f),
             b = test::random_bf16(rng, size_t(C));
        Tensor ref = be.cpu->alloc(DType::F32, {R, C});
        be.cpu->layer_norm(ref, put(*be.cpu, x, {R, C}), put(*be.cpu, w, {C}), put(*be.cpu, b, {C}),
                           1e-6f);
        Tensor out = test::poisoned(*be.gpu, DType::BF16, {R, C});
        be.gpu->layer_norm(out, put(*be.gpu, x, {R, C}), put_as(*be.gpu, w, {C}, wd),
                           put_as(*be.gpu, b, {C}, wd), 1e-6f);
        EXPECT_LE(rel_err_between(*be.gpu, out, *be.cpu, ref), kBf16Tol);
      }
  }
}

TEST(CudaVisionOps, ClampMatchesCpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(3);
  auto x = test::random_bf16(rng, 5000, -6.f, 6.f);
  const float inf = std::numeric_limits<float>::infinity();
  for (auto [lo, hi] : {std::pair{-2.5f, 2.5f}, {-inf, 1.f}, {0.f, inf}}) {
    Tensor c = put(*be.cpu, x, {50, 100}), g = put(*be.gpu, x, {50, 100});
    be.cpu->clamp(c, lo, hi);
    be.gpu->clamp(g, lo, hi);
    EXPECT_EQ(test::to_vec(*be.gpu, g), test::to_vec(*be.cpu, c));  // bf16 inputs: exact
  }
}

// One step: a prompt holding two images (one longer than the window), a chunk holding a
// whole image over a cached prefix, and a decode row; K/V written by write_kv.
struct SpanRow {
  int start, end;
  std::vector<std::pair<int, int>> images;
};

Tensor run_attention(Backend& be, const std::vector<SpanRow>& rows, const AttentionParams& params,
                     int Hq, int Hkv, int Dh, std::mt19937 rng) {
  std::vector<test::RowSpec> specs;
  int next = 0, T = 0;
  for (const SpanRow& r : rows) {
    std::vector<int32_t> blocks;
    for (int i = 0; i < (r.end + 15) / 16; i++) blocks.push_back(next++);
    specs.push_back(test::row_range(0, r.end, blocks));  // every key, written this step
    T += r.end;
  }
  PagedKv cache{be.zeros(be.act_dtype(), {next, 16, Hkv, Dh}),
                be.zeros(be.act_dtype(), {next, 16, Hkv, Dh})};
  StepTensors all = test::build_step(be, specs, 16);
  be.write_kv(cache, put(be, test::random_bf16(rng, size_t(T * Hkv * Dh), -2.f, 2.f), {T, Hkv, Dh}),
              put(be, test::random_bf16(rng, size_t(T * Hkv * Dh)), {T, Hkv, Dh}), all);
  // The queries: each row's tokens [start, end), with their images' ends.
  std::vector<test::RowSpec> q_specs;
  std::vector<int32_t> ends;
  for (size_t b = 0; b < rows.size(); b++) {
    q_specs.push_back(test::row_range(rows[b].start, rows[b].end - rows[b].start, specs[b].blocks));
    for (int p = rows[b].start; p < rows[b].end; p++) {
      int end = 0;
      for (auto im : rows[b].images)
        if (im.first <= p && p < im.second) end = im.second;
      ends.push_back(end);
    }
  }
  StepTensors step = test::build_step(be, q_specs, 16);
  step.media_ends = test::put_i32(be, ends, {step.num_tokens});
  Tensor out = be.alloc(be.act_dtype(), {step.num_tokens, Hq, Dh});
  be.attention(out,
               put(be, test::random_bf16(rng, size_t(step.num_tokens * Hq * Dh), -2.f, 2.f),
                   {step.num_tokens, Hq, Dh}),
               cache, step, params);
  return out;
}

TEST(CudaVisionAttention, ImageSpansMatchCpuOnBothPrefillKernels) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  const std::vector<SpanRow> rows = {
      {0, 150, {{5, 90}, {100, 104}}}, {60, 140, {{70, 130}}}, {40, 41, {}}, {0, 64, {{0, 64}}}};
  for (bool sm90 : {false, true})
    for (int Dh : {64, 72, 128})
      for (int window : {0, 24}) {
        SCOPED_TRACE(testing::Message()
                     << (sm90 ? "sm90" : "mma") << " Dh " << Dh << " window " << window);
        CudaOptions options;
        options.sm90_prefill = sm90;  // false: the mma.sync kernel everywhere
        be.gpu = std::make_unique<CudaBackend>(0, options);
        AttentionParams params{.scale = 0.125f, .window = window, .media_bidirectional = true};
        std::mt19937 rng(Dh + window);
        const Tensor cpu = run_attention(*be.cpu, rows, params, 8, 2, Dh, rng);
        const Tensor gpu = run_attention(*be.gpu, rows, params, 8, 2, Dh, rng);
        EXPECT_LE(rel_err_between(*be.gpu, gpu, *be.cpu, cpu), kBf16Tol);
        params.media_bidirectional = false;  // and the same step, causal, differs from it
        const Tensor causal = run_attention(*be.gpu, rows, params, 8, 2, Dh, rng);
        EXPECT_GT(rel_err_between(*be.gpu, causal, *be.cpu, cpu), 1e-2);
      }
}

}  // namespace cuda_vision_test
}  // namespace tandem
