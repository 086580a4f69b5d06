// Grammar masks on the Qwen3 vocabulary (151,936 ids): µs per row-step to fill the
// allowed-token mask, p50/p99, for three realistic schemas. Each schema's rows replay
// documents that satisfy it, tokenized by the Qwen3 tokenizer as a model would emit them,
// one row after another on one compiled grammar (as a server's requests share it): the
// first row meets every state cold (a trie walk), later rows mostly hit the cache.
// Timing is this thread's CPU time, so builds running beside it do not inflate it. For
// comparison, a sample of the second row's steps is also masked naively (each token tried
// on its own through the same automaton), and the two masks must agree.
// Usage: grammar_bench [tokenizer.json or dir] [rows per schema]
// Default tokenizer: ${TANDEM_CACHE:-<repo>/.cache}/tokenizers/qwen3 (the bootstrap fetches it).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/grammar.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using namespace tandem;
using namespace tandem::grammar;

namespace {

double cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return 1e6 * double(ts.tv_sec) + 1e-3 * double(ts.tv_nsec);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

template <typename T>
const T& pick(std::mt19937& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

std::string words(std::mt19937& rng, int lo, int hi) {
  static const std::vector<std::string> w = {
      "the",     "order",  "arrived", "late",     "and",     "the",  "box",     "was",
      "damaged", "please", "refund",  "customer", "service", "was",  "helpful", "quality",
      "great",   "price",  "fair",    "shipping", "fast",    "café", "naïve",   "über",
      "東京",    "😀",      "size",    "colour",   "fits"};
  std::string s;
  int n = std::uniform_int_distribution<int>(lo, hi)(rng);
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + pick(rng, w);
  return s;
}

std::string digits(std::mt19937& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += char('0' + std::uniform_int_distribution<int>(0, 9)(rng));
  return s;
}

struct Scenario {
  const char* name;
  const char* schema;
  std::function<Json(std::mt19937&)> document;
};

// A tool call's arguments: a weather lookup.
const char* kToolSchema = R"({"type":"object","properties":{
  "location":{"type":"string","description":"City and country"},
  "unit":{"type":"string","enum":["celsius","fahrenheit"]},
  "days":{"type":"integer","minimum":1,"maximum":14},
  "include_hourly":{"type":"boolean"}},
  "required":["location","unit","days","include_hourly"],"additionalProperties":false})";

Json tool_document(std::mt19937& rng) {
  static const std::vector<std::string> cities = {"Paris, France", "San Francisco, USA",
                                                  "Tokyo, Japan", "São Paulo, Brazil",
                                                  "Reykjavík, Iceland"};
  return {{"location", pick(rng, cities)},
          {"unit", pick(rng, std::vector<std::string>{"celsius", "fahrenheit"})},
          {"days", std::uniform_int_distribution<int>(1, 14)(rng)},
          {"include_hourly", bool(rng() & 1)}};
}

// An extraction form: a person with contact details and addresses.
const char* kFormSchema = R"({"type":"object","properties":{
  "name":{"type":"string","minLength":1,"maxLength":60},
  "email":{"type":"string","format":"email"},
  "born":{"type":"string","format":"date"},
  "phone":{"type":"string","pattern":"^\\+[0-9]{1,3} [0-9]{6,12}$"},
  "addresses":{"type":"array","maxItems":3,"items":{"type":"object","properties":{
     "street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"},
     "kind":{"enum":["home","work","other"]}},"required":["street","city","kind"],"additionalProperties":false}},
  "vip":{"type":"boolean"},
  "notes":{"type":"string","maxLength":200}},
  "required":["name","email","born","addresses"],"additionalProperties":false})";

Json form_document(std::mt19937& rng) {
  static const std::vector<std::string> names = {"Ann Lee", "José García", "Zhang Wei",
                                                 "Olga Petrova"};
  Json addresses = Json::array();
  int n = std::uniform_int_distribution<int>(1, 3)(rng);
  for (int i = 0; i < n; ++i)
    addresses.push_back({{"street", fmt::format("{} {} Street", digits(rng, 2), words(rng, 1, 3))},
                         {"city", words(rng, 1, 2)},
                         {"zip", digits(rng, 5)},
                         {"kind", pick(rng, std::vector<std::string>{"home", "work", "other"})}});
  Json doc = {{"name", pick(rng, names)},
              {"email", fmt::format("user{}@example.com", digits(rng, 3))},
              {"born", fmt::format("19{}-0{}-1{}", digits(rng, 2), 1 + rng() % 9, rng() % 9)},
              {"phone", fmt::format("+{} {}", digits(rng, 2), digits(rng, 9))},
              {"addresses", addresses}};
  if (rng() & 1) doc["vip"] = bool(rng() & 1);
  doc["notes"] = words(rng, 3, 20);
  return doc;
}

