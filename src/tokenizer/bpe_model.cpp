#include "tokenizer/bpe_model.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace tandem::tok {

// A symbol of the word being merged: a doubly linked list threaded through an array, so a
// merge is O(1) and positions stay stable (HF models/bpe/word.rs).
struct BpeSymbol {
  int32_t id;
  int32_t prev;  // -1 at the start
  int32_t next;  // -1 at the end
  uint32_t len;  // bytes of the word covered; 0 once merged into its left neighbour
};

namespace {

// Vocabularies are dense tables indexed by id; anything past this is a corrupt file.
constexpr int64_t kMaxTokenId = int64_t{1} << 26;

// A possible merge of symbols[pos] (then `left`) with its right neighbour (then `right`)
// into new_id. It is stale once either symbol has changed: a symbol only ever grows to the
// right, so the same pair at pos can only be the same two symbols.
struct Candidate {
  uint32_t rank;
  uint32_t pos;
  int32_t left;
  int32_t right;
  int32_t new_id;
};

// Heap order: the lowest rank first, then the leftmost position.
struct ComesLater {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

void add_symbol(std::vector<BpeSymbol>& symbols, int32_t id, uint32_t len) {
  int32_t n = static_cast<int32_t>(symbols.size());
  if (n > 0) symbols.back().next = n;
  symbols.push_back({id, n - 1, -1, len});
}

}  // namespace

void BpeModel::check_type(const json& j, const LoadContext& ctx) {
  if (!j.is_object()) ctx.fail("expected an object");
  // Old files omit the model's type; HF then recognizes BPE by its merges.
  std::string type = j.contains("type")     ? component_type(j, ctx)
                     : j.contains("merges") ? "BPE"
                                            : "(none)";
  if (type != "BPE") ctx.fail("unsupported type '{}' (supported: BPE)", type);
}

std::unique_ptr<BpeModel> BpeModel::build(const json& j, BpeSource source, const LoadContext& ctx) {
  check_type(j, ctx);
  if (!source.has_vocab) ctx.fail("missing field \"vocab\"");
  if (!source.has_merges) ctx.fail("missing field \"merges\"");
  std::unique_ptr<BpeModel> m(new BpeModel());
  auto optional_string = [&](const char* key) -> std::string {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return "";
    if (!it->is_string()) ctx.fail("field \"{}\" must be a string or null", key);
    return it->get<std::string>();
  };
  if (auto it = j.find("unk_token"); it != j.end() && !it->is_null())
    m->unk_token_ = optional_string("unk_token");
  m->prefix_ = optional_string("continuing_subword_prefix");
  m->suffix_ = optional_string("end_of_word_suffix");
  m->byte_fallback_ = bool_field(j, "byte_fallback", false, ctx);
  m->fuse_unk_ = bool_field(j, "fuse_unk", false, ctx);
  m->ignore_merges_ = bool_field(j, "ignore_merges", false, ctx);
  m->load_vocab(source.vocab, ctx);
  if (!source.merge_ranks.empty() && source.merge_ranks.size() != source.merges.size())
    ctx.fail("{} merge ranks for {} merges", source.merge_ranks.size(), source.merges.size());
  m->load_merges(source.merges, source.merge_ranks, ctx);
  return m;
}

void BpeModel::load_vocab(std::vector<std::pair<std::string, int64_t>>& vocab,
                          const LoadContext& ctx) {
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0 || id >= kMaxTokenId) ctx.fail("vocab['{}'] has id {} out of range", token, id);
    max_id = std::max(max_id, id);
  }
  id_to_token_.resize(max_id + 1);
  has_token_.assign(max_id + 1, false);
  vocab_.reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    // A repeated token keeps its last id, as in a JSON object (and HF's map).
    vocab_[token] = static_cast<int32_t>(id);
    if (!has_token_[id]) {
      has_token_[id] = true;
      id_to_token_[id] = std::move(token);
    }
  }
  small_char_ids_.assign(0x800, -1);
  byte_ids_.fill(-1);
  for (const auto& [token, id] : vocab_) {
    size_t i = 0;
    char32_t c = token.empty() ? 0 : next_char(token, i);
    if (!token.empty() && i == token.size() && c < 0x800) small_char_ids_[c] = id;
  }
  for (int b = 0; b < 256; ++b) {
    if (auto it = vocab_.find(fmt::format("<0x{:02X}>", b)); it != vocab_.end())
      byte_ids_[b] = it->second;
  }
}

