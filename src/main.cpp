// tandem: an LLM inference server. This file only parses flags (CLI11); each
// subcommand lives in src/cli/.
#include <CLI/CLI.hpp>

#include "cli/bench/bench_options.h"
#include "cli/commands.h"
#include "cli/env_switches.h"
#include "cli/limit_flags.h"

using namespace tandem::cli;

int main(int argc, char** argv) {
  CLI::App app{"tandem: serve many LLM requests at once (continuous batching, paged KV cache)"};
  app.require_subcommand(1);

  ServeOptions so;
  auto* serve = app.add_subcommand("serve", "Serve the OpenAI and Anthropic HTTP APIs");
  serve->add_option("--model", so.model, "Hugging Face model folder (default: the embedded tiny-kjv)");
  serve->add_option("--device", so.device, "cpu, cuda, or auto: cuda when a GPU is present")->capture_default_str();
  serve->add_option("--quantization", so.quantization, "Quantize a 16-bit checkpoint at load: none or fp8 (e4m3 per-channel weights, dynamic per-token activations)");
  serve->add_option("--host", so.host, "Address to listen on")->capture_default_str();
  serve->add_option("--port", so.port, "Port (0: any free port)")->capture_default_str();
  serve->add_option("--batch,--decode-concurrency", so.batch, "Rows per step: auto (CUDA: as many as the KV cache holds at 2048 tokens each, up to 1024; CPU: 16) or a number (1 = the serial path)")->capture_default_str();
  serve->add_option("--max-batched-tokens", so.max_batched_tokens, "Token budget of one step, long prompts are chunked: auto (CUDA: 8192; CPU: 512) or a number")->capture_default_str();
  serve->add_option("--prompt-concurrency", so.prompt_concurrency, "Rows that may prefill in one step")->capture_default_str();
  serve->add_option("--max-model-len", so.max_model_len, "Context length (default: the model's)");
  serve->add_option("--kv-budget", so.kv_budget, "KV cache size, e.g. 4GB (default: batch x context, at most 1/4 of free RAM)");
  serve->add_option("--kv-cache-dtype", so.kv_cache_dtype, "KV cache element type: auto (the activation dtype), fp8 or fp8_e4m3 (unscaled e4m3, half of bf16)")->capture_default_str();
  serve->add_option("--lora-modules", so.lora_modules, "LoRA adapters to serve, name=DIR each (a request's \"model\": name selects one)");
  serve->add_option("--max-loras", so.max_loras, "Adapter slots (default: the number of --lora-modules; 4 at least with --enable-lora-runtime-updates)");
  serve->add_option("--max-lora-rank", so.max_lora_rank, "Largest adapter rank a slot holds (default: the largest of --lora-modules; 16 at least with --enable-lora-runtime-updates)");
  serve->add_flag("--enable-lora-runtime-updates", so.enable_lora_runtime_updates, "POST /v1/load_lora_adapter and /v1/unload_lora_adapter load and unload adapters while serving");
  serve->add_option("--api-key", so.api_key, "Require this key (Authorization: Bearer KEY or x-api-key)");
  serve->add_option("--served-model-name", so.served_model_name, "Model name in the API (default: the folder name)");
  serve->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", so.enable_prefix_caching,
                  "Reuse the KV blocks of cached prompt prefixes (default: on)");
  serve->add_flag("--log-requests", so.log_requests, "One line per request on stderr");
  add_limit_flags(*serve, so.limits, so.allowed_hosts);
  serve->add_flag("--no-web-ui", so.no_web_ui, "Serve no web pages (the chat at / and /dashboard)");

  LogitsOptions lo;
  auto* logits = app.add_subcommand("logits", "Teacher-forced logits of a token-id sequence, as .npy");
  logits->add_option("--model", lo.model, "Hugging Face model folder")->required();
  logits->add_option("--device", lo.device, "cpu, cuda, or auto")->capture_default_str();
  logits->add_option("--quantization", lo.quantization, "Quantize a 16-bit checkpoint at load: none or fp8 (e4m3 per-channel weights, dynamic per-token activations)");
  logits->add_option("--ids", lo.ids, "Token ids, comma-separated (e.g. 1,2,3)")->required();
  logits->add_option("--out", lo.out, "Output .npy file: float32 [len(ids), vocab]")->required();
  logits->add_option("--lora", lo.lora, "A PEFT LoRA adapter folder to apply");

  GenerateOptions go;
  auto* gen = app.add_subcommand("generate", "Generate text for one prompt (the serial path)");
  gen->add_option("--model", go.model, "Hugging Face model folder (default: the embedded tiny-kjv)");
  gen->add_option("--device", go.device, "cpu, cuda, or auto")->capture_default_str();
  gen->add_option("--quantization", go.quantization, "Quantize a 16-bit checkpoint at load: none or fp8 (e4m3 per-channel weights, dynamic per-token activations)");
  gen->add_option("--prompt", go.prompt, "Prompt text (tokenized with the model's tokenizer)");
  gen->add_option("--ids", go.ids, "Prompt token ids, comma-separated");
  gen->add_option("--max-tokens", go.max_tokens, "Tokens to generate at most")->capture_default_str();
  gen->add_option("--temperature", go.temperature, "0 = greedy")->capture_default_str();
  gen->add_option("--top-k", go.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  gen->add_option("--top-p", go.top_p, "Nucleus sampling mass (1 = off)")->capture_default_str();
  gen->add_option("--min-p", go.min_p, "Drop tokens below min_p x the best probability")->capture_default_str();
  gen->add_option("--seed", go.seed, "Sampling seed (same seed, same tokens)");
  gen->add_flag("--ignore-eos", go.ignore_eos, "Keep generating past end-of-sequence tokens");
  gen->add_option("--kv-cache-dtype", go.kv_cache_dtype, "KV cache element type: auto, fp8 or fp8_e4m3")->capture_default_str();
  gen->add_option("--lora", go.lora, "A PEFT LoRA adapter folder to apply");
  gen->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", go.enable_prefix_caching,
                "Reuse the KV blocks of cached prompt prefixes (default: on)");
  gen->add_flag("--json", go.json, "Print {\"ids\": [...], \"text\": \"...\"} at the end instead of streaming");

  PerplexityOptions po;
  auto* ppl = app.add_subcommand("perplexity", "Mean negative log-likelihood and perplexity over a text file");
  ppl->add_option("--model", po.model, "Hugging Face model folder")->required();
  ppl->add_option("--device", po.device, "cpu, cuda, or auto")->capture_default_str();
  ppl->add_option("--quantization", po.quantization, "Quantize a 16-bit checkpoint at load: none or fp8 (e4m3 per-channel weights, dynamic per-token activations)");
  ppl->add_option("--file", po.file, "UTF-8 text, tokenized as one stream without special tokens")->required();
  ppl->add_option("--context", po.context, "Window length (default: max_position_embeddings)");

  EvalOptions eo;
  auto* ev = app.add_subcommand("eval", "Score a model on evaluation tasks: multiple choice, exact-match generation, perplexity");
  ev->add_option("--model", eo.model, "Hugging Face model folder (default: the embedded tiny-kjv)");
  ev->add_option("--device", eo.device, "cpu, cuda, or auto")->capture_default_str();
  ev->add_option("--quantization", eo.quantization, "Quantize a 16-bit checkpoint at load: none or fp8 (e4m3 per-channel weights, dynamic per-token activations)");
  ev->add_option("--tasks", eo.tasks, "Task names in --tasks-dir or .jsonl files, comma-separated (default: every task there)")->delimiter(',');
  ev->add_option("--tasks-dir", eo.tasks_dir, "Folder of task files (default: eval/tasks of the checkout)");
  ev->add_option("--limit", eo.limit, "Score only the first N items of each task (windows for perplexity)");
  ev->add_option("--json", eo.json, "Write the metrics and every item's raw scores to FILE");
  ev->add_option("--scorer", eo.scorer, "engine (batched through the serving engine) or reference (teacher-forced, one sequence at a time)")->capture_default_str();
  ev->add_option("--batch", eo.batch, "Rows per engine step, as serve's: auto or a number")->capture_default_str();
  ev->add_option("--max-batched-tokens", eo.max_batched_tokens, "Token budget of one engine step, as serve's: auto or a number")->capture_default_str();
  ev->add_option("--kv-cache-dtype", eo.kv_cache_dtype, "KV cache element type, as serve's: auto, fp8 or fp8_e4m3")->capture_default_str();
  ev->add_option("--url", eo.url, "Score an OpenAI-compatible server (http://host:port) through /v1/completions instead of a model folder; --model then names the served model");
  ev->add_option("--api-key", eo.api_key, "Bearer token for --url");
  ev->add_option("--concurrency", eo.concurrency, "Requests in flight to --url")->capture_default_str();

  TextToolOptions to;
  auto tokenizer_source = [&](CLI::App* cmd) {
    cmd->add_option("--model", to.model, "Model folder (its tokenizer.json is used)");
    cmd->add_option("--tokenizer", to.tokenizer, "Folder holding tokenizer.json (+ tokenizer_config.json)");
  };
  auto* tok = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON array");
  tokenizer_source(tok);
  tok->add_option("--text", to.text, "Text to tokenize");
  tok->add_option("--file", to.file, "File whose contents to tokenize");
  tok->add_flag("--add-special", to.add_special, "Apply the post-processor (BOS etc.), as HF's add_special_tokens=True");
  auto* detok = app.add_subcommand("detokenize", "Print the text of token ids, as HF's decode");
  tokenizer_source(detok);
  detok->add_option("--ids", to.ids, "Token ids, comma-separated")->required();
  detok->add_flag("--skip-special", to.skip_special, "Leave special tokens out");
  auto* chat = app.add_subcommand("chat-template", "Render a chat template with variables from a JSON file");
  tokenizer_source(chat);
  chat->add_option("--template", to.template_file, "A .jinja template file");
  chat->add_option("--context", to.context, "JSON object: messages, tools, add_generation_prompt, ...")->required();
  chat->add_option("--now", to.now, "What strftime_now formats, e.g. 2026-11-29T12:00:00");

  RandomModelOptions ro;
  auto* rnd = app.add_subcommand("random-model", "Write a model folder with random weights of a real shape");
  rnd->add_option("--like", ro.like, "Preset shape: " + random_model_presets());
  rnd->add_option("--config", ro.config, "A config.json to take the shape from");
  rnd->add_option("--out", ro.out, "Output folder")->required();
  rnd->add_option("--dtype", ro.dtype, "bf16, f32, or fp8 (a compressed-tensors FP8_DYNAMIC checkpoint: e4m3 projections, bf16 rest)")->capture_default_str();
  rnd->add_option("--seed", ro.seed, "Random seed")->capture_default_str();

  RandomLoraOptions lro;
  auto* rlora = app.add_subcommand("random-lora", "Write a PEFT LoRA adapter with random weights on every projection of a model folder");
  rlora->add_option("--model", lro.model, "The Llama-style model folder the adapter is for")->required();
  rlora->add_option("--out", lro.out, "Output folder (adapter_config.json + adapter_model.safetensors)")->required();
  rlora->add_option("--rank", lro.rank, "LoRA rank r (lora_alpha = 2r)")->capture_default_str();
  rlora->add_option("--seed", lro.seed, "Random seed")->capture_default_str();

  QuantizeOptions qo;
  auto* quant = app.add_subcommand("quantize", "Rewrite a 16-bit model folder as a compressed-tensors FP8 checkpoint (per-channel e4m3 weights, dynamic per-token activations)");
  quant->add_option("--model", qo.model, "Hugging Face model folder (16-bit)")->required();
  quant->add_option("--out", qo.out, "Output folder")->required();

  BenchOptions bo;
  auto* bench = app.add_subcommand("bench", "Load-test an OpenAI-compatible server: throughput, TTFT, TPOT, ITL per concurrency");
  bench->add_option("--url", bo.url, "Server root (a trailing /v1 is fine)")->capture_default_str();
  bench->add_option("--model", bo.model, "Model name to request (default: the first id of GET /v1/models)");
  bench->add_option("--concurrency", bo.concurrency, "Requests in flight; a list sweeps, e.g. 1,2,4,8,16")->delimiter(',')->capture_default_str();
  bench->add_option("--num-requests", bo.num_requests, "Requests per concurrency (default: max(4 x concurrency, 16))");
  bench->add_option("--input-len", bo.input_len, "Prompt length in tokens (random token ids)")->capture_default_str();
  bench->add_option("--output-len", bo.output_len, "Tokens to generate per request (min_tokens + ignore_eos)")->capture_default_str();
  bench->add_option("--request-rate", bo.request_rate, "Poisson arrivals per second, at most --concurrency in flight (default: closed loop)");
  bench->add_option("--shared-prefix-len", bo.shared_prefix_len, "Tokens every prompt starts with (the same for all: a prefix cache can reuse them)")->capture_default_str();
  bench->add_option("--multi-turn", bo.multi_turn, "Turns per conversation: each resends its history plus --input-len new tokens (--num-requests counts conversations; TTFT per turn)")->capture_default_str();
  bench->add_option("--temperature", bo.temperature, "Sampling temperature")->capture_default_str();
  bench->add_option("--token-min", bo.token_min, "Prompt ids are uniform in [token-min, token-max)")->capture_default_str();
  bench->add_option("--token-max", bo.token_max, "Upper end (exclusive) of prompt ids")->capture_default_str();
  bench->add_option("--vocab", bo.vocab, "The model's vocabulary size: caps --token-max");
  bench->add_option("--seed", bo.seed, "Seed of the prompts and arrival times")->capture_default_str();
  bench->add_option("--api-key", bo.api_key, "Sent as Authorization: Bearer KEY");
  bench->add_option("--timeout", bo.timeout_s, "Read timeout of one request, seconds")->capture_default_str();
  bench->add_option("--models", bo.models, "Spread the requests evenly over these model names (e.g. LoRA adapters), comma-separated")->delimiter(',');
  bench->add_option("--json-schema", bo.json_schema_path, "Constrained requests carry this JSON Schema (response_format json_schema)");
  bench->add_option("--constrained-fraction", bo.constrained_fraction, "Fraction of the requests constrained by --json-schema (spread evenly)")->capture_default_str();
  bench->add_option("--json", bo.json_path, "Write the raw per-request numbers and summaries to FILE");
  bench->add_option("--plot", bo.plot_path, "Draw throughput and TTFT against concurrency to FILE.svg");

  // The CPU backend's thread pool, on every command that runs a model.
  int threads = 0;
  for (CLI::App* cmd : {serve, logits, gen, ppl, ev})
    cmd->add_option("--threads", threads, "Threads of the CPU backend's ops (default: the physical cores)")
        ->check(CLI::PositiveNumber);

  CLI11_PARSE(app, argc, argv);
  if (!apply_process_switches(threads)) return 1;  // TANDEM_THREADS, TANDEM_CPU_ISA, --threads
  if (so.model.empty()) so.model = default_model_dir();
  if (go.model.empty()) go.model = default_model_dir();
  if (eo.model.empty() && !eo.url) eo.model = default_model_dir();
  if (*serve) return run_serve(so);
  if (*logits) return run_logits(lo);
  if (*gen) return run_generate(go);
  if (*ppl) return run_perplexity(po);
  if (*ev) return run_eval(eo);
  if (*rnd) return run_random_model(ro);
  if (*rlora) return run_random_lora(lro);
  if (*quant) return run_quantize(qo);
  if (*bench) return run_bench(bo);
  if (*tok) return run_tokenize(to);
  if (*detok) return run_detokenize(to);
  if (*chat) return run_chat_template(to);
  return 1;
}
