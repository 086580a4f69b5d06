#include "server/openai/embeddings_request.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "server/common/api_error.h"
#include "server/common/request_fields.h"

namespace tandem::server {
namespace {

bool read_base64(const FieldReader& f) {
  const std::optional<std::string> format = f.string("encoding_format");
  if (!format || *format == "float") return false;
  if (*format == "base64") return true;
  invalid_request("encoding_format", "'encoding_format' must be 'float' or 'base64', got '{}'",
                  *format);
}

std::vector<PromptInput> read_inputs(const FieldReader& f, int vocab_size,
                                     const RequestLimits& limits) {
  std::vector<PromptInput> inputs = read_prompt_inputs(f.require("input"), "input", vocab_size);
  if (inputs.size() > limits.max_sequences)
    invalid_request("input", "{} inputs is more than the limit of {} (--max-request-sequences)",
                    inputs.size(), limits.max_sequences);
  for (size_t i = 0; i < inputs.size(); i++)
    if (inputs[i].text && inputs[i].text->empty())
      invalid_request("input", "'{}' is an empty string: there is nothing to embed",
                      inputs.size() == 1 ? std::string("input") : item_path("input", i));
  return inputs;
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const Json& body, const ModelInfo& model,
                                           const RequestLimits& limits) {
  FieldReader f(body);
  EmbeddingsRequest out;
  out.model = f.string("model");
  out.inputs = read_inputs(f, model.vocab_size, limits);
  out.base64 = read_base64(f);
  if (auto d = f.integer("dimensions", 1, std::numeric_limits<int32_t>::max())) {
    if (*d > model.hidden_size)
      invalid_request("dimensions",
                      "'dimensions' is {}, but this model's embeddings have {} (its hidden size)",
                      *d, model.hidden_size);
    out.dimensions = int(*d);
  }
  out.normalize = f.boolean("normalize").value_or(true);
  out.add_special_tokens = f.boolean("add_special_tokens").value_or(true);
  if (auto k = f.integer("truncate_prompt_tokens", -1, model.max_model_len)) {
    if (*k == 0)
      invalid_request("truncate_prompt_tokens", "'truncate_prompt_tokens' must be -1 or >= 1");
    out.truncate_prompt_tokens = *k == -1 ? model.max_model_len : int(*k);
  }
  return out;
}

}  // namespace tandem::server
