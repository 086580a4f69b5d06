#include "engine/sequence.h"

#include "tokenizer/tokenizer.h"

namespace tandem {

namespace {

std::vector<TokenRange> ranges_of(const std::vector<MediaSpan>& media) {
  std::vector<TokenRange> out;
  for (const MediaSpan& m : media)
    out.push_back({m.start, m.start + m.length, m.image ? m.image->content_hash : 0});
  return out;
}

}  // namespace

Sequence::Sequence(int64_t id, GenerationRequest req, std::shared_ptr<RequestStream> stream,
                   uint64_t fallback_seed, std::optional<LoraUse> lora_use)
    : id(id),
      request(std::move(req)),
      stream(std::move(stream)),
      tokens(request.prompt),
      num_prompt(int(request.prompt.size())),
      block_hashes(prefix_root({.cache_salt = request.cache_salt,
                                .adapter = lora_use ? std::to_string(lora_use->id) : ""}),
                   ranges_of(request.media)),
      media_ranges(ranges_of(request.media)),
      sampler(request.sampling, fallback_seed),
      stop(request.stop),
      lora(lora_use) {
  if (request.grammar) constraint.matcher.emplace(request.grammar);
  if (request.thinking) constraint.reasoning.emplace(*request.thinking, request.grammar);
  if (request.pooling) pooling.emplace(*request.pooling, num_prompt);
}

Sequence::~Sequence() = default;

}  // namespace tandem
