#include "template/value.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "template/errors.h"
#include "template/render_budget.h"
#include "template/unicode.h"

namespace tandem::jinja {
namespace {

// What a value costs besides its payload: the control block and the Value itself.
constexpr size_t kValueOverhead = 48;

// Payloads whose destruction is pending; set while the outermost release drains it.
thread_local std::vector<std::shared_ptr<void>>* t_graveyard = nullptr;

void drain(std::vector<std::shared_ptr<void>>& graveyard) {
  t_graveyard = &graveyard;
  while (!graveyard.empty()) {
    std::shared_ptr<void> payload = std::move(graveyard.back());
    graveyard.pop_back();
    payload.reset();  // may bury more (appended to graveyard), never recurses into them
  }
  t_graveyard = nullptr;
}

}  // namespace

// Moves the children's payloads out, so that freeing them happens in drain()'s loop.
void bury_payloads(ValueList& values) {
  std::vector<std::shared_ptr<void>> local;
  std::vector<std::shared_ptr<void>>& graveyard = t_graveyard ? *t_graveyard : local;
  for (Value& v : values)
    if (v.ptr_) graveyard.push_back(std::move(v.ptr_));
  if (!t_graveyard) drain(local);
}

void bury_payloads(std::vector<std::pair<Value, Value>>& entries) {
  std::vector<std::shared_ptr<void>> local;
  std::vector<std::shared_ptr<void>>& graveyard = t_graveyard ? *t_graveyard : local;
  for (auto& [k, v] : entries) {
    if (k.ptr_) graveyard.push_back(std::move(k.ptr_));
    if (v.ptr_) graveyard.push_back(std::move(v.ptr_));
  }
  if (!t_graveyard) drain(local);
}

ListData::~ListData() {
  bury_payloads(items);
}

DictData::~DictData() {
  bury_payloads(entries);
}

IteratorData::~IteratorData() {
  bury_payloads(items);
}

std::string UndefinedInfo::message() const {
  if (!hint.empty()) return hint;
  if (!has_owner) return fmt::format("'{}' is undefined", name);
  if (!name_is_str) return fmt::format("{} has no element {}", owner, name);
  return fmt::format("'{}' has no attribute '{}'", owner, name);
}

bool ObjectData::set_attr(std::string_view, const Value&) {
  return false;
}
std::optional<Value> ObjectData::call(Interpreter&, CallArgs&) {
  return std::nullopt;
}

const Value* DictData::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : entries)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

void Value::wrong_kind(Kind expected) const {
  raise(ErrorKind::Runtime, "internal error: value of type '{}' used as kind {}", type_name(),
        static_cast<int>(expected));
}

Value Value::undefined(UndefinedInfo info) {
  Value v;
  v.ptr_ = std::make_shared<UndefinedInfo>(std::move(info));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s, bool safe) {
  charge_render(s.size() + kValueOverhead);
  Value v;
  v.kind_ = Kind::String;
  v.safe_ = safe;
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::list(ValueList items, ListFlavor flavor) {
  charge_render(items.size() * sizeof(Value) + kValueOverhead);
  Value v;
  v.kind_ = Kind::List;
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->flavor = flavor;
  v.ptr_ = std::move(data);
  return v;
}

Value Value::range(int64_t start, int64_t stop, int64_t step) {
  ValueList items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(integer(i));
  Value v = list(std::move(items), ListFlavor::Range);
  auto* data = v.get<ListData>();
  data->range_args[0] = start;
  data->range_args[1] = stop;
  data->range_args[2] = step;
  return v;
}

Value Value::dict(DictData d) {
  charge_render(d.entries.size() * 2 * sizeof(Value) + kValueOverhead);
  Value v;
  v.kind_ = Kind::Dict;
  v.ptr_ = std::make_shared<DictData>(std::move(d));
  return v;
}

Value Value::iterator(ValueList items, std::string origin) {
  charge_render(items.size() * sizeof(Value) + kValueOverhead);
  Value v;
  v.kind_ = Kind::Iterator;
  auto data = std::make_shared<IteratorData>();
  data->items = std::move(items);
  data->origin = std::move(origin);
  v.ptr_ = std::move(data);
  return v;
}

Value Value::generator(std::function<ValueList()> producer, std::string origin) {
  Value v = iterator({}, std::move(origin));
  v.get<IteratorData>()->producer = std::move(producer);
  return v;
}

ValueList& IteratorData::materialize() {
  if (producer) {
    ValueWalkGuard guard("materializing a generator");  // generators can wrap generators
    auto p = std::move(producer);
    producer = nullptr;
    items = p();
  }
  return items;
}

Value Value::callable(std::string name, NativeFn fn, std::string repr) {
  Value v;
  v.kind_ = Kind::Callable;
  auto data = std::make_shared<CallableData>();
  data->repr = repr.empty() ? fmt::format("<function {}>", name) : std::move(repr);
  data->name = std::move(name);
  data->fn = std::move(fn);
  v.ptr_ = std::move(data);
  return v;
}

Value Value::object(std::shared_ptr<ObjectData> obj) {
  Value v;
  v.kind_ = Kind::Object;
  v.ptr_ = std::move(obj);
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j, int depth) {
  using J = nlohmann::ordered_json::value_t;
  if (depth > 512) raise(ErrorKind::Type, "the render context nests deeper than 512 levels");
  switch (j.type()) {
    case J::null:
      return none();
    case J::boolean:
      return boolean(j.get<bool>());
    case J::number_integer:
      return integer(j.get<int64_t>());
    case J::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? number(static_cast<double>(u))
                                                  : integer(static_cast<int64_t>(u));
    }
    case J::number_float:
      return number(j.get<double>());
    case J::string:
      return string(j.get<std::string>());
    case J::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return list(std::move(items));
    }
    case J::object: {
      DictData d;
      d.entries.reserve(j.size());
      for (const auto& [k, e] : j.items())
        d.entries.emplace_back(string(k), from_json(e, depth + 1));
      return dict(std::move(d));
    }
    default:
      return none();  // binary / discarded: not produced by JSON text
  }
}

