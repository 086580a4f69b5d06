// tandem: an LLM inference server. This file only parses flags (CLI11); each
// subcommand lives in src/cli/.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

using namespace tandem::cli;

int main(int argc, char** argv) {
  CLI::App app{"tandem: serve many LLM requests at once (continuous batching, paged KV cache)"};
  app.require_subcommand(1);

  LogitsOptions lo;
  auto* logits = app.add_subcommand("logits", "Teacher-forced logits of a token-id sequence, as .npy");
  logits->add_option("--model", lo.model, "Hugging Face model folder")->required();
  logits->add_option("--ids", lo.ids, "Token ids, comma-separated (e.g. 1,2,3)")->required();
  logits->add_option("--out", lo.out, "Output .npy file: float32 [len(ids), vocab]")->required();

  GenerateOptions go;
  auto* gen = app.add_subcommand("generate", "Generate text for one prompt (the serial path)");
  gen->add_option("--model", go.model, "Hugging Face model folder")->required();
  gen->add_option("--prompt", go.prompt, "Prompt text (tokenized with the model's tokenizer)");
  gen->add_option("--ids", go.ids, "Prompt token ids, comma-separated");
  gen->add_option("--max-tokens", go.max_tokens, "Tokens to generate at most")->capture_default_str();
  gen->add_option("--temperature", go.temperature, "0 = greedy")->capture_default_str();
  gen->add_option("--top-k", go.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  gen->add_option("--top-p", go.top_p, "Nucleus sampling mass (1 = off)")->capture_default_str();
  gen->add_option("--min-p", go.min_p, "Drop tokens below min_p x the best probability")->capture_default_str();
  gen->add_option("--seed", go.seed, "Sampling seed (same seed, same tokens)");
  gen->add_flag("--ignore-eos", go.ignore_eos, "Keep generating past end-of-sequence tokens");
  gen->add_flag("--json", go.json, "Print {\"ids\": [...], \"text\": \"...\"} at the end instead of streaming");

  PerplexityOptions po;
  auto* ppl = app.add_subcommand("perplexity", "Mean negative log-likelihood and perplexity over a text file");
  ppl->add_option("--model", po.model, "Hugging Face model folder")->required();
  ppl->add_option("--file", po.file, "UTF-8 text, tokenized as one stream without special tokens")->required();
  ppl->add_option("--context", po.context, "Window length (default: max_position_embeddings)");

  RandomModelOptions ro;
  auto* rnd = app.add_subcommand("random-model", "Write a model folder with random weights of a real shape");
  rnd->add_option("--like", ro.like, "Preset shape: " + random_model_presets());
  rnd->add_option("--config", ro.config, "A config.json to take the shape from");
  rnd->add_option("--out", ro.out, "Output folder")->required();
  rnd->add_option("--dtype", ro.dtype, "bf16 or f32")->capture_default_str();
  rnd->add_option("--seed", ro.seed, "Random seed")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  if (*logits) return run_logits(lo);
  if (*gen) return run_generate(go);
  if (*ppl) return run_perplexity(po);
  if (*rnd) return run_random_model(ro);
  return 1;
}
