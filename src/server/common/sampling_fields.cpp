#include "server/common/sampling_fields.h"

#include <limits>

#include "server/common/api_error.h"

namespace tandem::server {
namespace {

constexpr double kMaxPenalty = 2.0;
constexpr double kMaxRepetitionPenalty = 100.0;
constexpr int64_t kMaxMinTokens = int64_t(1) << 30;
constexpr size_t kMaxCacheSaltBytes = 1024;

void read_temperature_and_truncation(const FieldReader& f, const SamplingFieldSpec& spec,
                                     SamplingParams& s) {
  if (auto t = f.number("temperature", 0.0, spec.max_temperature)) s.temperature = float(*t);
  if (auto p = f.number_above("top_p", 0.0, 1.0)) s.top_p = float(*p);
  if (auto k = f.integer("top_k", -1, std::numeric_limits<int32_t>::max()))
    s.top_k = *k < 0 ? 0 : int(*k);  // -1 (vLLM) and 0 both mean "off"
  if (auto m = f.number("min_p", 0.0, 1.0)) s.min_p = float(*m);
}

void read_penalties(const FieldReader& f, SamplingParams& s) {
  if (auto p = f.number("presence_penalty", -kMaxPenalty, kMaxPenalty))
    s.presence_penalty = float(*p);
  if (auto p = f.number("frequency_penalty", -kMaxPenalty, kMaxPenalty))
    s.frequency_penalty = float(*p);
  if (auto p = f.number_above("repetition_penalty", 0.0, kMaxRepetitionPenalty))
    s.repetition_penalty = float(*p);
}

void read_seed(const FieldReader& f, SamplingParams& s) {
  // Any integer is a seed; negative ones wrap, as a 64-bit pattern.
  if (auto seed = f.integer("seed", std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max()))
    s.seed = uint64_t(*seed);
}

void read_stopping(const FieldReader& f, const SamplingFieldSpec& spec, int vocab_size,
                   GenerationRequest& out) {
  if (f.has(spec.stop_field)) {
    if (!spec.stop_may_be_string) f.array_field(spec.stop_field);  // a 400 unless a list
    out.stop = f.string_or_list(spec.stop_field, {spec.max_stop_strings, spec.max_stop_bytes,
                                                  "--max-stop-strings", "--max-stop-length"});
  }
  for (int64_t id : f.integer_list("stop_token_ids", 0, int64_t(vocab_size) - 1))
    out.stop_token_ids.push_back(int32_t(id));
  if (auto m = f.integer("min_tokens", 0, kMaxMinTokens)) out.min_tokens = int(*m);
  if (auto b = f.boolean("ignore_eos")) out.ignore_eos = *b;
  if (auto b = f.boolean("skip_special_tokens")) out.skip_special_tokens = *b;
}

// vLLM's `cache_salt`: requests share cached KV blocks only with the same salt.
void read_cache_salt(const FieldReader& f, GenerationRequest& out) {
  std::optional<std::string> salt = f.string("cache_salt");
  if (!salt) return;
  if (salt->empty() || salt->size() > kMaxCacheSaltBytes)
    invalid_request(f.name("cache_salt"), "'{}' must be a non-empty string of at most {} bytes",
                    f.name("cache_salt"), kMaxCacheSaltBytes);
  out.cache_salt = std::move(*salt);
}

// tandem's "speculative_decoding": false opts a request out of the server's speculative
// decoding (--speculative-config); its output is the same either way, only its speed differs.
void read_speculative(const FieldReader& f, GenerationRequest& out) {
  if (auto b = f.boolean("speculative_decoding")) out.speculative = *b;
}

}  // namespace

SamplingFieldSpec sampling_spec(const RequestLimits& limits, const char* stop_field) {
  SamplingFieldSpec spec;
  spec.stop_field = stop_field;
  spec.stop_may_be_string = std::string_view(stop_field) != "stop_sequences";
  spec.max_stop_strings = limits.max_stop_strings;
  spec.max_stop_bytes = limits.max_stop_bytes;
  return spec;
}

void read_sampling_fields(const FieldReader& fields, const SamplingFieldSpec& spec, int vocab_size,
                          GenerationRequest& out) {
  read_temperature_and_truncation(fields, spec, out.sampling);
  read_penalties(fields, out.sampling);
  read_seed(fields, out.sampling);
  read_stopping(fields, spec, vocab_size, out);
  read_cache_salt(fields, out);
  read_speculative(fields, out);
}

std::vector<GenerationRequest> expand_choices(const GenerationRequest& base, int n) {
  std::vector<GenerationRequest> out(size_t(n), base);
  if (base.sampling.seed)
    for (int i = 0; i < n; ++i) out[size_t(i)].sampling.seed = *base.sampling.seed + uint64_t(i);
  return out;
}

}  // namespace tandem::server