double Value::as_float() const {
  switch (kind_) {
    case Kind::Float:
      return f_;
    case Kind::Int:
      return static_cast<double>(i_);
    case Kind::Bool:
      return b_ ? 1.0 : 0.0;
    default:
      return 0.0;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return b_;
    case Kind::Int:
      return i_ != 0;
    case Kind::Float:
      return f_ != 0.0;
    case Kind::String:
      return !as_string().empty();
    case Kind::List:
      return !as_list().items.empty();
    case Kind::Dict:
      return !as_dict().entries.empty();
    default:
      return true;  // generators, callables and objects are always true
  }
}

bool Value::same_object(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::Undefined:
      return ptr_ == other.ptr_;
    case Kind::None:
      return true;
    case Kind::Bool:
      return b_ == other.b_;
    case Kind::Int:
      return i_ == other.i_ && i_ >= -5 && i_ <= 256;  // CPython's small ints
    case Kind::Float:
      return false;
    default:
      return ptr_ == other.ptr_ && safe_ == other.safe_;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return safe_ ? "Markup" : "str";
    case Kind::List:
      switch (flavor()) {
        case ListFlavor::Tuple:
          return "tuple";
        case ListFlavor::DictKeys:
          return "dict_keys";
        case ListFlavor::DictValues:
          return "dict_values";
        case ListFlavor::DictItems:
          return "dict_items";
        case ListFlavor::Range:
          return "range";
        case ListFlavor::Group:
          return "_GroupTuple";
        default:
          return "list";
      }
    case Kind::Dict:
      return "dict";
    case Kind::Iterator:
      return "generator";
    case Kind::Callable:
      return "function";
    case Kind::Object: {
      std::string t = as_object().type_repr();
      auto dot = t.rfind('.');
      auto sp = t.rfind(" object");
      return t.substr(dot == std::string::npos ? 0 : dot + 1,
                      sp == std::string::npos ? std::string::npos : sp - (dot + 1));
    }
  }
  return "object";
}

ValueList Value::iterate() const {
  switch (kind_) {
    case Kind::Undefined:
      return {};
    case Kind::String: {
      ValueList out;
      const std::string& s = as_string();
      for (size_t pos = 0; pos < s.size();) {
        std::string ch;
        unicode::append(ch, unicode::next(s, pos));
        out.push_back(string(std::move(ch)));  // iterating a Markup yields plain str
      }
      return out;
    }
    case Kind::List:
      charge_render(as_list().items.size() * sizeof(Value));
      return as_list().items;
    case Kind::Dict: {
      charge_render(as_dict().entries.size() * sizeof(Value));
      ValueList out;
      for (const auto& [k, v] : as_dict().entries) out.push_back(k);
      return out;
    }
    case Kind::Iterator: {
      IteratorData& it = as_iterator();
      ValueList& items = it.materialize();
      charge_render((items.size() - it.pos) * sizeof(Value));
      ValueList out(items.begin() + static_cast<std::ptrdiff_t>(it.pos), items.end());
      it.pos = items.size();
      return out;
    }
    default:
      raise(ErrorKind::Type, "'{}' object is not iterable", type_name());
  }
}

namespace {

bool sequence_equal(const ValueList& a, const ValueList& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!py_equal(a[i], b[i])) return false;
  return true;
}

bool dict_equal(const DictData& a, const DictData& b) {
  if (a.entries.size() != b.entries.size()) return false;
  for (const auto& [k, v] : a.entries) {
    const Value* other = b.find(k);
    if (!other || !py_equal(v, *other)) return false;
  }
  return true;
}

// Lists compare only with lists, tuples only with tuples (ranges with ranges).
bool same_sequence_type(ListFlavor a, ListFlavor b) {
  auto group = [](ListFlavor f) { return f == ListFlavor::Group ? ListFlavor::Tuple : f; };
  return group(a) == group(b);
}

}  // namespace

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  ValueWalkGuard guard("comparing values");
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.as_string() == b.as_string();
    case Kind::List:
      if (a.flavor() == ListFlavor::DictKeys && b.flavor() == ListFlavor::DictKeys) {
        break;  // set semantics handled below
      }
      return same_sequence_type(a.flavor(), b.flavor()) &&
             sequence_equal(a.as_list().items, b.as_list().items);
    case Kind::Dict:
      return dict_equal(a.as_dict(), b.as_dict());
    default:
      return a.same_object(b);
  }
  // dict_keys == dict_keys compares as sets
  const ValueList& x = a.as_list().items;
  const ValueList& y = b.as_list().items;
  if (x.size() != y.size()) return false;
  for (const Value& v : x) {
    bool found = false;
    for (const Value& w : y) found = found || py_equal(v, w);
    if (!found) return false;
  }
  return true;
}

}  // namespace tandem::jinja