// An API payload: an order with line items, a payment union and a recursive category.
const char* kOrderSchema = R"({"$defs":{
  "money":{"type":"object","properties":{"amount":{"type":"number","minimum":0},"currency":{"enum":["EUR","USD","JPY"]}},
           "required":["amount","currency"],"additionalProperties":false},
  "item":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},
          "quantity":{"type":"integer","minimum":1,"maximum":1000},"price":{"$ref":"#/$defs/money"},
          "category":{"$ref":"#/$defs/category"}},"required":["sku","quantity","price"],"additionalProperties":false},
  "category":{"type":"object","properties":{"name":{"type":"string"},"parent":{"anyOf":[{"$ref":"#/$defs/category"},{"type":"null"}]}},
              "required":["name","parent"],"additionalProperties":false}},
  "type":"object","properties":{
  "order_id":{"type":"string","format":"uuid"},
  "created":{"type":"string","format":"date-time"},
  "items":{"type":"array","items":{"$ref":"#/$defs/item"},"minItems":1,"maxItems":20},
  "payment":{"oneOf":[
    {"type":"object","properties":{"method":{"const":"card"},"last4":{"type":"string","pattern":"^[0-9]{4}$"}},"required":["method","last4"],"additionalProperties":false},
    {"type":"object","properties":{"method":{"const":"invoice"},"due_days":{"type":"integer","minimum":0,"maximum":90}},"required":["method","due_days"],"additionalProperties":false}]},
  "total":{"$ref":"#/$defs/money"}},
  "required":["order_id","created","items","payment","total"],"additionalProperties":false})";

Json order_document(std::mt19937& rng) {
  auto money = [&] {
    return Json{{"amount", double(rng() % 100000) / 100.0},
                {"currency", pick(rng, std::vector<std::string>{"EUR", "USD", "JPY"})}};
  };
  Json items = Json::array();
  int n = std::uniform_int_distribution<int>(1, 5)(rng);
  for (int i = 0; i < n; ++i) {
    Json item = {{"sku", fmt::format("{}{}{}-{}", char('A' + rng() % 26), char('A' + rng() % 26),
                                     char('A' + rng() % 26), digits(rng, 4))},
                 {"quantity", 1 + rng() % 20},
                 {"price", money()}};
    if (rng() & 1)
      item["category"] = {{"name", words(rng, 1, 2)},
                          {"parent", {{"name", words(rng, 1, 1)}, {"parent", nullptr}}}};
    items.push_back(item);
  }
  std::string hex = "0123456789abcdef", uuid;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) uuid += '-';
    uuid += hex[rng() % 16];
  }
  Json payment = rng() & 1 ? Json{{"method", "card"}, {"last4", digits(rng, 4)}}
                           : Json{{"method", "invoice"}, {"due_days", rng() % 91}};
  return {{"order_id", uuid},
          {"created", fmt::format("2025-0{}-1{}T0{}:{}:{}Z", 1 + rng() % 9, rng() % 9, rng() % 9,
                                  10 + rng() % 50, 10 + rng() % 50)},
          {"items", items},
          {"payment", payment},
          {"total", money()}};
}

struct Figures {
  std::vector<double> mask_us, first_row_mask_us, advance_us, naive_us;
};

// The mask without trie or cache, for comparison: every token tried on its own through the
// same automaton.
void naive_mask(const Matcher& m, std::vector<uint32_t>& words) {
  const TokenVocab& v = m.grammar().vocab();
  std::fill(words.begin(), words.end(), 0u);
  for (int32_t id = 0; id < v.num_tokens(); ++id) {
    Matcher copy = m;
    if (copy.accept_token(id)) words[size_t(id) >> 5] |= 1u << (id & 31);
  }
}

