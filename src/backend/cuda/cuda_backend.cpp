// CudaBackend: the device, its stream and library handles, and the memory verbs.
// Every copy runs on the backend's stream; host -> device writes go through the
// allocator's pinned staging ring (async), device -> host reads synchronize.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_memory.h"
#include "core/error.h"

namespace tandem {

[[noreturn]] void cuda_fail(const std::string& message) {
  fail("{}", message);
}

void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("{}: cuBLAS status {} ({})", what, int(status), cublasGetStatusString(status));
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no GPU: not an error for the caller
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaOptions& options) {
  return std::make_unique<CudaBackend>(device, options);
}

namespace {

// Elements converted per host chunk when an upload changes the dtype.
constexpr size_t kConvertChunk = size_t(1) << 20;

// Destroys whatever of the handles exists; used by the destructor and a failed constructor.
void destroy_handles(cudaStream_t stream, cublasHandle_t cublas, cublasLtHandle_t lt) noexcept {
  if (stream) cudaStreamSynchronize(stream);
  if (lt) cublasLtDestroy(lt);
  if (cublas) cublasDestroy(cublas);
  if (stream) cudaStreamDestroy(stream);
}

}  // namespace

CudaBackend::CudaBackend(int device, const CudaOptions& options)
    : device_(device), options_(options) {
  cuda::set_pdl_enabled(options.pdl);
  const int n = cuda_device_count();
  if (device < 0 || device >= n)
    fail("CUDA device {} does not exist ({} usable device(s))", device, n);
#ifdef TANDEM_CUDA_COMPILE_CHECK
  fail("this build's CUDA device code is barely optimised (-DTANDEM_CUDA_DEVICE_OPT=OFF, CI's "
       "compile check): rebuild without it to run on a GPU");
#endif
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  cuda_check(cudaGetDeviceProperties(&props_, device), "cudaGetDeviceProperties");
  if (props_.major < 9)
    fail("CUDA device {} ({}) is sm_{}{}; tandem's kernels are built for sm_90 and newer", device,
         props_.name, props_.major, props_.minor);
  try {
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cublas_check(cublasCreate(&cublas_), "cublasCreate");
    cublas_check(cublasSetStream(cublas_, stream_), "cublasSetStream");
    cublas_check(cublasLtCreate(&cublas_lt_), "cublasLtCreate");
    allocator_ = std::make_shared<CudaAllocator>(device, stream_);
    // One workspace for both handles: they run on the same stream, one call at a time.
    cublas_check(
        cublasSetWorkspace(cublas_, allocator_->workspace(), CudaAllocator::kWorkspaceBytes),
        "cublasSetWorkspace");
  } catch (...) {
    allocator_.reset();
    destroy_handles(stream_, cublas_, cublas_lt_);
    throw;
  }
}

void CudaBackend::set_options(const CudaOptions& options) {
  options_ = options;
  cuda::set_pdl_enabled(options.pdl);
}

CudaBackend::~CudaBackend() {
  // Tensors may outlive the backend: they keep the allocator alive, not the stream.
  destroy_handles(stream_, cublas_, cublas_lt_);
  allocator_.reset();
}

int64_t CudaBackend::reserved_bytes() const {
  return allocator_->reserved_bytes();
}

int64_t CudaBackend::free_device_bytes() const {
  size_t free_bytes = 0, total = 0;
  cuda_check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  return int64_t(free_bytes);
}

Tensor CudaBackend::alloc(DType dtype, Shape shape) {
  if (shape.numel() < 0) fail("alloc: negative shape {}", shape.str());
  Tensor t;
  t.dtype = dtype;
  t.device = Device::CUDA;
  t.shape = shape;
  t.storage = allocator_->allocate(t.nbytes());
  t.data = t.storage.get();
  return t;
}

Tensor CudaBackend::zeros(DType dtype, Shape shape) {
  Tensor t = alloc(dtype, shape);
  if (t.nbytes() > 0)
    cuda_check(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_), "zeros: cudaMemsetAsync");
  return t;
}

Tensor CudaBackend::upload(const Tensor& host, DType dtype) {
  if (!host.defined()) fail("upload: host tensor {} is undefined", host.shape.str());
  if (host.device != Device::CPU) fail("upload: source {} must be a host tensor", host.shape.str());
  if ((host.dtype == DType::I32) != (dtype == DType::I32))
    fail("upload: {} tensor {} requested from {} data", dtype_name(dtype), host.shape.str(),
         dtype_name(host.dtype));
  Tensor out = alloc(dtype, host.shape);
  if (host.dtype == dtype) {
    allocator_->write_async(out.data, host.data, host.nbytes());
    return out;
  }
  // Convert on the host, one chunk at a time, so a large weight needs no full f32 copy.
  const size_t n = size_t(host.numel()), in_size = dtype_size(host.dtype);
  const size_t out_size = dtype_size(dtype);
  std::vector<float> f32(std::min(n, kConvertChunk));
  std::vector<char> converted(f32.size() * out_size);
  for (size_t i = 0; i < n; i += kConvertChunk) {
    const size_t m = std::min(kConvertChunk, n - i);
    convert_to_f32(static_cast<const char*>(host.data) + i * in_size, host.dtype, f32.data(), m);
    convert_from_f32(f32.data(), converted.data(), dtype, m);
    allocator_->write_async(static_cast<char*>(out.data) + i * out_size, converted.data(),
                            m * out_size);
  }
  return out;
}

