#include "grammar/string_formats.h"

namespace tandem::grammar {

namespace {

// Months of 31, 30 and 28 days, and 29 February of the leap years: years divisible by 4,
// except centuries not divisible by 400.
constexpr std::string_view kDate =
    "(\\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])|(0[469]|11)-(0[1-9]|[12]\\d|30)"
    "|02-(0[1-9]|1\\d|2[0-8]))"
    "|(\\d\\d(0[48]|[2468][048]|[13579][26])|(00|0[48]|[2468][048]|[13579][26])00)-02-29)";

constexpr std::string_view kTime =
    "([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{1,9})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)";

constexpr std::string_view kUuid =
    "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

constexpr std::string_view kEmail =
    "[A-Za-z0-9_%+-]+(\\.[A-Za-z0-9_%+-]+)*@([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\\.)+"
    "[A-Za-z][A-Za-z]+";

}  // namespace

std::optional<std::string> format_regex(std::string_view format) {
  if (format == "date") return std::string(kDate);
  if (format == "time") return std::string(kTime);
  if (format == "date-time") return "(" + std::string(kDate) + ")T(" + std::string(kTime) + ")";
  if (format == "uuid") return std::string(kUuid);
  if (format == "email") return std::string(kEmail);
  return std::nullopt;
}

}  // namespace tandem::grammar
