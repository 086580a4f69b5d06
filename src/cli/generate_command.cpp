// `tandem generate`: one request through the engine's serial path (--batch 1), text
// streamed to stdout as it is produced; --json prints {"ids", "text"} at the end.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/image_prompt.h"
#include "cli/model_files.h"
#include "cli/pixel_values.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/kv_layout.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

namespace {

// The request's prompt: --prompt text (through the chat template when it has --image) or
// --ids, with the images of --pixel-values or --image.
GenerationRequest prompt_of(const GenerateOptions& o, const LoadedModel& m) {
  if (o.pixel_values && !o.ids)
    fail("--pixel-values needs --ids (the ids with the image tokens expanded)");
  if (o.pixel_values && !o.images.empty()) fail("give --pixel-values or --image, not both");
  if (!o.ids && !m.tokenizer)
    fail("{}: --prompt needs tokenizer.json in the model folder", o.model);
  GenerationRequest req;
  ImageFiles images{o.model, tokenizer_source(o.model, o.tokenizer), m.tokenizer,
                    m.model->vision_spec(), o.images};
  if (o.ids) {
    req.prompt = parse_ids(*o.ids);
    if (o.pixel_values)
      req.media = media_from_pixel_values(*o.pixel_values, req.prompt, m.model->vision_spec());
    if (!o.images.empty()) req.media = image_spans_for_ids(images, req.prompt);
  } else if (!o.images.empty()) {
    ImagePrompt p = chat_image_prompt(images, *o.prompt);
    req.prompt = std::move(p.ids);
    req.media = std::move(p.media);
  } else {
    req.prompt = m.tokenizer->encode(*o.prompt, /*add_special_tokens=*/true);
  }
  return req;
}

}  // namespace

int run_generate(const GenerateOptions& o) {
  try {
    if (o.prompt.has_value() == o.ids.has_value()) fail("give exactly one of --prompt and --ids");
    const std::optional<DType> kv_dtype = kv_cache_dtype_from_name(o.kv_cache_dtype);
    std::optional<SpeculativeConfig> speculative;
    if (o.speculative_config) speculative = parse_speculative_config(*o.speculative_config);
    LoadedModel m = load_model_folder(
        o.model, o.device,
        LoadOptions{.online = online_quantization(o.quantization),
                    .lora = o.lora ? lora_capacity_for({*o.lora}) : LoraCapacity{},
                    .tp = {.size = o.tensor_parallel_size}},
        o.tokenizer);
    GenerationRequest req = prompt_of(o, m);
    req.max_tokens = o.max_tokens;
    req.ignore_eos = o.ignore_eos;
    req.sampling.temperature = o.temperature;
    req.sampling.top_k = o.top_k;
    req.sampling.top_p = o.top_p;
    req.sampling.min_p = o.min_p;
    req.sampling.seed = o.seed;
    EngineConfig config;
    config.max_model_len = int(req.prompt.size()) + o.max_tokens;
    config.enable_prefix_caching = o.enable_prefix_caching;
    config.speculative = speculative;
    if (speculative) load_draft_model(m, *speculative);
    std::unique_ptr<Engine> engine = make_engine(m, config, kv_dtype);
    if (o.lora) req.lora = engine->load_lora("lora", *o.lora).name;
    auto stream = engine->submit(req);
    const auto started = std::chrono::steady_clock::now();
    nlohmann::json ids = nlohmann::json::array();
    std::string text, error;
    for (bool done = false; !done;) {
      engine->step();
      while (auto chunk = stream->pop(std::chrono::milliseconds(0))) {
        for (auto& t : chunk->tokens) ids.push_back(t.token);
        text += chunk->text;
        if (!o.json) fmt::print("{}", chunk->text), std::fflush(stdout);
        if (chunk->finish) {
          done = true;
          if (*chunk->finish == FinishReason::Error) error = chunk->error;
        }
      }
    }
    if (!error.empty()) fail("{}", error);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (o.timing && !speculative)
      fmt::print(stderr, "{} tokens in {:.3f} s ({:.1f} tok/s)\n", ids.size(), s, double(ids.size()) / s);
    if (speculative) {  // what speculation did, on stderr (stdout is the output)
      const SpecDecodeStats st = engine->stats().spec_decode;
      fmt::print(stderr,
                 "speculative {}: {} of {} proposals accepted ({:.1f}%), {} tokens in {:.3f} s "
                 "({:.1f} tok/s); {} speculative steps, {} steps read early\n",
                 st.method, st.num_accepted_tokens, st.num_draft_tokens,
                 st.num_draft_tokens
                     ? 100.0 * double(st.num_accepted_tokens) / double(st.num_draft_tokens)
                     : 0.0,
                 ids.size(), s, double(ids.size()) / s, st.num_speculative_steps,
                 st.num_steps_read_early);
    }
    if (o.json) fmt::print("{}\n", nlohmann::json{{"ids", ids}, {"text", text}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    else fmt::print("\n");
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
