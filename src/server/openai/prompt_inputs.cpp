#include "server/openai/prompt_inputs.h"

#include <nlohmann/json.hpp>

#include "server/common/api_error.h"
#include "server/common/request_fields.h"

namespace tandem::server {
namespace {

std::vector<int32_t> id_list(const Json& list, const std::string& path, const char* field,
                             int vocab_size) {
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (const Json& item : list) {
    if (!item.is_number_integer())
      invalid_request(field, "'{}' must hold only integers, found {}", path, json_type_name(item));
    int64_t id = item.get<int64_t>();
    if (id < 0 || id >= vocab_size)
      invalid_request(field, "Token id {} in '{}' is out of the vocabulary [0, {})", id, path,
                      vocab_size);
    ids.push_back(int32_t(id));
  }
  if (ids.empty()) invalid_request(field, "'{}' must not be an empty list", path);
  return ids;
}

}  // namespace

std::vector<PromptInput> read_prompt_inputs(const Json& value, const char* field, int vocab_size) {
  std::vector<PromptInput> out;
  if (value.is_string()) {
    out.push_back({value.get<std::string>(), {}});
    return out;
  }
  if (!value.is_array())
    invalid_request(field,
                    "'{}' must be a string, a list of strings, a list of token ids or a list of "
                    "token-id lists; got {}",
                    field, json_type_name(value));
  if (value.empty()) invalid_request(field, "'{}' must not be empty", field);
  if (value[0].is_number_integer()) {
    out.push_back({std::nullopt, id_list(value, field, field, vocab_size)});
    return out;
  }
  for (size_t i = 0; i < value.size(); ++i) {
    std::string path = item_path(field, i);
    if (value[i].is_string() && value[0].is_string()) {
      out.push_back({value[i].get<std::string>(), {}});
    } else if (value[i].is_array() && value[0].is_array()) {
      out.push_back({std::nullopt, id_list(value[i], path, field, vocab_size)});
    } else {
      invalid_request(field, "'{}' is {}: a {} list must hold only strings or only token-id lists",
                      path, json_type_name(value[i]), field);
    }
  }
  return out;
}

}  // namespace tandem::server
