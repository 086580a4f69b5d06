// The values a template computes with: Python's object model as Jinja sees it, reduced to
// what chat templates can reach. JSON input maps onto none/bool/int/float/str/list/dict;
// Jinja adds undefined, Markup strings (the `safe` bit), tuples, dict views, generators,
// callables (macros, builtins, bound methods) and a few objects (namespace, loop, cycler).
//
// Invariant: a Value is immutable once built, except the mutable state of an ObjectData
// (namespace attributes, cycler position) and an iterator's read position; these live for
// one render and are never shared across threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tandem::jinja {

class Interpreter;
class Value;
using ValueList = std::vector<Value>;

enum class Kind : uint8_t {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Dict,
  Iterator,
  Callable,
  Object
};

// What a List value is in Python terms; decides repr, equality and a few attributes.
enum class ListFlavor : uint8_t { List, Tuple, DictKeys, DictValues, DictItems, Range, Group };

// Why a value is undefined; builds jinja2's UndefinedError message lazily.
struct UndefinedInfo {
  std::string hint;   // overrides the message when non-empty
  std::string name;   // the missing variable / attribute / element (repr'd)
  std::string owner;  // object_type_repr of the object it was looked up on
  bool has_owner = false;
  bool name_is_str = true;  // attribute (str) vs element (other key types)
  bool security = false;    // raises SecurityError instead of UndefinedError
  std::string message() const;
};

// Containers free their children without recursion (bury_payloads in value.cpp): a
// template can nest a list a million levels deep in a loop, and a million nested
// destructors would overflow the stack.
struct ListData {
  ListData() = default;
  ListData(const ListData&) = default;
  ListData(ListData&&) = default;
  ListData& operator=(const ListData&) = default;
  ListData& operator=(ListData&&) = default;
  ~ListData();
  ValueList items;
  ListFlavor flavor = ListFlavor::List;
  int64_t range_args[3] = {0, 0, 1};  // start, stop, step: Range repr only
};

// Insertion-ordered mapping with Python key equality (1 == 1.0 == True).
struct DictData {
  DictData() = default;
  DictData(const DictData&) = default;
  DictData(DictData&&) = default;
  DictData& operator=(const DictData&) = default;
  DictData& operator=(DictData&&) = default;
  ~DictData();
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // builds a dict; replaces an equal key in place
};

// A Python generator (map/select/items filters, reversed()): iterates once. Like a Python
// generator body, `producer` runs (and may fail) only when the items are first needed.
struct IteratorData {
  ~IteratorData();
  std::function<ValueList()> producer;
  ValueList items;
  size_t pos = 0;
  std::string origin;  // for repr: "<generator object origin at ...>"

  ValueList& materialize();
};

struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> named;
};

using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

struct CallableData {
  std::string name;
  std::string repr;  // how str() renders it
  NativeFn fn;
};

// Objects with attributes: namespace, loop context, cycler, joiner, ...
class ObjectData {
 public:
  virtual ~ObjectData() = default;
  virtual std::string type_repr() const = 0;  // e.g. "jinja2.utils.Namespace object"
  virtual std::string repr() const = 0;
  virtual std::optional<Value> get_attr(std::string_view name) = 0;
  // Only namespaces accept assignment; false means "not a namespace".
  virtual bool set_attr(std::string_view name, const Value& value);
  // Calling the object (`loop(children)`); nullopt means "not callable".
  virtual std::optional<Value> call(Interpreter& in, CallArgs& args);
  // Drops every Value the object holds, at the end of a render (breaks reference cycles
  // such as a namespace holding itself).
  virtual void release() {}
};

class Value {
 public:
  Value() = default;  // undefined, no hint
  static Value undefined(UndefinedInfo info);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s, bool safe = false);
  static Value list(ValueList items, ListFlavor flavor = ListFlavor::List);
  static Value tuple(ValueList items) { return list(std::move(items), ListFlavor::Tuple); }
  static Value range(int64_t start, int64_t stop, int64_t step);
  static Value dict(DictData d);
  static Value iterator(ValueList items, std::string origin);
  static Value generator(std::function<ValueList()> producer, std::string origin);
  static Value callable(std::string name, NativeFn fn, std::string repr = "");
  static Value object(std::shared_ptr<ObjectData> obj);
  // JSON input; nesting deeper than 512 levels is refused (TypeError) to bound recursion.
  static Value from_json(const nlohmann::ordered_json& j, int depth = 0);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const {
    return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
  }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_safe() const { return safe_; }  // a Markup string
  // How many Values share this one's payload (0 for scalars).
  long payload_use_count() const { return ptr_.use_count(); }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_float() const;  // any number kind
  // Payload accessors. Callers test the kind first; a mismatch is a bug in tandem and raises
  // a TemplateError (never undefined behaviour).
  const std::string& as_string() const { return *get<std::string>(Kind::String); }
  const ListData& as_list() const { return *get<ListData>(Kind::List); }
  ListFlavor flavor() const { return get<ListData>(Kind::List)->flavor; }
  const DictData& as_dict() const { return *get<DictData>(Kind::Dict); }
  IteratorData& as_iterator() const { return *get<IteratorData>(Kind::Iterator); }
  const CallableData& as_callable() const { return *get<CallableData>(Kind::Callable); }
  ObjectData& as_object() const { return *get<ObjectData>(Kind::Object); }
  const UndefinedInfo* undefined_info() const {
    return kind_ == Kind::Undefined ? get<UndefinedInfo>() : nullptr;
  }

  bool truthy() const;
  // Python identity for `is sameas`: same object, or equal immutable scalars.
  bool same_object(const Value& other) const;
  // Python type name: "str", "int", "dict", "NoneType", ...
  std::string type_name() const;

  // Iterates as Python's iter() would: strings by code point, dicts by key; a generator
  // is consumed. Throws TypeError for non-iterables (None, numbers) and UndefinedError
  // never (undefined iterates empty).
  ValueList iterate() const;

 private:
  template <typename T>
  T* get() const {
    return static_cast<T*>(ptr_.get());
  }
  template <typename T>
  T* get(Kind expected) const {
    if (kind_ != expected) wrong_kind(expected);
    return static_cast<T*>(ptr_.get());
  }
  [[noreturn]] void wrong_kind(Kind expected) const;
  friend void bury_payloads(ValueList& values);
  friend void bury_payloads(std::vector<std::pair<Value, Value>>& entries);

  Kind kind_ = Kind::Undefined;
  bool safe_ = false;
  bool b_ = false;
  union {
    int64_t i_ = 0;
    double f_;
  };
  // The payload of String/List/Dict/Iterator/Callable/Object/Undefined, typed by kind_.
  std::shared_ptr<void> ptr_;
};

// Python's `==` (numbers across int/float/bool, containers element-wise).
bool py_equal(const Value& a, const Value& b);

}  // namespace tandem::jinja
