#include "server/common/json_text.h"

#include <nlohmann/json.hpp>

namespace tandem::server {

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tandem::server
