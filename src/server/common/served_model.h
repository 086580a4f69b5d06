// What the HTTP layer needs from a loaded model besides the engine: the tokenizer (text
// prompts, logprob token texts, echo), the chat template, the model's sampling defaults
// (generation_config.json, as vLLM applies them) and static facts for /stats.
#pragma once

#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "engine/engine_api.h"
#include "server/common/chat_prompt.h"
#include "server/common/json_text.h"
#include "server/common/prompt_bound.h"
#include "server/common/reasoning_setup.h"
#include "server/common/served_images.h"
#include "server/common/server_limits.h"
#include "server/common/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

struct ServedModel {
  EngineApi* engine = nullptr;                    // not owned; valid until HttpServer::stop()
  std::shared_ptr<const Tokenizer> tokenizer;     // required
  std::shared_ptr<const ChatPromptBuilder> chat;  // null: no chat template (chat routes 400)
  GenerationRequest defaults;                     // sampling defaults every request starts from
  PromptBound prompt_bound;                       // tokens a prompt of n bytes is at least
  Json card = Json::object();                     // merged into /stats (batch, dtype, kv budget…)
  // Structured output: grammars compiled for this model's vocabulary, shared by all
  // requests (so one schema is compiled once), and how its template writes tool calls.
  std::shared_ptr<grammar::GrammarCache> grammars;
  ToolCallFormat tool_format = ToolCallFormat::Hermes;
  // How /v1/embeddings pools (--pooling, or the folder's sentence-transformers files:
  // common/pooling_config.h).
  Pooling pooling = Pooling::Last;
  // Image input: whether the model takes images and the folder's image processor.
  ServedImages images;
  // How the model thinks (--reasoning-parser); nullopt: no parser, all output is content.
  std::optional<ServedReasoning> reasoning;
};

// What `tandem serve` decides about a model beyond its folder.
struct ServedModelOptions {
  std::string reasoning_parser = "auto";  // --reasoning-parser (reasoning_setup.h)
  GrammarCompileLimits grammar;           // --max-grammar-bytes, --max-grammar-insts
};

// Reads the tokenizer (unless given), tokenizer_config.json's chat template,
// generation_config.json's sampling defaults and the image processor (served_images.h) from a
// Hugging Face model folder, and sets up its reasoning parser. Throws tandem::Error (or jinja::TemplateError) naming the file for
// anything malformed, or the flag for an unknown parser.
ServedModel load_served_model(const std::filesystem::path& dir, EngineApi& engine,
                              std::shared_ptr<const Tokenizer> tokenizer = nullptr,
                              const ServedModelOptions& options = {});

// Which `model` names a request may ask for: the served name and the LoRA adapters the
// engine serves (EngineApi::lora_adapters; select_model() then picks the adapter). The one place that decides; anything else is a 404
// model_not_found, as OpenAI answers.
bool accepts_model_name(const ServedModel& model, const std::string& served_name,
                        std::string_view requested);

// generation_config.json's temperature, top_p, top_k, min_p and repetition_penalty
// (missing file or fields: SamplingParams' defaults).
SamplingParams read_generation_defaults(const std::filesystem::path& dir);

}  // namespace tandem::server
