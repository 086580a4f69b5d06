// Identifiers the APIs hand out: "chatcmpl-…", "cmpl-…", "msg_…", "resp_…", "call_…",
// "toolu_…". Random, so that clients that key on them never see a repeat.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::server {

// `prefix` followed by 24 random letters and digits.
std::string random_id(std::string_view prefix);

// Seconds since the Unix epoch, for "created" fields.
int64_t unix_time_now();

}  // namespace tandem::server
