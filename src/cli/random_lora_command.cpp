// `tandem random-lora`: a PEFT LoRA adapter folder with random weights for a Llama-style
// model folder (llama, mistral, qwen2, qwen3): rank-r adapters on every attention and MLP
// projection (q/k/v/o, gate/up/down), bf16, as PEFT saves them. For benchmarks (the LoRA
// part of scripts/gpu_bench.sh): its values are random, not trained, but shaped and named
// exactly like a real adapter, so loading and serving it costs what a real one costs.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "cli/commands.h"
#include "core/error.h"
#include "loader/random_fill.h"
#include "loader/safetensors_writer.h"
#include "model/config.h"

namespace tandem::cli {
namespace {

using json = nlohmann::json;

struct Projection {
  const char* module;  // PEFT's name below the layer
  int64_t out, in;
};

std::vector<Projection> projections(const ModelConfig& c) {
  const int64_t D = c.hidden_size, Dh = c.head_dim, F = c.intermediate_size;
  return {{"self_attn.q_proj", c.num_heads * Dh, D},
          {"self_attn.k_proj", c.num_kv_heads * Dh, D},
          {"self_attn.v_proj", c.num_kv_heads * Dh, D},
          {"self_attn.o_proj", D, c.num_heads * Dh},
          {"mlp.gate_proj", F, D},
          {"mlp.up_proj", F, D},
          {"mlp.down_proj", D, F}};
}

json adapter_config(int rank) {
  return {{"peft_type", "LORA"},
          {"task_type", "CAUSAL_LM"},
          {"r", rank},
          {"lora_alpha", 2 * rank},
          {"lora_dropout", 0.0},
          {"target_modules",
           {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}},
          {"bias", "none"},
          {"use_rslora", false},
          {"use_dora", false},
          {"fan_in_fan_out", false},
          {"modules_to_save", nullptr},
          {"rank_pattern", json::object()},
          {"alpha_pattern", json::object()},
          {"inference_mode", true}};
}

}  // namespace

int run_random_lora(const RandomLoraOptions& o) {
  try {
    if (o.rank < 1) fail("--rank must be >= 1 (got {})", o.rank);
    ModelConfig c = ModelConfig::load(o.model);
    static const char* supported[] = {"llama", "mistral", "qwen2", "qwen3"};
    if (std::find(std::begin(supported), std::end(supported), c.model_type) == std::end(supported))
      fail("random-lora: model_type '{}' is not supported (llama, mistral, qwen2, qwen3)",
           c.model_type);
    SafetensorsWriter w;
    uint64_t counter = o.seed * 1000003;
    auto normal = [&](std::string name, std::vector<int64_t> shape, float stddev) {
      const uint64_t s = counter++;
      w.add(std::move(name), DType::BF16, shape,
            [=](void* dst, size_t bytes) { fill_random(dst, DType::BF16, bytes / 2, s, stddev); });
    };
    // A as PEFT's kaiming init would scale it; B small and nonzero (PEFT starts it at 0,
    // which would make the adapter a no-op), so each delta is a few percent of W x.
    for (int i = 0; i < c.num_layers; i++)
      for (const Projection& p : projections(c)) {
        const std::string base = fmt::format("base_model.model.model.layers.{}.{}", i, p.module);
        normal(base + ".lora_A.weight", {o.rank, p.in}, float(1.0 / std::sqrt(double(p.in))));
        normal(base + ".lora_B.weight", {p.out, o.rank}, float(0.02 / std::sqrt(double(o.rank))));
      }
    std::filesystem::create_directories(o.out);
    w.write(std::filesystem::path(o.out) / "adapter_model.safetensors", {{"format", "pt"}});
    std::ofstream cfg(std::filesystem::path(o.out) / "adapter_config.json");
    cfg << adapter_config(o.rank).dump(2) << "\n";
    if (!cfg) fail("{}: write failed", o.out);
    fmt::print(stderr, "wrote {} (rank {} on {} projections, {:.1f} MB)\n", o.out, o.rank,
               c.num_layers * 7, double(w.total_bytes()) / 1e6);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
