// gguf_perplexity: what a ggml block type and each CPU arithmetic cost in perplexity, on a
// safetensors model (tiny-kjv by default) without a GGUF file: every 2-D bf16 weight the
// loader uploads (projections, the embedding, and so a tied lm_head) is encoded on the way
// in by quantize_row, in the asked type, or — where its rows are no whole number of that
// type's blocks (tiny-kjv's 384-wide rows and 256-value k-quants) — in llama-quantize's
// fallback for it (fallback()). The model then runs through the CPU backend's block-type kernels in
// the exact and the int8 arithmetic. Prints the perplexity of each, with bf16 as the baseline.
//   usage: gguf_perplexity [--model DIR] [--text FILE] [--types q8_0,q4_k,...] [--window N]
//                          [--max-tokens N]
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/block_quant.h"
#include "core/error.h"
#include "engine/perplexity.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace tandem;

// llama-quantize's fallbacks for rows that are not whole 256-value super-blocks.
DType fallback(DType t, int64_t cols) {
  if (cols % dtype_block(t).elems == 0) return t;
  switch (t) {
    case DType::Q2_K:
    case DType::Q3_K:
      return DType::IQ4_NL;
    case DType::Q4_K:
      return DType::Q5_0;
    case DType::Q5_K:
      return DType::Q5_1;
    case DType::Q6_K:
      return DType::Q8_0;
    case DType::IQ4_XS:
      return DType::IQ4_NL;
    default:
      fail("no fallback for {} rows of {}", cols, dtype_name(t));
  }
}

