// The CUDA backend starts on a GPU machine; elsewhere every CUDA test skips.
#include <gtest/gtest.h>

#include "backend/backend.h"

namespace tandem {
namespace cuda_smoke_test {

TEST(CudaBackend, StartsWhenAGpuIsPresent) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  auto backend = make_cuda_backend(0);
  EXPECT_EQ(backend->name(), "cuda");
  EXPECT_EQ(backend->device(), Device::CUDA);
}

}  // namespace cuda_smoke_test
}  // namespace tandem
