// Python str algorithms on UTF-8 text, indexing by code point: the shared core of the str
// methods (`s.split()`) and the filters built on them (`|trim`, `|wordcount`, `|indent`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::jinja::pystr {

// strip/lstrip/rstrip; chars unset means whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// split/rsplit; sep unset means runs of whitespace; maxsplit < 0 means no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);

std::string title(std::string_view s);
std::string capitalize(std::string_view s);
std::string swapcase(std::string_view s);

// Code point index range [start, end) with Python's negative/None adjustment.
struct Span {
  int64_t start, end;
};
Span adjust_span(std::optional<int64_t> start, std::optional<int64_t> end, int64_t len);
// Substring search within span; returns the code point index or -1.
int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse);
int64_t count(std::string_view s, std::string_view sub, std::optional<int64_t> start,
              std::optional<int64_t> end);
// Code points [start, end) of s.
std::string substr(std::string_view s, int64_t start, int64_t end);

std::string pad(std::string_view s, int64_t width, char32_t fill, char align);  // '<' '>' '^'
std::string zfill(std::string_view s, int64_t width);

}  // namespace tandem::jinja::pystr
