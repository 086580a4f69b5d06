#include "cli/command_flags.h"

#include "cli/limit_flags.h"

namespace tandem::cli {
namespace {

constexpr const char* kDefaultModelHelp =
    "Hugging Face model folder or GGUF file (default: the embedded tiny-kjv)";

// --model and --tokenizer of the text tools: where tokenizer.json is read from.
void add_tokenizer_source(CLI::App& cmd, TextToolOptions& o) {
  cmd.add_option("--model", o.model, "Model folder (its tokenizer.json is used) or GGUF file");
  cmd.add_option("--tokenizer", o.tokenizer,
                 "Folder holding tokenizer.json (+ tokenizer_config.json)");
}

void add_serve_engine_flags(CLI::App& cmd, ServeOptions& o) {
  cmd.add_option("--batch,--decode-concurrency", o.batch,
                 "Rows per step: auto (CUDA: as many as the KV cache holds at 2048 tokens each, "
                 "up to 1024; CPU: 16) or a number (1 = the serial path)")
      ->capture_default_str();
  cmd.add_option("--max-batched-tokens", o.max_batched_tokens,
                 "Token budget of one step, long prompts are chunked: auto (CUDA: 8192; CPU: "
                 "512) or a number")
      ->capture_default_str();
  cmd.add_option("--prompt-concurrency", o.prompt_concurrency, "Rows that may prefill in one step")
      ->capture_default_str();
  cmd.add_option("--max-model-len", o.max_model_len, "Context length (default: the model's)");
  cmd.add_option("--kv-budget", o.kv_budget,
                 "KV cache size, e.g. 4GB (default: batch x context, at most 1/4 of free RAM)");
  add_kv_cache_dtype_flag(cmd, o.kv_cache_dtype);
}

void add_serve_lora_flags(CLI::App& cmd, ServeOptions& o) {
  cmd.add_option("--lora-modules", o.lora_modules,
                 "LoRA adapters to serve, name=DIR each (a request's \"model\": name selects one)");
  cmd.add_option("--max-loras", o.max_loras,
                 "Adapter slots (default: the number of --lora-modules; 4 at least with "
                 "--enable-lora-runtime-updates)");
  cmd.add_option("--max-lora-rank", o.max_lora_rank,
                 "Largest adapter rank a slot holds (default: the largest of --lora-modules; 16 "
                 "at least with --enable-lora-runtime-updates)");
  cmd.add_flag("--enable-lora-runtime-updates", o.enable_lora_runtime_updates,
               "POST /v1/load_lora_adapter and /v1/unload_lora_adapter load and unload adapters "
               "while serving");
}

void add_generate_sampling_flags(CLI::App& cmd, GenerateOptions& o) {
  cmd.add_option("--max-tokens", o.max_tokens, "Tokens to generate at most")->capture_default_str();
  cmd.add_option("--temperature", o.temperature, "0 = greedy")->capture_default_str();
  cmd.add_option("--top-k", o.top_k, "Keep the k most likely tokens (0 = off)")
      ->capture_default_str();
  cmd.add_option("--top-p", o.top_p, "Nucleus sampling mass (1 = off)")->capture_default_str();
  cmd.add_option("--min-p", o.min_p, "Drop tokens below min_p x the best probability")
      ->capture_default_str();
  cmd.add_option("--seed", o.seed, "Sampling seed (same seed, same tokens)");
  cmd.add_flag("--ignore-eos", o.ignore_eos, "Keep generating past end-of-sequence tokens");
}

// The requests bench sends: their lengths, arrivals, prompts and sampling.
void add_bench_load_flags(CLI::App& cmd, BenchOptions& o) {
  cmd.add_option("--input-len", o.input_len, "Prompt length in tokens (random token ids)")
      ->capture_default_str();
  cmd.add_option("--output-len", o.output_len,
                 "Tokens to generate per request (min_tokens + ignore_eos)")
      ->capture_default_str();
  cmd.add_option("--request-rate", o.request_rate,
                 "Poisson arrivals per second, at most --concurrency in flight (default: closed "
                 "loop)");
  cmd.add_option("--shared-prefix-len", o.shared_prefix_len,
                 "Tokens every prompt starts with (the same for all: a prefix cache can reuse "
                 "them)")
      ->capture_default_str();
  cmd.add_option("--multi-turn", o.multi_turn,
                 "Turns per conversation: each resends its history plus --input-len new tokens "
                 "(--num-requests counts conversations; TTFT per turn)")
      ->capture_default_str();
  cmd.add_option("--temperature", o.temperature, "Sampling temperature")->capture_default_str();
  cmd.add_option("--token-min", o.token_min, "Prompt ids are uniform in [token-min, token-max)")
      ->capture_default_str();
  cmd.add_option("--token-max", o.token_max, "Upper end (exclusive) of prompt ids")
      ->capture_default_str();
  cmd.add_option("--vocab", o.vocab, "The model's vocabulary size: caps --token-max");
  cmd.add_option("--seed", o.seed, "Seed of the prompts and arrival times")->capture_default_str();
}

}  // namespace

void add_kv_cache_dtype_flag(CLI::App& cmd, std::string& dtype) {
  cmd.add_option("--kv-cache-dtype", dtype,
                 "KV cache element type: auto (the activation dtype), fp8 or fp8_e4m3 "
                 "(unscaled e4m3, half of bf16)")
      ->capture_default_str();
}

void add_lora_flag(CLI::App& cmd, std::optional<std::string>& lora) {
  cmd.add_option("--lora", lora, "A PEFT LoRA adapter folder to apply");
}

void add_prefix_caching_flag(CLI::App& cmd, bool& enabled) {
  cmd.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", enabled,
               "Reuse the KV blocks of cached prompt prefixes (default: on)");
}

