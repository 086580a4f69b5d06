// A TestServer whose model thinks (issue 43): the oracle llama tokenizer under a real
// thinking template, a reasoning parser on, and a FakeEngine script that writes a thinking
// block in pieces that cut its delimiters.
#pragma once

#include <fstream>
#include <sstream>

#include "test_server.h"

namespace tandem::server::testing {

inline std::string chat_template_file(const std::string& name) {
  std::ifstream in(std::string(TANDEM_TEST_DATA "/chat_templates/") + name + ".jinja",
                   std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The llama oracle model's files with the template `name` and `--reasoning-parser parser`.
inline ServedModel thinking_model(FakeEngine& engine, const std::string& template_name,
                                  const std::string& parser = "auto",
                                  std::shared_ptr<const Tokenizer> tokenizer = nullptr) {
  if (!tokenizer) tokenizer = Tokenizer::load(llama_dir());
  nlohmann::json config = {{"chat_template", chat_template_file(template_name)},
                           {"bos_token", "<s>"},
                           {"eos_token", "<|im_end|>"}};
  ServedModel m = load_served_model(llama_dir(), engine, tokenizer, {.reasoning_parser = parser});
  TokenizerConfig tc = TokenizerConfig::parse(config, template_name);
  m.chat = ChatPromptBuilder::create(tc, tokenizer);
  m.reasoning = served_reasoning(parser, *tokenizer, engine.model_info(), tc.chat_template);
  return m;
}

// "<think>\nLet me think.\n</think>\n\nThe answer." in pieces that cut both delimiters.
inline std::vector<StreamChunk> thinking_chunks(const GenerationRequest& r,
                                                std::string answer = "The answer.") {
  return {text_chunk("<thi", {1}),
          text_chunk("nk>\nLet me", {2}),
          text_chunk(" think.\n</th", {3}),
          text_chunk("ink>\n\n", {4}),
          text_chunk(std::move(answer), {5}),
          final_chunk(FinishReason::Stop, int(r.prompt.size()), 5)};
}

}  // namespace tandem::server::testing
