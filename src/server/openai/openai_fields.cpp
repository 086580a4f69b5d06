#include "server/openai/openai_fields.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "server/common/api_error.h"

namespace tandem::server {

StreamOptions read_stream_options(const FieldReader& fields) {
  StreamOptions out;
  out.stream = fields.boolean("stream").value_or(false);
  if (const Json* opts = fields.object_field("stream_options")) {
    if (!out.stream)
      invalid_request("stream_options", "'stream_options' is only allowed when 'stream' is true");
    FieldReader o(*opts, "stream_options");
    out.include_usage = o.boolean("include_usage").value_or(false);
    o.boolean("continuous_usage_stats");
  }
  return out;
}

int read_num_choices(const FieldReader& fields, int max_choices) {
  auto n = fields.integer("n", 1, std::numeric_limits<int32_t>::max());
  if (n && *n > max_choices)
    invalid_request("n", "'n' is {}; at most {} choices are allowed (--max-choices)", *n,
                    max_choices);
  return int(n.value_or(1));
}

void check_unsupported_fields(const FieldReader& fields, int n) {
  if (const Json* bias = fields.object_field("logit_bias"); bias && !bias->empty())
    invalid_request("logit_bias", "'logit_bias' is not supported yet");
  if (auto best_of = fields.integer("best_of", 1, std::numeric_limits<int32_t>::max());
      best_of && *best_of != n)
    invalid_request("best_of", "'best_of' other than n is not supported");
  if (auto suffix = fields.string("suffix"); suffix && !suffix->empty())
    invalid_request("suffix", "'suffix' is not supported");
}

}  // namespace tandem::server