void add_tokenizer_flag(CLI::App& cmd, std::optional<std::string>& tokenizer) {
  cmd.add_option("--tokenizer", tokenizer,
                 "Folder whose tokenizer.json (and tokenizer_config.json) replace the model's own "
                 "(a GGUF file carries one)");
}

void add_speculative_flag(CLI::App& cmd, std::optional<std::string>& json) {
  cmd.add_option(
      "--speculative-config", json,
      "Speculative decoding, as JSON: {\"method\": \"ngram\", \"num_speculative_tokens\": "
      "4, \"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2} or {\"model\": DIR, "
      "\"num_speculative_tokens\": 4} (a draft model sharing the tokenizer); "
      "docs/speculative-decoding.md");
}

std::vector<std::string> cli_args(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; i--) {
    std::string a = argv[i];
    if (a == "-tp")
      a = "--tensor-parallel-size";
    else if (a.starts_with("-tp="))
      a = "--tensor-parallel-size=" + a.substr(4);
    args.push_back(std::move(a));
  }
  return args;
}

void add_threads_flag(CLI::App& cmd, int& threads) {
  cmd.add_option("--threads", threads,
                 "Threads of the CPU backend's ops (default: the physical cores)")
      ->check(CLI::PositiveNumber);
}

CLI::App* add_serve_command(CLI::App& app, CommandLine& line) {
  ServeOptions& o = line.serve;
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI and Anthropic HTTP APIs");
  add_model_flags(*cmd, o, {kDefaultModelHelp});
  add_tokenizer_flag(*cmd, o.tokenizer);
  cmd->add_option("--host", o.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o.port, "Port (0: any free port)")->capture_default_str();
  add_serve_engine_flags(*cmd, o);
  add_serve_lora_flags(*cmd, o);
  cmd->add_option("--api-key", o.api_key,
                  "Require this key (Authorization: Bearer KEY or x-api-key)");
  cmd->add_option("--served-model-name", o.served_model_name,
                  "Model name in the API (default: the folder name)");
  cmd->add_option("--reasoning-parser", o.reasoning_parser,
                  "Split the thinking from the answer (docs/reasoning.md): qwen3, deepseek_r1, "
                  "glm45, gemma4, auto (the one the chat template names, none if unclear) or none")
      ->capture_default_str();
  add_prefix_caching_flag(*cmd, o.enable_prefix_caching);
  cmd->add_option("--task", o.task,
                  "auto (generation and /v1/embeddings), generate, or embed (/v1/embeddings "
                  "only: the generation routes answer 404)")
      ->check(CLI::IsMember({"auto", "generate", "embed"}))
      ->capture_default_str();
  cmd->add_option("--pooling", o.pooling,
                  "How /v1/embeddings pools the final hidden states: auto (the folder's "
                  "sentence-transformers 1_Pooling config, else last), last, mean or cls")
      ->check(CLI::IsMember({"auto", "last", "mean", "cls"}))
      ->capture_default_str();
  add_speculative_flag(*cmd, o.speculative_config);
  cmd->add_flag("--log-requests", o.log_requests, "One line per request on stderr");
  add_limit_flags(*cmd, o.limits, o.allowed_hosts);
  cmd->add_flag("--no-web-ui", o.no_web_ui, "Serve no web pages (the chat at / and /dashboard)");
  add_threads_flag(*cmd, line.threads);
  return cmd;
}

