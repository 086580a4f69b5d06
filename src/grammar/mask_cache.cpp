#include "grammar/mask_cache.h"

#include <algorithm>
#include <bit>

#include "core/error.h"

namespace tandem::grammar {

namespace {
inline void set_bit(std::span<uint32_t> words, uint32_t id) {
  words[id >> 5] |= 1u << (id & 31);
}
inline bool test_bit(std::span<const uint32_t> words, uint32_t id) {
  return (words[id >> 5] >> (id & 31)) & 1u;
}
}  // namespace

MaskCache::MaskCache(std::shared_ptr<const TokenVocab> vocab, size_t max_bytes)
    : vocab_(std::move(vocab)), max_bytes_(max_bytes) {
  all_words_.assign(vocab_->num_mask_words(), 0);
  for (int32_t id : vocab_->sorted_tokens()) set_bit(all_words_, uint32_t(id));
  num_grammar_tokens_ = vocab_->sorted_tokens().size();
  state_at_.resize(vocab_->trie_depth() + 1);
  escaped_at_.resize(vocab_->trie_depth() + 1);
  scratch_.resize(vocab_->num_mask_words() + 1);
}

void MaskCache::fill(Automaton& automaton, StateId real, std::span<uint32_t> words) {
  TANDEM_CHECK(words.size() == vocab_->num_mask_words(), "mask of {} words for {}", words.size(),
               vocab_->num_mask_words());
  // No trie token is longer than trie_depth(): states that act alike on that many bytes
  // have the same trie tokens allowed.
  StateId s = automaton.canonical(real, vocab_->trie_depth());
  if (auto it = entries_.find(s); it != entries_.end()) {
    ++stats_.hits;
    expand(it->second, words);
  } else {
    ++stats_.misses;
    compute(automaton, s);
    std::span<const uint32_t> mask(scratch_.data(), words.size());
    std::copy(mask.begin(), mask.end(), words.begin());
    Entry e = compress(mask);
    charge(e.data.size() * sizeof(uint32_t) + 64);
    entries_.emplace(s, std::move(e));
  }
  for (uint32_t id : long_tokens_allowed(automaton, real)) set_bit(words, id);
}

const std::vector<uint32_t>& MaskCache::long_tokens_allowed(Automaton& automaton, StateId real) {
  if (auto it = long_allowed_.find(real); it != long_allowed_.end()) return it->second;
  std::vector<uint32_t> allowed;
  for (int32_t id : vocab_->long_tokens()) {
    StateId t = real;
    for (char c : vocab_->bytes(id)) {
      t = automaton.next(t, uint8_t(c));
      if (t == kDeadState) break;
    }
    if (t != kDeadState) allowed.push_back(uint32_t(id));
  }
  charge(allowed.size() * sizeof(uint32_t) + 64);
  return long_allowed_.emplace(real, std::move(allowed)).first->second;
}

void MaskCache::compute(Automaton& automaton, StateId s) {
  const std::vector<TrieNode>& nodes = vocab_->trie();
  const FrameEntry& frame = frame_entry(automaton, automaton.top_frame(s));
  if (!frame.useful) {
    ++stats_.full_walks;
    std::fill(scratch_.begin(), scratch_.end(), 0u);
    walk<false>(automaton, s, 1, uint32_t(nodes.size()), 0, nullptr);
    return;
  }
  expand(frame.decided, std::span(scratch_.data(), vocab_->num_mask_words()));
  scratch_.back() = 0;
  for (uint32_t root : frame.open_subtrees) {
    // The real state at the subtree root's parent: follow the path's bytes.
    const TrieNode& node = nodes[root];
    const std::string& path = vocab_->bytes(vocab_->sorted_tokens()[vocab_->first_token(root)]);
    StateId r = s;
    for (uint32_t d = 0; d + 1 < node.depth && r != kDeadState; ++d)
      r = automaton.next(r, uint8_t(path[d]));
    if (r != kDeadState) walk<false>(automaton, r, root, node.skip, node.depth - 1u, nullptr);
  }
}

const MaskCache::FrameEntry& MaskCache::frame_entry(Automaton& automaton, StateId top) {
  if (auto it = frames_.find(top); it != frames_.end()) return it->second;
  ++stats_.frame_walks;
  const std::vector<TrieNode>& nodes = vocab_->trie();
  FrameEntry f;
  std::fill(scratch_.begin(), scratch_.end(), 0u);
  walk<true>(automaton, top, 1, uint32_t(nodes.size()), 0, &f.open_subtrees);
  size_t num_open = 0;
  for (uint32_t root : f.open_subtrees)
    num_open += vocab_->subtree_token_end(root) - vocab_->first_token(root);
  f.useful = num_open * 4 <= num_grammar_tokens_;
  f.decided = compress(std::span<const uint32_t>(scratch_.data(), vocab_->num_mask_words()));
  charge(f.decided.data.size() * sizeof(uint32_t) + f.open_subtrees.size() * sizeof(uint32_t) + 96);
  return frames_.emplace(top, std::move(f)).first->second;
}

template <bool kFrame>
void MaskCache::walk(Automaton& automaton, StateId s, uint32_t begin, uint32_t end,
                     uint32_t base_depth, std::vector<uint32_t>* open) {
  const TrieNode* nodes = vocab_->trie().data();
  const int32_t* tokens = vocab_->sorted_tokens().data();
  const std::array<uint8_t, 256> cls = automaton.byte_class();  // a local copy: no aliasing
  uint32_t* out = scratch_.data();       // one word longer than the mask: the scratch bit
  StateId* state_at = state_at_.data();  // the state of the last node visited at each depth
  uint8_t* escaped_at = escaped_at_.data();
  automaton.ensure_expanded(s);
  Automaton::Rows rows = automaton.rows();
  // The trie's shape makes branches unpredictable, so the loop avoids them: every node
  // stores its state and sets its token's bit (or the scratch bit), and the parent's state
  // comes from the node just visited when this node is its child, from state_at otherwise.
  state_at[base_depth] = s;
  escaped_at[base_depth] = 0;
  StateId prev = s;
  uint32_t prev_depth = base_depth;
  uint64_t visited = 0;
  for (uint32_t i = begin; i < end;) {
    const TrieNode node = nodes[i];
    ++visited;
    StateId parent = prev;
    if (node.depth != prev_depth + 1) parent = state_at[node.depth - 1];
    StateId t = rows.table[size_t(parent) * rows.num_classes + cls[node.byte]];
    if constexpr (kFrame) {
      // A thread that returned into the unknown caller may go on there: the tokens below
      // are undecided, unless a thread still in the frame takes them.
      uint8_t escaped = escaped_at[node.depth - 1] | (rows.flags[t] & kEscaped);
      if (!(rows.flags[t] & kHasThreads)) {
        if (escaped) open->push_back(i);
        i = node.skip;
        continue;
      }
      escaped_at[node.depth] = escaped;
    } else if (t == kDeadState) {
      i = node.skip;
      continue;
    }
    state_at[node.depth] = t;
    out[node.token >> 5] |= 1u << (node.token & 31);
    if (node.num_tokens > 1) [[unlikely]]  // more ids with the same bytes
      for (uint32_t k = 1; k < node.num_tokens; ++k)
        set_bit(scratch_, uint32_t(tokens[vocab_->first_token(i) + k]));
    if (!(rows.flags[t] & kExpanded) && node.skip != i + 1) [[unlikely]] {  // children read t
      automaton.ensure_expanded(t);
      rows = automaton.rows();
    }
    prev = t;
    prev_depth = node.depth;
    ++i;
  }
  stats_.nodes_walked += visited;
}

MaskCache::Entry MaskCache::compress(std::span<const uint32_t> words) const {
  size_t num_allowed = 0;
  for (uint32_t w : words) num_allowed += size_t(std::popcount(w));
  size_t num_rejected = num_grammar_tokens_ - num_allowed;
  Entry e;
  if (num_allowed <= words.size() && num_allowed <= num_rejected) {
    e.form = Form::Allowed;
    for (size_t w = 0; w < words.size(); ++w)
      for (uint32_t bits = words[w]; bits; bits &= bits - 1)
        e.data.push_back(uint32_t(w * 32 + size_t(std::countr_zero(bits))));
  } else if (num_rejected <= words.size()) {
    e.form = Form::Rejected;
    for (int32_t id : vocab_->sorted_tokens())
      if (!test_bit(words, uint32_t(id))) e.data.push_back(uint32_t(id));
  } else {
    e.form = Form::Bits;
    e.data.assign(words.begin(), words.end());
  }
  return e;
}

void MaskCache::expand(const Entry& e, std::span<uint32_t> words) const {
  switch (e.form) {
    case Form::Allowed:
      std::fill(words.begin(), words.end(), 0u);
      for (uint32_t id : e.data) set_bit(words, id);
      return;
    case Form::Rejected:
      std::copy(all_words_.begin(), all_words_.end(), words.begin());
      for (uint32_t id : e.data) words[id >> 5] &= ~(1u << (id & 31));
      return;
    case Form::Bits:
      std::copy(e.data.begin(), e.data.end(), words.begin());
      return;
  }
}

void MaskCache::charge(size_t bytes) {
  if (stats_.bytes + bytes > max_bytes_) {
    // A full cache starts over; masks are recomputed on demand. Frames go too: a frame
    // entry is referenced only while one mask is computed.
    entries_.clear();
    frames_.clear();
    long_allowed_.clear();
    stats_.bytes = 0;
  }
  stats_.bytes += bytes;
}

}  // namespace tandem::grammar
