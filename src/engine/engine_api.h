// The engine as the HTTP threads see it: submit a request, read its stream, ask for
// numbers. The engine thread owns the model, the KV cache and every sequence; nothing
// here touches them directly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/lora_adapters.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "model/vision/vision_spec.h"

namespace tandem {

// One KV group's blocks (kv/kv_groups.h): the full-attention layers, or one sliding window.
struct KvGroupStats {
  int window = 0;  // 0: full attention; else the window in tokens
  int64_t total = 0;
  int64_t used = 0;    // held by live sequences
  int64_t cached = 0;  // free, holding a reusable prefix (evicted LRU when blocks are needed)
};

// Speculative decoding's counters (vLLM's spec_decode_* metrics): verify steps of rows
// with proposals ("drafts"), proposals verified, proposals accepted, and accepted by the
// proposal's position (0: the first after the row's last token).
struct SpecDecodeStats {
  bool enabled = false;
  std::string method;  // "ngram", "draft_model"
  int num_speculative_tokens = 0;
  int64_t num_drafts = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  std::vector<int64_t> accepted_per_position;  // [num_speculative_tokens]
  int64_t num_speculative_steps = 0;  // steps in which some row verified proposals
  // Overlapped loop: plain steps in flight read before the next step was planned, because
  // some row might speculate (each cost the device the host's planning time).
  int64_t num_steps_read_early = 0;
};

struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;    // held by live sequences
  int64_t kv_blocks_cached = 0;  // free, holding a reusable prefix
  int64_t num_preemptions = 0;
  bool prefix_cache_enabled = false;
  // Prompt tokens looked up in the prefix cache at first admission, and of them the ones
  // found (vLLM's prefix_cache_queries / prefix_cache_hits).
  int64_t prefix_cache_queries_total = 0;
  int64_t prefix_cache_hits_total = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t requests_finished = 0;
  std::vector<KvGroupStats> kv_groups;  // [G]; the kv_blocks_* fields are their sums
  SpecDecodeStats spec_decode;
  // Images run through the vision encoder (encoder-cache hits not counted), and the
  // encoder's wall time over them when it is timed (ExecutorConfig::vision_timing).
  int64_t images_encoded_total = 0;
  std::optional<double> vision_encode_ms_total;
};

// Facts about the loaded model that request validation needs.
struct ModelInfo {
  std::string name;            // served model name
  int vocab_size = 0;
  int hidden_size = 0;         // the length of an embedding (GenerationRequest::pooling)
  int max_model_len = 0;       // prompt + generated tokens at most
  std::vector<int32_t> eos_token_ids;
  int64_t num_parameters = 0;
  std::string dtype;           // "f32", "bf16"
  int block_size = 16;
  // Whether requests may carry images (GenerationRequest::media), and how to build them:
  // the placeholder token ids and the soft tokens per image (model/vision/vision_spec.h).
  VisionSpec vision;
};

class EngineApi {
 public:
  virtual ~EngineApi() = default;
  // Queues a request. Never blocks on the model; errors (a prompt that can never fit,
  // ids out of the vocabulary) arrive as a final chunk with finish == Error.
  virtual std::shared_ptr<RequestStream> submit(GenerationRequest request) = 0;
  virtual EngineStats stats() const = 0;
  virtual const ModelInfo& model_info() const = 0;
  // The LoRA adapters a request may name in GenerationRequest::lora, with their folders.
  virtual std::vector<std::pair<std::string, std::string>> lora_adapters() const { return {}; }
  // Serves the PEFT adapter in `dir` as `name` from now on, or refuses with LoraLoadError
  // (Engine::load_lora). Blocks the caller, never the engine, while the folder is read.
  virtual LoraAdapter load_lora(const std::string& name, const std::filesystem::path& dir) {
    (void)dir;
    throw LoraLoadError(LoraRefusal::NoCapacity,
                        fmt::format("LoRA adapter '{}': this engine serves no adapters", name));
  }
  // Stops serving adapter `name`, unless a live request uses it.
  virtual LoraRemoval unload_lora(const std::string& name) {
    (void)name;
    return LoraRemoval::NotFound;
  }
};

}  // namespace tandem