CLI::App* add_logits_command(CLI::App& app, CommandLine& line) {
  LogitsOptions& o = line.logits;
  CLI::App* cmd =
      app.add_subcommand("logits", "Teacher-forced logits of a token-id sequence, as .npy");
  add_model_flags(*cmd, o, {"Hugging Face model folder or GGUF file", /*required=*/true});
  cmd->add_option("--ids", o.ids, "Token ids, comma-separated (e.g. 1,2,3)")->required();
  cmd->add_option("--out", o.out, "Output .npy file: float32 [len(ids), vocab]")->required();
  cmd->add_option("--pixel-values", o.pixel_values,
                  "The ids' images, preprocessed: pixel_values.J (and image_position_ids.J) per "
                  "image, in order (safetensors)");
  add_lora_flag(*cmd, o.lora);
  add_threads_flag(*cmd, line.threads);
  return cmd;
}

CLI::App* add_generate_command(CLI::App& app, CommandLine& line) {
  GenerateOptions& o = line.generate;
  CLI::App* cmd = app.add_subcommand("generate", "Generate text for one prompt (the serial path)");
  add_model_flags(*cmd, o, {kDefaultModelHelp});
  add_tokenizer_flag(*cmd, o.tokenizer);
  cmd->add_option("--prompt", o.prompt, "Prompt text (tokenized with the model's tokenizer)");
  cmd->add_option("--ids", o.ids, "Prompt token ids, comma-separated");
  cmd->add_option("--pixel-values", o.pixel_values,
                  "With --ids: their images, preprocessed (as for logits)");
  cmd->add_option("--image", o.images,
                  "An image file (PNG, JPEG, WebP, GIF; repeatable). With --prompt: one user "
                  "message of the images, then the text, through the chat template; with --ids: "
                  "the images of the ids' image-token runs, in order");
  add_generate_sampling_flags(*cmd, o);
  add_kv_cache_dtype_flag(*cmd, o.kv_cache_dtype);
  add_lora_flag(*cmd, o.lora);
  add_prefix_caching_flag(*cmd, o.enable_prefix_caching);
  add_speculative_flag(*cmd, o.speculative_config);
  cmd->add_flag("--json", o.json,
                "Print {\"ids\": [...], \"text\": \"...\"} at the end instead of streaming");
  cmd->add_flag("--timing", o.timing,
                "Print the generated tokens, seconds and tok/s on stderr (what speculation did is "
                "printed there whenever it is on)");
  add_threads_flag(*cmd, line.threads);
  return cmd;
}

CLI::App* add_perplexity_command(CLI::App& app, CommandLine& line) {
  PerplexityOptions& o = line.perplexity;
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Mean negative log-likelihood and perplexity over a text file");
  add_model_flags(*cmd, o, {"Hugging Face model folder or GGUF file", /*required=*/true});
  add_tokenizer_flag(*cmd, o.tokenizer);
  cmd->add_option("--file", o.file, "UTF-8 text, tokenized as one stream without special tokens")
      ->required();
  cmd->add_option("--context", o.context, "Window length (default: max_position_embeddings)");
  add_threads_flag(*cmd, line.threads);
  return cmd;
}

