// The subcommands of the `tandem` binary. main.cpp parses flags (CLI11) into these
// option structs; each run_* returns the process exit code and reports errors itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/common/server_limits.h"
#include <nlohmann/json_fwd.hpp>

namespace tandem::cli {

// The embedded default model (models/tiny-kjv), used when --model is omitted.
std::string default_model_dir();

// --model is a Hugging Face folder or a GGUF file (the first shard of a split one);
// --tokenizer DIR's tokenizer.json (and tokenizer_config.json) replace the model's own.
struct ServeOptions {
  std::string model;
  std::optional<std::string> tokenizer;
  std::string device = "auto";  // cpu | cuda | auto (cuda when a GPU is present)
  std::optional<std::string> quantization;  // --quantization: none | fp8 (quantize a 16-bit checkpoint at load)
  int tensor_parallel_size = 1;             // -tp N: ranks (docs/tensor-parallel.md)
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string batch = "auto";               // --batch / --decode-concurrency: rows per step
  std::string max_batched_tokens = "auto";  // tokens per step (engine/batch_defaults.h)
  int prompt_concurrency = 8;
  std::optional<int> max_model_len;      // default: the model's max_position_embeddings
  std::optional<std::string> kv_budget;  // "4GB"; default: rows × context, at most 1/4 of free RAM
  std::string kv_cache_dtype = "auto";   // auto (the activation dtype) | fp8 | fp8_e4m3
  std::optional<std::string> api_key;
  std::string served_model_name;
  std::string reasoning_parser = "auto";  // qwen3 | deepseek_r1 | glm45 | gemma4 | auto | none
  bool log_requests = false;
  server::ServerLimits limits;             // limit_flags.h
  std::vector<std::string> allowed_hosts;  // --allowed-hosts; empty: the default rule
  bool no_web_ui = false;  // --no-web-ui: no / and /dashboard pages
  bool enable_prefix_caching = true;  // --no-enable-prefix-caching turns it off
  std::optional<std::string>
      speculative_config;                 // --speculative-config JSON (engine/speculative_config.h)
  std::vector<std::string> lora_modules;  // "name=DIR" each: PEFT adapters served by name
  int max_loras = 0;      // adapter slots (at least one per --lora-modules entry)
  int max_lora_rank = 0;  // largest adapter rank a slot takes (at least the modules')
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter; the slots and rank then default
  // to 4 and 16 at least (room to load adapters into; 16 is vLLM's --max-lora-rank default).
  bool enable_lora_runtime_updates = false;
  std::string task = "auto";     // --task: auto | generate | embed (server/common/serve_task.h)
  std::string pooling = "auto";  // --pooling: auto | last | mean | cls (common/pooling_config.h)
};
int run_serve(const ServeOptions& o);
// "4GB", "512MiB", "1000000" → bytes; throws tandem::Error otherwise.
int64_t parse_bytes(const std::string& text);

struct LogitsOptions {
  std::string model;
  std::string device = "auto";  // cpu | cuda | auto (cuda when a GPU is present)
  std::optional<std::string> quantization;  // --quantization: none | fp8 (quantize a 16-bit checkpoint at load)
  int tensor_parallel_size = 1;             // -tp N: ranks (docs/tensor-parallel.md)
  std::string ids;  // "1,2,3"
  std::string out;  // .npy path
  std::optional<std::string> lora;  // a PEFT adapter folder to run with
  std::optional<std::string> pixel_values;  // the ids' images, preprocessed (cli/pixel_values.h)
};
int run_logits(const LogitsOptions& o);

struct GenerateOptions {
  std::string model;
  std::optional<std::string> tokenizer;  // --tokenizer DIR (as serve's)
  std::string device = "auto";  // cpu | cuda | auto (cuda when a GPU is present)
  std::optional<std::string> quantization;  // --quantization: none | fp8 (quantize a 16-bit checkpoint at load)
  int tensor_parallel_size = 1;             // -tp N: ranks (docs/tensor-parallel.md)
  std::optional<std::string> prompt;
  std::optional<std::string> ids;
  int max_tokens = 64;
  float temperature = 0.f;
  int top_k = 0;
  float top_p = 1.f;
  float min_p = 0.f;
  std::optional<uint64_t> seed;
  bool json = false;
  bool timing = false;  // --timing: tokens, seconds and tok/s on stderr
  bool ignore_eos = false;
  std::string kv_cache_dtype = "auto";  // auto | fp8 | fp8_e4m3 (as serve's)
  std::optional<std::string> lora;  // a PEFT adapter folder to run with
  bool enable_prefix_caching = true;    // as serve's
  std::optional<std::string> pixel_values;  // with --ids: their images (cli/pixel_values.h)
  std::vector<std::string> images;          // --image FILE, repeatable (cli/image_prompt.h)
  std::optional<std::string> speculative_config;  // as serve's
};
int run_generate(const GenerateOptions& o);

struct PerplexityOptions {
  std::string model;
  std::optional<std::string> tokenizer;  // --tokenizer DIR (as serve's)
  std::string device = "auto";  // cpu | cuda | auto (cuda when a GPU is present)
  std::optional<std::string> quantization;  // --quantization: none | fp8 (quantize a 16-bit checkpoint at load)
  int tensor_parallel_size = 1;             // -tp N: ranks (docs/tensor-parallel.md)
  std::string file;
  int context = 0;  // window length; 0 = the model's max_position_embeddings
};
int run_perplexity(const PerplexityOptions& o);

struct EvalOptions {
  std::string model;               // a folder or GGUF file in-process; with --url the served model's name
  std::optional<std::string> tokenizer;  // --tokenizer DIR (as serve's)
  std::string device = "auto";     // cpu | cuda | auto (cuda when a GPU is present)
  std::optional<std::string> quantization;  // --quantization: none | fp8 (quantize a 16-bit checkpoint at load)
  int tensor_parallel_size = 1;             // -tp N: ranks (docs/tensor-parallel.md)
  std::vector<std::string> tasks;  // task names in tasks_dir or .jsonl paths; none: all there
  std::string tasks_dir;           // default: eval/tasks of the checkout
  std::optional<size_t> limit;     // the first N items of each task (windows for perplexity)
  std::optional<std::string> json;
  std::string scorer = "engine";            // engine (batched) | reference (teacher-forced)
  std::string batch = "auto";               // as serve's
  std::string max_batched_tokens = "auto";  // as serve's
  std::string kv_cache_dtype = "auto";      // as serve's
  std::optional<std::string> url;      // an OpenAI-compatible server instead of a folder
  std::optional<std::string> api_key;  // its bearer token
  int concurrency = 8;                 // requests in flight to --url
};
int run_eval(const EvalOptions& o);

// tokenize / detokenize / chat-template share their options.
struct TextToolOptions {
  std::optional<std::string> model, tokenizer, template_file;
  std::optional<std::string> text, file, ids, context, now;
  bool add_special = false;
  bool skip_special = false;
};
int run_tokenize(const TextToolOptions& o);
int run_detokenize(const TextToolOptions& o);
int run_chat_template(const TextToolOptions& o);

struct RandomModelOptions {
  std::optional<std::string> like;
  std::optional<std::string> config;
  std::string out;
  std::string dtype = "bf16";
  uint64_t seed = 1;
  std::optional<std::string> gguf;  // --gguf TYPE: one GGUF file of that type at `out`
};
int run_random_model(const RandomModelOptions& o);
// Names accepted by --like.
std::string random_model_presets();

// `tandem random-lora`: a PEFT adapter folder of random rank-`rank` adapters on every
// attention and MLP projection of the Llama-style model folder `model` (benchmarks).
struct RandomLoraOptions {
  std::string model;
  std::string out;
  int rank = 16;
  uint64_t seed = 1;
};
int run_random_lora(const RandomLoraOptions& o);

// `tandem quantize`: a 16-bit model folder rewritten as a compressed-tensors FP8_DYNAMIC
// checkpoint (per-channel e4m3 weights, dynamic per-token activations), or with --gguf TYPE
// as one GGUF file of that llama.cpp type (Q4_K_M, ...: cli/gguf_export.h).
struct QuantizeOptions {
  std::string model;
  std::string out;
  std::optional<std::string> gguf;
};
int run_quantize(const QuantizeOptions& o);
int run_quantize_gguf(const QuantizeOptions& o);
// The quantization_config llm-compressor writes for FP8_DYNAMIC, with `ignore` (the linears
// left 16-bit).
nlohmann::json fp8_dynamic_quantization_config(const std::vector<std::string>& ignore);

}  // namespace tandem::cli
