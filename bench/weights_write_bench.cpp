// Writes a random bf16 safetensors file of Llama-8B-shaped tensors and prints how fast.
//
//   weights_write_bench [DIR=/tmp] [GIGABYTES=2] [--keep]
//
// Figures: the RNG alone (into memory), the write (until SafetensorsWriter::write returns:
// data in the page cache, the kernel still writing back), and the write plus fsync (on
// the disk). The file is checked against the RNG, then removed unless --keep.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "loader/random_fill.h"
#include "loader/safetensors.h"
#include "loader/safetensors_writer.h"

namespace {

using namespace tandem;
using Clock = std::chrono::steady_clock;

constexpr float kStddev = 0.02f;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// User + system CPU seconds of the whole process: GB per CPU-second does not depend on how
// busy the machine is, wall-clock GB/s does.
double cpu_seconds() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

struct Planned {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t seed;
};

// Llama-3-8B layers (hidden 4096, 8 KV heads of 128, intermediate 14336) until `bytes`.
std::vector<Planned> plan_tensors(uint64_t bytes) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> layer = {
      {"self_attn.q_proj.weight", {4096, 4096}},  {"self_attn.k_proj.weight", {1024, 4096}},
      {"self_attn.v_proj.weight", {1024, 4096}},  {"self_attn.o_proj.weight", {4096, 4096}},
      {"mlp.gate_proj.weight", {14336, 4096}},    {"mlp.up_proj.weight", {14336, 4096}},
      {"mlp.down_proj.weight", {4096, 14336}},    {"input_layernorm.weight", {4096}},
      {"post_attention_layernorm.weight", {4096}}};
  std::vector<Planned> out;
  uint64_t total = 0;
  for (int l = 0; total < bytes; l++)
    for (const auto& [name, shape] : layer) {
      uint64_t n = 2;
      for (int64_t d : shape) n *= uint64_t(d);
      if (total + n > bytes && total > 0) return out;
      out.push_back({"model.layers." + std::to_string(l) + "." + name, shape, out.size() + 1});
      total += n;
    }
  return out;
}

void report(const char* what, double gb, double wall_s, double cpu_s) {
  std::printf("%-20s %6.2f GB/s  (%.2f s wall, %.2f GB per CPU-second)\n", what, gb / wall_s,
              wall_s, gb / cpu_s);
}

void report_fill_only() {
  const size_t n = size_t(256) << 20;  // 512 MB of bf16
  std::vector<uint16_t> buf(n);        // touched (zeroed) here, so no page faults below
  auto start = Clock::now();
  double cpu = cpu_seconds();
  fill_random_bf16(buf.data(), n, 1, kStddev);
  report("rng only (memory):", double(n * 2) / 1e9, seconds_since(start), cpu_seconds() - cpu);
}

void verify(const std::filesystem::path& path, const std::vector<Planned>& plan) {
  auto file = SafetensorsFile::open(path);
  for (size_t k : {size_t(0), plan.size() / 2, plan.size() - 1}) {
    Tensor t = file->tensor(plan[k].name);
    for (uint64_t i : {uint64_t(0), uint64_t(t.numel() - 1)})
      if (t.ptr<uint16_t>()[i] != f32_to_bf16(random_normal_at(plan[k].seed, i, kStddev)))
        fail("{}: tensor '{}' element {} differs from the RNG", path.string(), plan[k].name, i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path dir = "/tmp";
  double gigabytes = 2;
  bool keep = false;
  int positional = 0;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--keep") == 0)
      keep = true;
    else if (positional++ == 0)
      dir = argv[i];
    else
      gigabytes = std::atof(argv[i]);
  }
  try {
    std::vector<Planned> plan = plan_tensors(uint64_t(gigabytes * 1e9));
    SafetensorsWriter writer;
    for (const Planned& p : plan)
      writer.add_chunked(p.name, DType::BF16, p.shape,
                         random_chunk_fill(DType::BF16, p.seed, kStddev));
    std::filesystem::path path = dir / "tandem_weights_write_bench.safetensors";
    double total_gb = double(writer.total_bytes()) / 1e9;
    std::printf("threads %d, %zu tensors, %.3f GB -> %s\n", ThreadPool::global().num_threads(),
                plan.size(), total_gb, path.c_str());
    report_fill_only();

    auto start = Clock::now();
    double cpu = cpu_seconds();
    writer.write(path, {{"format", "pt"}});
    report("write (page cache):", total_gb, seconds_since(start), cpu_seconds() - cpu);
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0 || ::fsync(fd) != 0) fail("cannot fsync {}", path.string());
    ::close(fd);
    report("write + fsync:", total_gb, seconds_since(start), cpu_seconds() - cpu);
    verify(path, plan);
    std::printf("verified against the RNG\n");
    if (!keep) std::filesystem::remove(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weights_write_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
