// A kernel timeline for any CUDA process, without Nsight Systems: a CUPTI injection library.
// The CUDA driver loads it when the process initializes CUDA, if
//   CUDA_INJECTION64_PATH=build/bench/libtandem_timeline.so TANDEM_TIMELINE=out.csv <command>
// and it records every kernel's start and end on the GPU (CUPTI's concurrent-kernel
// activity: graph nodes included, and kernels that overlap under programmatic dependent
// launch keep their real overlap), written at exit as CSV:
//   start_ns,end_ns,grid,block,graph_node,name
// bench/timeline/summarize.py turns it into where a window's wall time went. ncu cannot
// show that: it serializes the kernels, which removes what they cost each other.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

std::FILE* g_out = nullptr;
std::mutex g_mu;
constexpr size_t kBufferBytes = size_t(16) << 20;

// "ns::kernel<Args>(params)" -> "kernel<Args>": the name a reader looks for, short enough
// for a table.
std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  for (const char* noise : {"(anonymous namespace)::", "void "}) {
    for (size_t at = s.find(noise); at != std::string::npos; at = s.find(noise))
      s.erase(at, std::strlen(noise));
  }
  // Cut the parameter list and the namespaces before the kernel's own name (both outside
  // template arguments).
  int depth = 0;
  size_t cut = 0;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '<') depth++;
    if (s[i] == '>') depth--;
    if (depth == 0 && s[i] == '(') {
      s.resize(i);
      break;
    }
    if (depth == 0 && s[i] == ':' && i + 1 < s.size() && s[i + 1] == ':') cut = i + 2;
  }
  s = s.substr(std::min(cut, s.size()));
  for (char& c : s)
    if (c == ',') c = ';';  // the CSV's separator
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    if (g_out != nullptr)
      std::fprintf(g_out, "%llu,%llu,%d,%d,%llu,%s\n", (unsigned long long)k->start,
                   (unsigned long long)k->end, k->gridX * k->gridY * k->gridZ,
                   k->blockX * k->blockY * k->blockZ, (unsigned long long)k->graphNodeId,
                   short_name(k->name).c_str());
  }
  std::free(buffer);
}

void finish() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out != nullptr) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* path = std::getenv("TANDEM_TIMELINE");
  g_out = std::fopen(path != nullptr ? path : "kernel_timeline.csv", "w");
  if (g_out == nullptr) return 0;
  std::fprintf(g_out, "start_ns,end_ns,grid,block,graph_node,name\n");
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_timeline: CUPTI refused the kernel activity\n");
    return 0;
  }
  std::atexit(finish);
  return 1;
}