Tensor CudaBackend::to_host_f32(const Tensor& t) {
  cuda::check_on_device(t, "to_host_f32", "t");
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  if (t.numel() == 0) return out;
  std::vector<char> raw(t.nbytes());
  cuda_check(cudaMemcpyAsync(raw.data(), t.data, t.nbytes(), cudaMemcpyDeviceToHost, stream_),
             "to_host_f32: cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(stream_), "to_host_f32: cudaStreamSynchronize");
  convert_to_f32(raw.data(), t.dtype, out.ptr<float>(), size_t(t.numel()));
  return out;
}

void CudaBackend::write_i32(Tensor& dst, const int32_t* src, int64_t n) {
  cuda::check_tensor(dst, DType::I32, "write_i32", "dst");
  if (n < 0 || n > dst.numel())
    fail("write_i32: {} elements do not fit in dst {}", n, dst.shape.str());
  if (n > 0) allocator_->write_async(dst.data, src, size_t(n) * sizeof(int32_t));
}

void CudaBackend::write_i32_rows(Tensor& dst, const int32_t* src, int64_t rows, int64_t cols) {
  cuda::check_tensor(dst, DType::I32, "write_i32_rows", "dst");
  if (dst.ndim() != 2 || rows < 0 || cols < 0 || rows > dst.dim(0) || cols > dst.dim(1))
    fail("write_i32_rows: [{}, {}] does not fit in dst {}", rows, cols, dst.shape.str());
  allocator_->write_rows_async(dst.data, size_t(dst.dim(1)) * sizeof(int32_t), src,
                               size_t(cols) * sizeof(int32_t), size_t(rows));
}

void CudaBackend::copy(Tensor& dst, const Tensor& src) {
  cuda::check_on_device(src, "copy", "src");
  cuda::check_tensor(dst, src.dtype, "copy", "dst");
  if (dst.numel() != src.numel())
    fail("copy: dst {} and src {} differ in size", dst.shape.str(), src.shape.str());
  if (dst.data == src.data || src.nbytes() == 0) return;
  const char* s = static_cast<const char*>(src.data);
  const char* d = static_cast<const char*>(dst.data);
  if (d < s + src.nbytes() && s < d + src.nbytes())
    fail("copy: dst {} and src {} overlap partially", dst.shape.str(), src.shape.str());
  cuda_check(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToDevice, stream_),
             "copy: cudaMemcpyAsync");
}

//   x [T, C], outs[i] [T, C_i], Σ C_i == C: one strided 2D copy per piece.
void CudaBackend::split_columns(const Tensor& x, std::initializer_list<Tensor*> outs) {
  cuda::check_on_device(x, "split_columns", "x");
  int64_t total = 0;
  for (Tensor* o : outs) {
    cuda::check_tensor(*o, x.dtype, "split_columns", "out");
    if (o->rows() != x.rows())
      fail("split_columns: piece {} must have the {} rows of x {}", o->shape.str(), x.rows(),
           x.shape.str());
    total += o->cols();
  }
  if (total != x.cols())
    fail("split_columns: pieces sum to {} columns of x {}", total, x.shape.str());
  const size_t esize = dtype_size(x.dtype), pitch = size_t(x.cols()) * esize;
  size_t offset = 0;
  for (Tensor* o : outs) {
    const size_t width = size_t(o->cols()) * esize;
    if (width > 0 && x.rows() > 0)
      cuda_check(cudaMemcpy2DAsync(o->data, width, static_cast<const char*>(x.data) + offset, pitch,
                                   width, size_t(x.rows()), cudaMemcpyDeviceToDevice, stream_),
                 "split_columns: cudaMemcpy2DAsync");
    offset += width;
  }
}

//   out [T, C], parts[i] [T, C_i], Σ C_i == C: one strided 2D copy per piece (split_columns'
//   inverse; a fused projection stored in pieces of different weight types, linear.h).
void CudaBackend::concat_columns(Tensor& out, std::span<const Tensor> parts) {
  cuda::check_on_device(out, "concat_columns", "out");
  int64_t total = 0;
  for (const Tensor& p : parts) {
    cuda::check_tensor(p, out.dtype, "concat_columns", "piece");
    if (p.rows() != out.rows())
      fail("concat_columns: piece {} must have the {} rows of out {}", p.shape.str(), out.rows(),
           out.shape.str());
    total += p.cols();
  }
  if (total != out.cols())
    fail("concat_columns: pieces sum to {} columns of out {}", total, out.shape.str());
  const size_t esize = dtype_size(out.dtype), pitch = size_t(out.cols()) * esize;
  size_t offset = 0;
  for (const Tensor& p : parts) {
    const size_t width = size_t(p.cols()) * esize;
    if (width > 0 && out.rows() > 0)
      cuda_check(cudaMemcpy2DAsync(static_cast<char*>(out.data) + offset, pitch, p.data, width,
                                   width, size_t(out.rows()), cudaMemcpyDeviceToDevice, stream_),
                 "concat_columns: cudaMemcpy2DAsync");
    offset += width;
  }
}

void CudaBackend::synchronize() {
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

int* CudaBackend::zeroed_counters(std::shared_ptr<int>& slot, int64_t count, const char* what) {
  if (slot) return slot.get();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream_, &capture), what);
  if (capture != cudaStreamCaptureStatusNone)
    cuda_fail(std::string(what) +
              ": must be created outside CUDA graph capture; run the captured step once eagerly first");
  const size_t bytes = size_t(count) * sizeof(int);
  cuda_check(cudaSetDevice(device_), what);
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes), what);
  std::shared_ptr<int> counters(static_cast<int*>(p), [](int* q) { cudaFree(q); });
  cuda_check(cudaMemsetAsync(p, 0, bytes, stream_), what);
  slot = std::move(counters);
  return slot.get();
}

}  // namespace tandem