void BpeModel::load_merges(const std::vector<std::pair<std::string, std::string>>& merges,
                           const std::vector<uint32_t>& ranks, const LoadContext& ctx) {
  merges_ = MergeTable(merges.size());
  std::string merged;
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [a, b] = merges[i];
    auto a_id = token_to_id(a), b_id = token_to_id(b);
    if (!a_id || !b_id)
      ctx.fail("merges[{}] uses token '{}' which is not in the vocabulary", i, a_id ? b : a);
    if (b.size() < prefix_.size()) ctx.fail("merges[{}]: '{}' lacks the subword prefix", i, b);
    merged.assign(a).append(b, prefix_.size());
    auto new_id = token_to_id(merged);
    if (!new_id) ctx.fail("merges[{}] makes '{}' which is not in the vocabulary", i, merged);
    const uint32_t rank = ranks.empty() ? static_cast<uint32_t>(i) : ranks[i];
    merges_.insert_or_assign(*a_id, *b_id, {rank, *new_id});
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_limit() || !has_token_[id]) return nullptr;
  return &id_to_token_[id];
}

std::optional<int32_t> BpeModel::symbol_id(std::string_view word, size_t begin, size_t end) const {
  bool first = begin == 0, last = end == word.size();
  std::string_view ch = word.substr(begin, end - begin);
  if ((first || prefix_.empty()) && (!last || suffix_.empty())) {
    if (ch.size() <= 2) {
      size_t i = 0;
      char32_t c = next_char(ch, i);
      if (c < 0x800) {
        int32_t id = small_char_ids_[c];
        return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
      }
    }
    return token_to_id(ch);
  }
  std::string s = (first ? std::string() : prefix_) + std::string(ch) + (last ? suffix_ : "");
  return token_to_id(s);
}

void BpeModel::split_symbols(std::string_view word, std::vector<BpeSymbol>& symbols) const {
  std::optional<BpeSymbol> unk;  // a pending unknown run (growing when fuse_unk)
  for (size_t i = 0; i < word.size();) {
    size_t begin = i;
    i = std::min(word.size(), i + utf8_char_len(static_cast<unsigned char>(word[i])));
    uint32_t len = static_cast<uint32_t>(i - begin);
    if (auto id = symbol_id(word, begin, i)) {
      if (unk) add_symbol(symbols, unk->id, unk->len), unk.reset();
      add_symbol(symbols, *id, len);
      continue;
    }
    if (byte_fallback_) {
      bool first = begin == 0, last = i == word.size();
      std::string s = std::string(first ? "" : prefix_) + std::string(word.substr(begin, len)) +
                      (last ? suffix_ : "");
      bool all = std::all_of(s.begin(), s.end(),
                             [&](char b) { return byte_ids_[static_cast<unsigned char>(b)] >= 0; });
      if (all) {
        for (char b : s) add_symbol(symbols, byte_ids_[static_cast<unsigned char>(b)], 1);
        continue;
      }
    }
    if (!unk_token_) continue;  // HF drops the character silently
    auto unk_id = token_to_id(*unk_token_);
    if (!unk_id) fail("BPE unk_token '{}' is not in the vocabulary", *unk_token_);
    if (unk && fuse_unk_) {
      unk->len += len;
    } else {
      if (unk) add_symbol(symbols, unk->id, unk->len);
      unk = BpeSymbol{*unk_id, -1, -1, len};
    }
  }
  if (unk) add_symbol(symbols, unk->id, unk->len);
}

void BpeModel::apply_merges(std::vector<BpeSymbol>& symbols) const {
  thread_local std::vector<Candidate> heap;
  heap.clear();
  auto queue = [&](int32_t left_pos) {  // the pair starting at left_pos, if it merges
    const BpeSymbol& l = symbols[left_pos];
    int32_t r = symbols[l.next].id;
    if (const auto* m = merges_.find(l.id, r))
      heap.push_back({m->rank, static_cast<uint32_t>(left_pos), l.id, r, m->new_id});
  };
  for (size_t p = 0; p + 1 < symbols.size(); ++p) queue(static_cast<int32_t>(p));
  std::make_heap(heap.begin(), heap.end(), ComesLater{});
  auto requeue = [&](int32_t left_pos) {
    size_t before = heap.size();
    queue(left_pos);
    if (heap.size() > before) std::push_heap(heap.begin(), heap.end(), ComesLater{});
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), ComesLater{});
    Candidate top = heap.back();
    heap.pop_back();
    BpeSymbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next < 0) continue;
    BpeSymbol right = symbols[cur.next];
    if (cur.id != top.left || right.id != top.right) continue;  // stale
    symbols[cur.next].len = 0;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0) requeue(cur.prev);
    if (cur.next >= 0) requeue(static_cast<int32_t>(top.pos));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<BpeSymbol> symbols;
  symbols.clear();
  split_symbols(word, symbols);
  apply_merges(symbols);
  for (const BpeSymbol& s : symbols)
    if (s.len != 0) out.push_back(s.id);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  bool single_char = utf8_char_len(static_cast<unsigned char>(word[0])) >= word.size();
  if (single_char || word.size() > BpeCache::kMaxWordBytes) return merge_word(word, out);
  if (cache_.lookup(word, out)) return;
  size_t start = out.size();
  merge_word(word, out);
  cache_.insert(word, std::span<const int32_t>(out.data() + start, out.size() - start));
}

}  // namespace tandem::tok
