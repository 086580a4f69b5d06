// The string formats a schema may require, as regexes (full match) over the characters of
// the string. Each is a subset of what ajv-formats' "full" mode accepts, chosen so that a
// generated string validates under either of its versions:
//   date       YYYY-MM-DD, a real calendar day (29 February only in leap years)
//   time       HH:MM:SS[.fraction] with a zone, Z or ±HH:MM (RFC 3339 full-time)
//   date-time  date "T" time
//   uuid       8-4-4-4-12 hexadecimal digits
//   email      dot-separated atoms of [A-Za-z0-9_%+-] "@" dot-separated hostname labels,
//              ending in a label of two or more letters
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tandem::grammar {

// The regex for a supported format; nullopt for any other.
std::optional<std::string> format_regex(std::string_view format);

}  // namespace tandem::grammar
