// What a command needs from a model — a Hugging Face folder or a GGUF file (or the first
// shard of a split one): the backend (--device), the model, the tokenizer (the folder's
// tokenizer.json, the GGUF file's own, or --tokenizer DIR's, which wins), and parsing of
// "--ids 1,2,3".
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/batch_defaults.h"
#include "engine/engine.h"
#include "engine/speculative_config.h"
#include "engine/tp_ranks.h"
#include "model/model.h"

namespace tandem {
class Tokenizer;
}

namespace tandem::cli {

struct LoadedModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;  // null for a folder without tokenizer.json
  std::string weight_format;  // weight_format_name(): "bf16", "fp8_e4m3 per-channel ...", "Q4_K_M: q4_k 120, ..."
  // Speculative decoding's draft model, on the same backend (load_draft_model).
  std::unique_ptr<Model> draft;
  // Under --tensor-parallel-size N > 1 (LoadOptions::tp) or TANDEM_TP_EXECUTOR: the group, whose rank 0 is
  // `backend` and `model` above (engine/tp_ranks.h). Commands that run the model directly
  // go through it (teacher_forced_logits(TpRanks&, ...)), make_engine through the
  // tensor-parallel executor.
  std::shared_ptr<TpRanks> tp_ranks;
};

// `device`: "cpu", "cuda" or "auto" (cuda when a GPU is present, else cpu); `options`:
// --quantization (online_quantization()), the room for LoRA adapters (none by default) and
// --tensor-parallel-size (options.tp.size; N > 1, or TANDEM_TP_EXECUTOR, loads N ranks —
// CPU threads, or GPUs through NCCL: tp_ranks).
// `tokenizer`: --tokenizer DIR, whose tokenizer.json replaces the model's own.
LoadedModel load_model_folder(const std::filesystem::path& dir, const std::string& device = "cpu",
                              const LoadOptions& options = {},
                              const std::optional<std::string>& tokenizer = std::nullopt);
// The folder or file the tokenizer, chat template and generation defaults come from:
// --tokenizer DIR when given, else the model itself (a folder or a GGUF file).
std::filesystem::path tokenizer_source(const std::string& model, const std::optional<std::string>& tokenizer);
// The API's default model name: the folder's name, or a GGUF file's without ".gguf" and a
// split model's "-00001-of-0000N".
std::string default_served_name(const std::string& model);
// Loads the draft model of `config` (method draft_model; nothing for ngram) beside `m`, on
// its backend. Throws tandem::Error naming the folder when the draft's vocabulary is not
// the model's (another size, or another tokenizer.json).
void load_draft_model(LoadedModel& m, const SpeculativeConfig& config);
// The capacity for serving the PEFT adapters in `dirs` (read to find their largest rank):
// max(max_loras, the number of dirs) slots of rank max(max_rank, that rank).
LoraCapacity lora_capacity_for(const std::vector<std::filesystem::path>& dirs, int max_loras = 0,
                               int max_rank = 0);
// The backend for --device (with the CUDA switches of the environment, env_switches.h).
std::unique_ptr<Backend> make_backend(const std::string& device);
// The engine over a loaded model, whose backend and model move into its executor;
// `config`'s overlap and the executor's graphs follow the environment switches.
// With `batch`, its auto counts are resolved on the executor's device first
// (engine/batch_defaults.h) and the choice written to `*chosen` when given; without it,
// `config.scheduler` is taken as it is.
std::unique_ptr<Engine> make_engine(LoadedModel& m, EngineConfig config,
                                    std::optional<DType> kv_dtype,
                                    std::optional<BatchFlags> batch = std::nullopt,
                                    BatchChoice* chosen = nullptr);
// --lora-modules "name=DIR" entries → (name, DIR); throws tandem::Error naming a malformed one.
std::vector<std::pair<std::string, std::filesystem::path>> parse_lora_modules(
    const std::vector<std::string>& entries);
// "1, 2,3" → {1, 2, 3}; throws tandem::Error on anything else.
std::vector<int32_t> parse_ids(const std::string& text);

}  // namespace tandem::cli