void run(const Scenario& sc, const Tokenizer& tok, std::shared_ptr<const TokenVocab> vocab,
         int rows) {
  double t0 = cpu_us();
  auto grammar = compile_grammar(GrammarSpec::json_schema(Json::parse(sc.schema)), vocab);
  double compile_ms = (cpu_us() - t0) / 1000;
  std::mt19937 rng(42);
  std::vector<uint32_t> words(vocab->num_mask_words());
  Figures f;
  size_t num_tokens = 0;
  for (int r = 0; r < rows; ++r) {
    std::string text = sc.document(rng).dump();
    std::vector<int32_t> ids = tok.encode(text, false);
    ids.push_back(vocab->eos_ids().front());
    Matcher m(grammar);
    for (size_t step = 0; step < ids.size(); ++step) {
      int32_t id = ids[step];
      if (r == 1 && step % 8 == 0) {  // a sample of warm steps
        std::vector<uint32_t> reference(words.size());
        double n0 = cpu_us();
        naive_mask(m, reference);
        f.naive_us.push_back(cpu_us() - n0);
        m.fill_mask(words);
        if (words != reference)
          fail("{}: the mask differs from the naive one at step {}", sc.name, step);
      }
      double a = cpu_us();
      m.fill_mask(words);
      double b = cpu_us();
      if (!((words[size_t(id) >> 5] >> (id & 31)) & 1u))
        fail("{}: the mask refuses token {} of {}", sc.name, id, text);
      bool ok = m.accept_token(id);
      double c = cpu_us();
      if (!ok) fail("{}: the matcher refuses token {} of {}", sc.name, id, text);
      (r == 0 ? f.first_row_mask_us : f.mask_us).push_back(b - a);
      f.advance_us.push_back(c - b);
    }
    num_tokens += ids.size();
  }
  GrammarStats st = grammar->stats();
  double nodes_per_mask =
      double(st.masks.nodes_walked) / double(std::max<uint64_t>(1, st.masks.misses));
  fmt::print("| {} | {:.1f} | {} | {:.0f} ", sc.name, compile_ms, st.num_states,
             double(num_tokens) / rows);
  fmt::print("| {:.1f} | {:.1f} | {:.0f} ", percentile(f.mask_us, 0.5), percentile(f.mask_us, 0.99),
             *std::max_element(f.mask_us.begin(), f.mask_us.end()));
  fmt::print("| {:.0f} | {:.0f} | {:.2f} ", percentile(f.first_row_mask_us, 0.5),
             percentile(f.first_row_mask_us, 0.99), percentile(f.advance_us, 0.5));
  fmt::print("| {} / {} / {} | {:.0f}k | {:.1f} / {:.1f} | {:.0f} |\n", st.masks.misses,
             st.masks.frame_walks, st.masks.full_walks, nodes_per_mask / 1000,
             double(st.masks.bytes) / (1 << 20), double(st.automaton_bytes) / (1 << 20),
             percentile(f.naive_us, 0.5));
}

}  // namespace

int main(int argc, char** argv) {
  fs::path repo = TANDEM_SOURCE_DIR;
  const char* cache = std::getenv("TANDEM_CACHE");
  fs::path path = argc > 1 && *argv[1] ? fs::path(argv[1])
                                       : (cache && *cache ? fs::path(cache) : repo / ".cache") /
                                             "tokenizers" / "qwen3";
  int rows = argc > 2 ? std::atoi(argv[2]) : 200;
  try {
    auto tok = Tokenizer::load(path);
    TokenVocabParams p;
    int width = std::max(tok->vocab_size(), 151936);
    p.token_bytes.resize(size_t(width));
    p.is_special.assign(size_t(width), 0);
    for (int32_t id = 0; id < tok->vocab_size(); ++id) {
      tok::append_token_bytes(p.token_bytes[size_t(id)], tok->id_to_token(id));
      p.is_special[size_t(id)] = tok->is_special(id);
    }
    for (const char* eos : {"<|im_end|>", "<|endoftext|>"})
      if (auto id = tok->token_to_id(eos)) p.eos_ids.push_back(*id);
    double t0 = cpu_us();
    auto vocab = std::make_shared<const TokenVocab>(std::move(p));
    fmt::print("vocabulary: {} ids, {} trie nodes, built in {:.0f} ms\n", vocab->num_tokens(),
               vocab->trie().size(), (cpu_us() - t0) / 1000);
    fmt::print(
        "{} rows per schema, each replaying one document tokenized by Qwen3 (µs: thread CPU "
        "time)\n\n",
        rows);
    fmt::print(
        "| schema | compile ms | states | tokens/row | mask µs p50 | p99 | max | first row p50 | "
        "first row p99 | "
        "advance µs p50 | masks / frames / full walks | nodes per mask | masks / automaton MiB | "
        "naive mask µs p50 |\n");
    fmt::print(
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    const Scenario scenarios[] = {
        {"tool call (weather)", kToolSchema, tool_document},
        {"extraction form", kFormSchema, form_document},
        {"order payload ($defs, recursion, oneOf)", kOrderSchema, order_document}};
    for (const Scenario& sc : scenarios) run(sc, *tok, vocab, rows);
  } catch (const std::exception& e) {
    fmt::print(stderr, "grammar_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
