// The objects Jinja itself provides to templates: namespace(), the for-loop's `loop`,
// cycler() and joiner().
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "template/value.h"

namespace tandem::jinja {

// namespace(...): the one mutable container a template has ({% set ns.x = ... %}).
class NamespaceObject : public ObjectData {
 public:
  explicit NamespaceObject(DictData attrs) : attrs_(std::move(attrs)) {}
  std::string type_repr() const override { return "jinja2.utils.Namespace object"; }
  std::string repr() const override;
  std::optional<Value> get_attr(std::string_view name) override;
  bool set_attr(std::string_view name, const Value& value) override;
  void release() override { attrs_.entries.clear(); }

 private:
  DictData attrs_;
};

// `loop` inside a for-loop body; one object per loop, advanced per iteration (as jinja2's
// LoopContext, so a saved `loop` sees later iterations).
class LoopObject : public ObjectData, public std::enable_shared_from_this<LoopObject> {
 public:
  // Renders the loop body over another iterable, one level deeper (recursive loops only).
  using Recurse = std::function<std::string(const Value&)>;

  LoopObject(ValueList items, int depth, Recurse recurse)
      : items_(std::move(items)), depth_(depth), recurse_(std::move(recurse)) {}
  void set_index(size_t i) { index_ = i; }
  std::string type_repr() const override { return "jinja2.runtime.LoopContext object"; }
  std::string repr() const override;
  std::optional<Value> get_attr(std::string_view name) override;
  std::optional<Value> call(Interpreter& in, CallArgs& args) override;
  void release() override {
    items_.clear();
    recurse_ = nullptr;
    last_changed_.reset();
  }

 private:
  ValueList items_;
  size_t index_ = 0;
  int depth_ = 1;
  Recurse recurse_;
  std::optional<Value> last_changed_;
};

class CyclerObject : public ObjectData, public std::enable_shared_from_this<CyclerObject> {
 public:
  explicit CyclerObject(ValueList items) : items_(std::move(items)) {}
  std::string type_repr() const override { return "jinja2.utils.Cycler object"; }
  std::string repr() const override { return "<jinja2.utils.Cycler object>"; }
  std::optional<Value> get_attr(std::string_view name) override;
  void release() override { items_.clear(); }

 private:
  ValueList items_;
  size_t pos_ = 0;
};

// joiner(sep): a callable returning "" on its first call and `sep` afterwards.
Value make_joiner(std::string sep);

}  // namespace tandem::jinja
