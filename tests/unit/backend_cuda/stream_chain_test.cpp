// The FP8 weight streams' successor table (cuda_stream_chain.h): host code, no GPU.
#include <gtest/gtest.h>

#include <memory>

#include "backend/cuda/cuda_stream_chain.h"

namespace tandem {
namespace {

// A weight [N, 64] whose storage the test controls (host bytes stand in for the device's).
Tensor weight(int64_t N) { return Tensor::empty_host(DType::F8E4M3, {N, 64}); }

TEST(StreamChain, NamesTheWeightThatFollowedLastTime) {
  cuda::StreamChain chain;
  Tensor a = weight(16), b = weight(32), c = weight(48);
  EXPECT_EQ(chain.launched(a, 64, 1, 4096).w, nullptr) << "nothing seen yet";
  EXPECT_EQ(chain.launched(b, 64, 2, 4096).w, nullptr);
  EXPECT_EQ(chain.launched(c, 64, 3, 4096).w, nullptr);
  const cuda::StreamNext after_a = chain.launched(a, 64, 1, 4096);  // c -> a learned too
  EXPECT_EQ(after_a.w, b.data);
  EXPECT_EQ(after_a.N, 32);
  EXPECT_EQ(after_a.grid, 2);
  EXPECT_EQ(after_a.row_bytes, 64);
  EXPECT_EQ(after_a.cta_bytes, 4096u);
  EXPECT_EQ(chain.launched(b, 64, 2, 4096).w, c.data);
  EXPECT_EQ(chain.launched(c, 64, 3, 4096).w, a.data);
  // The order changes: the next round names what followed in the last one.
  EXPECT_EQ(chain.launched(b, 64, 2, 4096).w, c.data);
  EXPECT_EQ(chain.launched(c, 64, 3, 4096).w, b.data) << "c -> b was the last order seen";
}

TEST(StreamChain, NamesNothingWhenOffRepeatedOrFreed) {
  cuda::StreamChain chain;
  Tensor a = weight(16), b = weight(16);
  chain.launched(a, 64, 1, 4096);
  chain.launched(b, 64, 1, 4096);
  EXPECT_EQ(chain.launched(a, 64, 1, 0).w, nullptr) << "cta_bytes 0: off";
  chain.launched(a, 64, 1, 4096);
  EXPECT_EQ(chain.launched(a, 64, 1, 4096).w, b.data) << "a repeated is not its own successor";
  const Tensor borrowed = Tensor::borrow(b.data, DType::F8E4M3, {16, 64});
  EXPECT_EQ(chain.launched(borrowed, 64, 1, 4096).w, nullptr) << "no storage to watch";
  {
    Tensor c = weight(16);
    chain.launched(a, 64, 1, 4096);
    chain.launched(c, 64, 1, 4096);
  }  // c freed
  EXPECT_EQ(chain.launched(a, 64, 1, 4096).w, nullptr) << "a's successor is gone";
}

}  // namespace
}  // namespace tandem