CLI::App* add_eval_command(CLI::App& app, CommandLine& line) {
  EvalOptions& o = line.eval;
  CLI::App* cmd = app.add_subcommand("eval",
                                     "Score a model on evaluation tasks: multiple choice, "
                                     "exact-match generation, perplexity");
  add_model_flags(*cmd, o, {kDefaultModelHelp});
  add_tokenizer_flag(*cmd, o.tokenizer);
  cmd->add_option("--tasks", o.tasks,
                  "Task names in --tasks-dir or .jsonl files, comma-separated (default: every "
                  "task there)")
      ->delimiter(',');
  cmd->add_option("--tasks-dir", o.tasks_dir,
                  "Folder of task files (default: eval/tasks of the checkout)");
  cmd->add_option("--limit", o.limit,
                  "Score only the first N items of each task (windows for perplexity)");
  cmd->add_option("--json", o.json, "Write the metrics and every item's raw scores to FILE");
  cmd->add_option("--scorer", o.scorer,
                  "engine (batched through the serving engine) or reference (teacher-forced, "
                  "one sequence at a time)")
      ->capture_default_str();
  cmd->add_option("--batch", o.batch, "Rows per engine step, as serve's: auto or a number")
      ->capture_default_str();
  cmd->add_option("--max-batched-tokens", o.max_batched_tokens,
                  "Token budget of one engine step, as serve's: auto or a number")
      ->capture_default_str();
  add_kv_cache_dtype_flag(*cmd, o.kv_cache_dtype);
  cmd->add_option("--url", o.url,
                  "Score an OpenAI-compatible server (http://host:port) through /v1/completions "
                  "instead of a model folder; --model then names the served model");
  cmd->add_option("--api-key", o.api_key, "Bearer token for --url");
  cmd->add_option("--concurrency", o.concurrency, "Requests in flight to --url")
      ->capture_default_str();
  add_threads_flag(*cmd, line.threads);
  return cmd;
}

CLI::App* add_tokenize_command(CLI::App& app, CommandLine& line) {
  TextToolOptions& o = line.text_tools;
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON array");
  add_tokenizer_source(*cmd, o);
  cmd->add_option("--text", o.text, "Text to tokenize");
  cmd->add_option("--file", o.file, "File whose contents to tokenize");
  cmd->add_flag("--add-special", o.add_special,
                "Apply the post-processor (BOS etc.), as HF's add_special_tokens=True");
  return cmd;
}

CLI::App* add_detokenize_command(CLI::App& app, CommandLine& line) {
  TextToolOptions& o = line.text_tools;
  CLI::App* cmd = app.add_subcommand("detokenize", "Print the text of token ids, as HF's decode");
  add_tokenizer_source(*cmd, o);
  cmd->add_option("--ids", o.ids, "Token ids, comma-separated")->required();
  cmd->add_flag("--skip-special", o.skip_special, "Leave special tokens out");
  return cmd;
}

CLI::App* add_chat_template_command(CLI::App& app, CommandLine& line) {
  TextToolOptions& o = line.text_tools;
  CLI::App* cmd =
      app.add_subcommand("chat-template", "Render a chat template with variables from a JSON file");
  add_tokenizer_source(*cmd, o);
  cmd->add_option("--template", o.template_file, "A .jinja template file");
  cmd->add_option("--context", o.context,
                  "JSON object: messages, tools, add_generation_prompt, ...")
      ->required();
  cmd->add_option("--now", o.now, "What strftime_now formats, e.g. 2026-11-29T12:00:00");
  return cmd;
}

CLI::App* add_random_model_command(CLI::App& app, CommandLine& line) {
  RandomModelOptions& o = line.random_model;
  CLI::App* cmd = app.add_subcommand("random-model",
                                     "Write a model folder with random weights of a real shape");
  cmd->add_option("--like", o.like, "Preset shape: " + random_model_presets());
  cmd->add_option("--config", o.config, "A config.json to take the shape from");
  cmd->add_option("--out", o.out, "Output folder")->required();
  cmd->add_option("--dtype", o.dtype,
                  "bf16, f32, or fp8 (a compressed-tensors FP8_DYNAMIC checkpoint: e4m3 "
                  "projections, bf16 rest)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Random seed")->capture_default_str();
  cmd->add_option("--gguf", o.gguf,
                  "Write one GGUF file (--out FILE.gguf) of this llama.cpp type: Q8_0, Q4_0, "
                  "Q4_K_M, Q5_K_M, Q6_K, F16, F32");
  return cmd;
}

