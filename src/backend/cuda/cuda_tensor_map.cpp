#include "backend/cuda/cuda_tensor_map.h"

#include <cuda_runtime.h>

#include <cudaTypedefs.h>

#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace tandem::cuda {

namespace {

// The driver's cuTensorMapEncodeTiled (its CUDA 12.0 signature), looked up once.
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                           cudaEnableDefault, &found);
    cuda_require(e == cudaSuccess && found == cudaDriverEntryPointSuccess && p != nullptr,
                 "TMA: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

CUtensorMap encode(const KvMapShape& s) {
  cuda_require(aligned16(s.base) && s.head_dim % 8 == 0 && s.box_rows >= 1 && s.box_rows <= 256,
               "TMA: a K/V map needs a 16-byte aligned cache and whole 16-byte rows");
  const cuuint64_t row_bytes = cuuint64_t(s.head_dim) * 2;  // bf16
  const cuuint64_t dims[3] = {cuuint64_t(s.head_dim), cuuint64_t(s.num_kv_heads),
                              cuuint64_t(s.num_slots)};
  const cuuint64_t strides[2] = {row_bytes, row_bytes * cuuint64_t(s.num_kv_heads)};  // dims 1, 2
  const cuuint32_t box[3] = {64, 1, cuuint32_t(s.box_rows)};  // 64 bf16 = the 128-byte swizzle
  const cuuint32_t unit[3] = {1, 1, 1};
  CUtensorMap map{};
  const CUresult r =
      encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(s.base), dims,
                     strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    cuda_fail("TMA: cuTensorMapEncodeTiled refused a K/V map (CUresult " + std::to_string(int(r)) +
              ")");
  return map;
}

}  // namespace

CUtensorMap byte_matrix_tensor_map(const void* base, int64_t rows, int64_t cols, int box_rows) {
  cuda_require(aligned16(base) && cols % 16 == 0 && cols > 0 && rows > 0 && box_rows >= 1 &&
                   box_rows <= 256,
               "TMA: a byte matrix map needs a 16-byte aligned base, whole 16-byte rows and "
               "1-256 box rows");
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(cols)};  // dim 1, bytes
  const cuuint32_t box[2] = {128, cuuint32_t(box_rows)};  // 128 bytes = the 128-byte swizzle
  const cuuint32_t unit[2] = {1, 1};
  CUtensorMap map{};
  const CUresult r =
      encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides,
                     box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    cuda_fail("TMA: cuTensorMapEncodeTiled refused a byte matrix map [" + std::to_string(rows) +
              ", " + std::to_string(cols) + "] (CUresult " + std::to_string(int(r)) + ")");
  return map;
}

CUtensorMap kv_tensor_map(const KvMapShape& shape) {
  struct Entry {
    KvMapShape shape;
    CUtensorMap map;
  };
  // A model has two cache tensors per layer; tests make and drop caches, so the list is
  // bounded (re-encoding is cheap, only a steady state must not pay for it).
  static std::mutex mu;
  static std::vector<Entry> maps;
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : maps)
    if (e.shape == shape) return e.map;
  if (maps.size() >= 512) maps.clear();
  maps.push_back({shape, encode(shape)});
  return maps.back().map;
}

}  // namespace tandem::cuda
