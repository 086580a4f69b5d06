// Request fields shared by OpenAI's chat and completions endpoints (besides sampling):
// n, stream / stream_options, and the fields tandem refuses openly
// rather than ignoring silently (logit_bias, best_of > n, suffix).
#pragma once

#include "server/common/request_fields.h"

namespace tandem::server {

struct StreamOptions {
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
};

StreamOptions read_stream_options(const FieldReader& fields);
// n, at most `max_choices` (RequestLimits::max_choices, --max-choices).
int read_num_choices(const FieldReader& fields, int max_choices);
void check_unsupported_fields(const FieldReader& fields, int n);

}  // namespace tandem::server