CLI::App* add_random_lora_command(CLI::App& app, CommandLine& line) {
  RandomLoraOptions& o = line.random_lora;
  CLI::App* cmd = app.add_subcommand(
      "random-lora",
      "Write a PEFT LoRA adapter with random weights on every projection of a model folder");
  cmd->add_option("--model", o.model, "The Llama-style model folder the adapter is for")
      ->required();
  cmd->add_option("--out", o.out, "Output folder (adapter_config.json + adapter_model.safetensors)")
      ->required();
  cmd->add_option("--rank", o.rank, "LoRA rank r (lora_alpha = 2r)")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Random seed")->capture_default_str();
  return cmd;
}

CLI::App* add_quantize_command(CLI::App& app, CommandLine& line) {
  QuantizeOptions& o = line.quantize;
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Rewrite a 16-bit model folder as a compressed-tensors FP8 checkpoint (per-channel e4m3 "
      "weights, dynamic per-token activations), or with --gguf TYPE as a llama.cpp GGUF file");
  cmd->add_option("--model", o.model, "Hugging Face model folder (16-bit)")->required();
  cmd->add_option("--out", o.out, "Output folder (FILE.gguf with --gguf)")->required();
  cmd->add_option(
      "--gguf", o.gguf,
      "Write one GGUF file of this llama.cpp type: Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K, "
      "F16, F32 (llama, mistral, qwen2, qwen3 folders with a byte-level BPE tokenizer)");
  return cmd;
}

CLI::App* add_bench_command(CLI::App& app, CommandLine& line) {
  BenchOptions& o = line.bench;
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Load-test an OpenAI-compatible server: throughput, TTFT, TPOT, ITL per concurrency");
  cmd->add_option("--url", o.url, "Server root (a trailing /v1 is fine)")->capture_default_str();
  cmd->add_option("--model", o.model,
                  "Model name to request (default: the first id of GET /v1/models)");
  cmd->add_option("--concurrency", o.concurrency,
                  "Requests in flight; a list sweeps, e.g. 1,2,4,8,16")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--num-requests", o.num_requests,
                  "Requests per concurrency (default: max(4 x concurrency, 16))");
  add_bench_load_flags(*cmd, o);
  cmd->add_option("--api-key", o.api_key, "Sent as Authorization: Bearer KEY");
  cmd->add_option("--timeout", o.timeout_s, "Read timeout of one request, seconds")
      ->capture_default_str();
  cmd->add_option("--models", o.models,
                  "Spread the requests evenly over these model names (e.g. LoRA adapters), "
                  "comma-separated")
      ->delimiter(',');
  cmd->add_option("--json-schema", o.json_schema_path,
                  "Constrained requests carry this JSON Schema (response_format json_schema)");
  cmd->add_option("--constrained-fraction", o.constrained_fraction,
                  "Fraction of the requests constrained by --json-schema (spread evenly)")
      ->capture_default_str();
  cmd->add_option("--endpoint", o.endpoint,
                  "completions (streamed generation) or embeddings (/v1/embeddings: inputs/s, "
                  "tokens/s, latency)")
      ->check(CLI::IsMember({"completions", "embeddings"}))
      ->capture_default_str();
  cmd->add_option("--embed-batch", o.embed_batch,
                  "--endpoint embeddings: inputs per request (of --input-len tokens each)")
      ->capture_default_str();
  cmd->add_option("--embed-encoding", o.embed_encoding,
                  "--endpoint embeddings: encoding_format asked for, float or base64")
      ->check(CLI::IsMember({"float", "base64"}))
      ->capture_default_str();
  cmd->add_option("--image", o.image,
                  "Send chat completions carrying synthetic PNG images of this size (e.g. "
                  "896x896), a new one per request; the prompt becomes --input-len words");
  cmd->add_option("--images-per-request", o.images_per_request, "Images per request with --image")
      ->capture_default_str();
  cmd->add_option("--image-fraction", o.image_fraction,
                  "Fraction of the requests that carry images (the rest: the text alone)")
      ->capture_default_str();
  cmd->add_flag("--same-image", o.same_image,
                "Send the same images in every request (caches may hit) instead of new ones");
  cmd->add_option("--json", o.json_path, "Write the raw per-request numbers and summaries to FILE");
  cmd->add_option("--plot", o.plot_path,
                  "Draw throughput and TTFT against concurrency to FILE.svg");
  return cmd;
}

}  // namespace tandem::cli
