#include "template/call_args.h"

#include "template/errors.h"
#include "template/py_repr.h"

namespace tandem::jinja {

BoundArgs::BoundArgs(std::string_view fn, const CallArgs& args,
                     std::initializer_list<const char*> params, size_t required)
    : fn_(fn), slots_(params.size()) {
  std::vector<const char*> names(params);
  if (args.positional.size() > names.size())
    raise(ErrorKind::Type, "{}() takes at most {} argument{} ({} given)", fn_, names.size(),
          names.size() == 1 ? "" : "s", args.positional.size());
  for (size_t i = 0; i < args.positional.size(); ++i) slots_[i] = args.positional[i];
  for (const auto& [key, value] : args.named) {
    size_t i = 0;
    while (i < names.size() && key != names[i]) ++i;
    if (i == names.size())
      raise(ErrorKind::Type, "{}() got an unexpected keyword argument '{}'", fn_, key);
    if (slots_[i]) raise(ErrorKind::Type, "{}() got multiple values for argument '{}'", fn_, key);
    slots_[i] = value;
  }
  for (size_t i = 0; i < required; ++i)
    if (!slots_[i])
      raise(ErrorKind::Type, "{}() missing required argument '{}' (pos {})", fn_, names[i], i + 1);
}

int64_t BoundArgs::get_int(size_t i, int64_t fallback) const {
  if (!slots_[i] || slots_[i]->is_none()) return fallback;
  const Value& v = *slots_[i];
  if (v.kind() != Kind::Int && v.kind() != Kind::Bool)
    raise(ErrorKind::Type, "'{}' object cannot be interpreted as an integer", v.type_name());
  return v.as_int();
}

bool BoundArgs::get_bool(size_t i, bool fallback) const {
  return slots_[i] ? slots_[i]->truthy() : fallback;
}

std::optional<std::string> BoundArgs::get_str(size_t i) const {
  if (!slots_[i] || slots_[i]->is_none()) return std::nullopt;
  if (!slots_[i]->is_string())
    raise(ErrorKind::Type, "{}() argument must be str or None, not {}", fn_,
          slots_[i]->type_name());
  return slots_[i]->as_string();
}

void expect_no_args(std::string_view fn, const CallArgs& args) {
  if (!args.positional.empty() || !args.named.empty())
    raise(ErrorKind::Type, "{}() takes no arguments ({} given)", fn,
          args.positional.size() + args.named.size());
}

}  // namespace tandem::jinja