// The CPU backend, but 2-D bf16 uploads (the checkpoint's matrices) are encoded in `type`.
class QuantizingBackend final : public Backend {
 public:
  QuantizingBackend(std::optional<DType> type, cpu::BlockArithmetic a) : type_(type) {
    cpu_.set_block_arithmetic(a);
  }
  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::CPU; }
  DType act_dtype() const override { return DType::F32; }
  DType weight_dtype(DType stored) const override {
    return type_ && stored == DType::BF16 ? DType::BF16 : cpu_.weight_dtype(stored);
  }
  Tensor upload(const Tensor& host, DType dtype) override {
    if (!type_ || host.dtype != DType::BF16 || host.ndim() != 2 || host.cols() % 32 != 0)
      return cpu_.upload(host, dtype == DType::BF16 && type_ ? DType::F32 : dtype);
    const DType t = fallback(*type_, host.cols());
    Tensor blocks = Tensor::empty_host(t, host.shape);
    std::vector<float> row(static_cast<size_t>(host.cols()));
    const size_t row_bytes = dtype_row_bytes(t, host.cols());
    for (int64_t r = 0; r < host.rows(); r++) {
      convert_to_f32(host.ptr<uint16_t>() + r * host.cols(), DType::BF16, row.data(), row.size());
      quantize_row(t, row.data(), blocks.ptr<uint8_t>() + size_t(r) * row_bytes, host.cols());
    }
    return cpu_.upload(blocks, t);
  }
  Tensor alloc(DType d, Shape s) override { return cpu_.alloc(d, s); }
  Tensor zeros(DType d, Shape s) override { return cpu_.zeros(d, s); }
  Tensor to_host_f32(const Tensor& t) override { return cpu_.to_host_f32(t); }
  void write_i32(Tensor& dst, const int32_t* src, int64_t n) override {
    cpu_.write_i32(dst, src, n);
  }
  void copy(Tensor& dst, const Tensor& src) override { cpu_.copy(dst, src); }
  void embedding(Tensor& o, const Tensor& t, const Tensor& ids, float s) override {
    cpu_.embedding(o, t, ids, s);
  }
  void linear(Tensor& o, const Tensor& x, const Linear& l) override { cpu_.linear(o, x, l); }
  void rms_norm(Tensor& o, const Tensor& x, const Tensor& w, float eps, float off) override {
    cpu_.rms_norm(o, x, w, eps, off);
  }
  void add_rms_norm(Tensor& o, Tensor& r, const Tensor& x, const Tensor& w, float eps,
                    float off) override {
    cpu_.add_rms_norm(o, r, x, w, eps, off);
  }
  void add(Tensor& o, const Tensor& a, const Tensor& b) override { cpu_.add(o, a, b); }
  void scale(Tensor& x, float s) override { cpu_.scale(x, s); }
  void softcap(Tensor& x, float cap) override { cpu_.softcap(x, cap); }
  void rope(Tensor& x, const StepTensors& st, const RopeSpec& sp) override { cpu_.rope(x, st, sp); }
  void gated_act(Tensor& o, const Tensor& gu, Activation a) override { cpu_.gated_act(o, gu, a); }
  void write_kv(PagedKv& c, const Tensor& k, const Tensor& v, const StepTensors& st) override {
    cpu_.write_kv(c, k, v, st);
  }
  void attention(Tensor& o, const Tensor& q, const PagedKv& c, const StepTensors& st,
                 const AttentionParams& p) override {
    cpu_.attention(o, q, c, st, p);
  }
  void gather_rows(Tensor& o, const Tensor& x, const Tensor& i) override {
    cpu_.gather_rows(o, x, i);
  }
  void topk_route(Tensor& w, Tensor& ids, const Tensor& l, int k, bool r) override {
    cpu_.topk_route(w, ids, l, k, r);
  }
  void moe_experts(Tensor& o, const Tensor& x, const Tensor& w, const Tensor& ids, const Linear& gu,
                   const Linear& d, Activation a) override {
    cpu_.moe_experts(o, x, w, ids, gu, d, a);
  }
  void sample(Tensor& l, std::span<const SampleRow> rows, std::span<SampledToken> out,
              const Tensor* draft_logits) override {
    cpu_.sample(l, rows, out, draft_logits);
  }

 private:
  CpuBackend cpu_;
  std::optional<DType> type_;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = TANDEM_BENCH_MODEL, text = model + "/valid.txt";
  std::vector<std::string> types = {"q8_0", "q6_k", "q5_k", "q4_k", "q4_0", "iq4_xs", "q3_k"};
  int window = 256;
  int64_t max_tokens = 8192;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model")
      model = v, text = v + "/valid.txt";
    else if (a == "--text")
      text = v;
    else if (a == "--types")
      types = split(v);
    else if (a == "--window")
      window = std::atoi(v.c_str());
    else if (a == "--max-tokens")
      max_tokens = std::atoll(v.c_str());
    else
      return fmt::print(stderr, "gguf_perplexity: unknown flag {}\n", a), 2;
  }
  try {
    std::ifstream in(text, std::ios::binary);
    if (!in) fail("{}: cannot open", text);
    std::stringstream s;
    s << in.rdbuf();
    const auto tok = Tokenizer::load(std::filesystem::path(model) / "tokenizer.json");
    std::vector<int32_t> ids = tok->encode(s.str(), false);
    if (int64_t(ids.size()) > max_tokens) ids.resize(size_t(max_tokens));
    auto run = [&](std::optional<DType> t, cpu::BlockArithmetic a) {
      QuantizingBackend be(t, a);
      auto m = load_model(model, be);
      return perplexity(*m, be, ids, window);
    };
    const PerplexityResult base = run(std::nullopt, cpu::BlockArithmetic::Exact);
    fmt::print("{} tokens ({} scored), window {}\nbf16          perplexity {:.4f}\n", ids.size(),
               base.num_scored, window, base.perplexity);
    for (const std::string& name : types) {
      std::optional<DType> t;
      for (int d = int(DType::Q4_0); d <= int(DType::IQ4_XS); d++)
        if (dtype_name(DType(d)) == name) t = DType(d);
      if (!t) fail("unknown type {}", name);
      const PerplexityResult e = run(t, cpu::BlockArithmetic::Exact),
                             q = run(t, cpu::BlockArithmetic::Int8);
      fmt::print("{:<7} exact perplexity {:.4f} ({:+.2f}%)   int8 {:.4f} ({:+.2f}% vs exact)\n",
                 name, e.perplexity, 100 * (e.perplexity / base.perplexity - 1), q.perplexity,
                 100 * (q.perplexity / e.perplexity - 1));
    }
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
