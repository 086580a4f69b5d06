#include "engine/speculator.h"

#include <algorithm>

#include "core/error.h"
#include "grammar/grammar_error.h"
#include "kv/block_pool.h"

namespace tandem {

namespace {

bool allows(std::span<const uint32_t> words, int32_t token) {
  return words.empty() || (words[size_t(token) >> 5] >> (token & 31) & 1u);
}

}  // namespace

Speculator::Speculator(SpeculativeConfig config, SpeculatorSetup setup)
    : config_(std::move(config)), setup_(std::move(setup)), controller_(config_.adaptive) {
  stats_.enabled = true;
  stats_.method = spec_method_name(config_.method);
  stats_.num_speculative_tokens = config_.num_speculative_tokens;
  stats_.accepted_per_position.assign(size_t(config_.num_speculative_tokens), 0);
}

// A row may speculate when it decodes (its last token is the only one to compute), asked
// for it, and has room for a proposal and the token after it.
bool Speculator::eligible(const Sequence& seq, bool ignore_in_flight) const {
  if (!seq.request.speculative || seq.status != SeqStatus::Running || seq.grammar_failure)
    return false;
  if (seq.prefilling() || (!ignore_in_flight && seq.num_in_flight > 0)) return false;
  return seq.num_tokens() - seq.num_computed == 1 && room(seq) > 0;
}

int Speculator::room(const Sequence& seq) const {
  const int left = seq.request.max_tokens - seq.num_generated() - 1;
  const int context = setup_.max_model_len - seq.num_tokens() - 1;
  return std::clamp(std::min(left, context), 0, config_.num_speculative_tokens);
}

// A draft model proposes for every row that asks; an n-gram row has proposals as often as
// its index has found some. This runs while the step in flight holds the device, so each
// n-gram row's index is brought up to its known tokens here: after an early read, while the
// device idles, a row only looks its suffix up (building 256 rows' indexes there took ms).
bool Speculator::may_speculate(std::span<Sequence* const> running) {
  std::vector<SpecCandidate> rows;
  for (Sequence* seq : running) {
    if (!eligible(*seq, /*ignore_in_flight=*/true)) continue;
    rows.push_back({room(*seq), seq->spec.acceptance,
                    uses_draft_model() ? 1.0 : controller_.proposal_rate(seq->spec)});
    if (config_.method == SpecMethod::Ngram) ngram_of(seq->spec).update(seq->tokens);
  }
  const bool yes = controller_.may_speculate(rows, int(running.size()), int(running.size()));
  if (yes) stats_.num_steps_read_early++;
  return yes;
}

NgramIndex& Speculator::ngram_of(SpecState& s) const {
  if (!s.ngram) s.ngram.emplace(config_.prompt_lookup_min, config_.prompt_lookup_max);
  return *s.ngram;
}

int Speculator::usable(const Sequence& seq, std::span<const int32_t> draft,
                       std::vector<std::vector<uint32_t>>& masks) const {
  masks.clear();
  const RowConstraint& own = seq.constraint;
  if (!own.matcher && !own.reasoning) {  // unconstrained: only stops cut
    for (size_t i = 0; i < draft.size(); i++)
      if (seq.stops_on(draft[i], seq.num_generated() + int(i) + 1, setup_.eos_token_ids))
        return int(i) + 1;
    return int(draft.size());
  }
  RowConstraint c = own;  // advanced along the proposals
  const size_t words = (size_t(setup_.vocab_size) + 31) / 32;
  int limit = int(draft.size());
  for (int i = 0;; i++) {
    std::vector<uint32_t>& mask = masks.emplace_back();
    try {
      if (c.has_mask()) {
        mask.resize(words);
        c.fill_mask(mask);
      }
    } catch (const grammar::GrammarError&) {  // this position cannot be masked: not verified
      masks.pop_back();
      return std::max(0, i - 1);
    }
    if (i == limit) return limit;
    const int32_t d = draft[size_t(i)];
    std::string why;
    GrammarVerdict verdict = allows(mask, d) ? c.follow(d, &why) : GrammarVerdict::Rejected;
    if (verdict == GrammarVerdict::Rejected) return limit = i;  // masks[i] is the last position's
    if (verdict != GrammarVerdict::Continue ||
        seq.stops_on(d, seq.num_generated() + i + 1, setup_.eos_token_ids))
      limit = i + 1;  // one more mask: the position after it
  }
}

void Speculator::propose(std::span<Sequence* const> running, bool overlapped) {
  std::vector<Sequence*> rows;
  std::vector<SpecCandidate> candidates;
  for (Sequence* seq : running) {
    SpecState& s = seq->spec;
    s.draft.clear();
    s.num_draft = 0;
    if (!eligible(*seq, /*ignore_in_flight=*/false)) continue;
    int max_k = room(*seq);
    if (config_.method == SpecMethod::Ngram) {
      s.draft = ngram_of(s).propose(seq->tokens, max_k);
      max_k = usable(*seq, s.draft, s.masks);
      controller_.observe_proposals(s, max_k > 0);
    }
    rows.push_back(seq);
    candidates.push_back({max_k, s.acceptance});
  }
  const std::vector<int> k =
      controller_.choose(candidates, int(running.size()), int(running.size()), overlapped);
  controller_.observe_read(std::any_of(k.begin(), k.end(), [](int n) { return n > 0; }));
  for (size_t i = 0; i < rows.size(); i++) {
    SpecState& s = rows[i]->spec;
    s.num_draft = k[i];
    if (config_.method == SpecMethod::Ngram) {
      s.draft.resize(size_t(k[i]));
      if (!s.masks.empty()) s.masks.resize(size_t(k[i]) + 1);
    }
    if (k[i] == 0) controller_.observe_idle(s);
  }
}

void Speculator::take_schedule(std::span<const ScheduledRow> rows) {
  for (const ScheduledRow& r : rows) {
    SpecState& s = r.seq->spec;
    s.num_draft = r.num_draft;
    if (config_.method != SpecMethod::Ngram) continue;
    s.draft.resize(size_t(r.num_draft));
    if (!s.masks.empty()) s.masks.resize(size_t(r.num_draft) + 1);
  }
}

SampleRow Speculator::draft_draw(const Sequence& seq, int j) const {
  const SamplingParams& p = seq.sampler.params();
  SampleRow r;
  r.temperature = p.greedy() ? 0.f : p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.seed = seq.sampler.seed();
  r.counter = (uint64_t(seq.num_generated()) + uint64_t(j)) | kDraftCounterBit;
  return r;
}

DraftStep Speculator::draft_step(std::span<const ScheduledRow> rows) {
  std::vector<PlanRow> plan_rows;
  DraftStep step;
  int sampled = 0;
  for (const ScheduledRow& r : rows) {
    Sequence& seq = *r.seq;
    const int target = r.num_tokens - r.num_draft;  // what the target computes of known tokens
    const bool proposes = r.num_draft > 0;
    // Plain decode rows are left behind (their lag grows): the draft runs only where it
    // must, so a server that does not speculate pays nothing for it past prompts.
    if (!proposes && target == 1 && r.sample) {
      seq.spec.draft_lag += target;
      continue;
    }
    const std::vector<int32_t>& table = seq.block_tables[size_t(setup_.draft_table_group)];
    // Positions whose block a window group released hold nothing to catch up on.
    const int live = int(std::find_if(table.begin(), table.end(),
                                      [](int32_t b) { return b != BlockPool::kNullBlock; }) -
                         table.begin());
    const int start = std::max(seq.num_computed - seq.spec.draft_lag, live * setup_.block_size);
    plan_rows.push_back({.tokens = seq.tokens,
                         .start = start,
                         .count = seq.num_computed + target - start,
                         .block_tables = std::span<const std::vector<int32_t>>(&table, 1),
                         .num_logits = proposes ? 1 : 0,
                         .feed_from = seq.in_flight_row});
    seq.spec.draft_lag = 0;
    if (!proposes) continue;
    DraftRow d{.sample_index = sampled++, .position = seq.num_computed, .block_table = table,
               .draws = {}};
    for (int j = 0; j < r.num_draft; j++) d.draws.push_back(draft_draw(seq, j));
    step.rows.push_back(std::move(d));
  }
  if (!plan_rows.empty()) step.first = build_step_plan(plan_rows, setup_.block_size);
  // The draft's groups all read the one table (draft_step.h).
  if (!step.first.groups.empty())
    step.first.groups.resize(size_t(setup_.draft_num_groups), step.first.groups[0]);
  return step;
}

void Speculator::take_proposals(std::span<ScheduledRow> rows, const DraftProposals& proposals) {
  size_t next = 0;
  for (ScheduledRow& r : rows) {
    if (r.num_draft == 0) continue;
    TANDEM_CHECK(next < proposals.tokens.size(), "{} rows of proposals for more rows",
                 proposals.tokens.size());
    SpecState& s = r.seq->spec;
    s.draft = proposals.tokens[next];
    s.q_rows = proposals.q_rows[next++];
    const int k = usable(*r.seq, s.draft, s.masks);
    s.num_drafted = int(s.draft.size());
    s.draft.resize(size_t(k));
    r.num_tokens -= r.num_draft - k;
    r.num_draft = k;
  }
  TANDEM_CHECK(next == proposals.tokens.size(), "{} rows of proposals for {} rows",
               proposals.tokens.size(), next);
}

void Speculator::verify_rows(const Sequence& seq, std::vector<SampleRow>& out) const {
  const SpecState& s = seq.spec;
  const int k = int(s.draft.size());
  const bool sampled_draft = uses_draft_model() && !seq.sampler.params().greedy();
  std::vector<int32_t> history;  // penalties count the proposals before each position
  if (seq.sampler.needs_history()) {
    history = seq.tokens;
    history.insert(history.end(), s.draft.begin(), s.draft.end());
  }
  for (int i = 0; i <= k; i++) {
    SampleRow r = history.empty()
                      ? seq.sampler.row(seq.tokens, seq.num_prompt, seq.request.top_logprobs, i)
                      : seq.sampler.row(std::span(history).first(seq.tokens.size() + size_t(i)),
                                        seq.num_prompt, seq.request.top_logprobs);
    if (size_t(i) < s.masks.size() && !s.masks[size_t(i)].empty()) r.allowed = s.masks[size_t(i)];
    if (sampled_draft && i < k) r.draft = DraftCheck{s.draft[size_t(i)], s.q_rows[size_t(i)]};
    out.push_back(std::move(r));
  }
}

int Speculator::accept(Sequence& seq, std::span<const SampledToken> picked) {
  SpecState& s = seq.spec;
  const int k = int(s.draft.size());
  TANDEM_CHECK(int(picked.size()) == k + 1, "{} tokens for {} proposals", picked.size(), k);
  int a = 0;
  while (a < k && picked[size_t(a)].token == s.draft[size_t(a)]) a++;
  controller_.observe_row(s, k, a);
  stats_.num_drafts++;
  stats_.num_draft_tokens += k;
  stats_.num_accepted_tokens += a;
  for (int i = 0; i < a; i++) stats_.accepted_per_position[size_t(i)]++;
  // The draft computed its K/V through proposal num_draft − 2, at position
  // num_computed + num_draft − 1 (before the step): the row lacks only the last one's
  // when every proposal was accepted.
  if (uses_draft_model()) s.draft_lag = std::max(0, a + 1 - s.num_drafted);
  s.draft.clear();
  s.num_draft = 0;
  return a;
}

}  // namespace tandem
