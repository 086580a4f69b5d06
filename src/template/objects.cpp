#include "template/objects.h"

#include "template/call_args.h"
#include "template/errors.h"
#include "template/py_repr.h"

namespace tandem::jinja {

std::string NamespaceObject::repr() const {
  return "<Namespace " + py_repr(Value::dict(attrs_)) + ">";
}

std::optional<Value> NamespaceObject::get_attr(std::string_view name) {
  const Value* v = attrs_.find(name);
  return v ? std::optional<Value>(*v) : std::nullopt;
}

bool NamespaceObject::set_attr(std::string_view name, const Value& value) {
  attrs_.set(Value::string(std::string(name)), value);
  return true;
}

std::string LoopObject::repr() const {
  return fmt::format("<LoopContext {}/{}>", index_ + 1, items_.size());
}

std::optional<Value> LoopObject::get_attr(std::string_view name) {
  int64_t n = static_cast<int64_t>(items_.size());
  int64_t i = static_cast<int64_t>(index_);
  if (name == "index0") return Value::integer(i);
  if (name == "index") return Value::integer(i + 1);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(depth_);
  if (name == "depth0") return Value::integer(depth_ - 1);
  if (name == "previtem") {
    if (i > 0) return items_[i - 1];
    UndefinedInfo info;
    info.hint = "there is no previous item";
    return Value::undefined(std::move(info));
  }
  if (name == "nextitem") {
    if (i + 1 < n) return items_[i + 1];
    UndefinedInfo info;
    info.hint = "there is no next item";
    return Value::undefined(std::move(info));
  }
  auto self = shared_from_this();
  if (name == "cycle") {
    return Value::callable("cycle", [self](Interpreter&, CallArgs& args) {
      if (args.positional.empty()) raise(ErrorKind::Type, "no items for cycling given");
      return args.positional[self->index_ % args.positional.size()];
    });
  }
  if (name == "changed") {
    return Value::callable("changed", [self](Interpreter&, CallArgs& args) {
      Value now = Value::tuple(args.positional);
      if (self->last_changed_ && py_equal(*self->last_changed_, now)) return Value::boolean(false);
      self->last_changed_ = now;
      return Value::boolean(true);
    });
  }
  return std::nullopt;
}

std::optional<Value> LoopObject::call(Interpreter&, CallArgs& args) {
  if (!recurse_)
    raise(ErrorKind::Type, "The loop must have the 'recursive' marker to be called recursively.");
  BoundArgs a("loop", args, {"iterable"}, 1);
  return Value::string(recurse_(a.get(0)));
}

std::optional<Value> CyclerObject::get_attr(std::string_view name) {
  auto self = shared_from_this();
  if (name == "current") return items_.empty() ? Value::none() : items_[pos_];
  if (name == "next") {
    return Value::callable("next", [self](Interpreter&, CallArgs& args) {
      expect_no_args("next", args);
      Value v = self->items_[self->pos_];
      self->pos_ = (self->pos_ + 1) % self->items_.size();
      return v;
    });
  }
  if (name == "reset") {
    return Value::callable("reset", [self](Interpreter&, CallArgs& args) {
      expect_no_args("reset", args);
      self->pos_ = 0;
      return Value::none();
    });
  }
  return std::nullopt;
}

Value make_joiner(std::string sep) {
  auto used = std::make_shared<bool>(false);
  return Value::callable(
      "joiner",
      [used, sep](Interpreter&, CallArgs& args) {
        expect_no_args("joiner", args);
        if (!*used) {
          *used = true;
          return Value::string("");
        }
        return Value::string(sep);
      },
      "<jinja2.utils.Joiner object>");
}

}  // namespace tandem::jinja
