#include "engine/sequence.h"

#include "tokenizer/tokenizer.h"

namespace tandem {

Sequence::Sequence(int64_t id, GenerationRequest req, std::shared_ptr<RequestStream> stream,
                   uint64_t fallback_seed)
    : id(id),
      request(std::move(req)),
      stream(std::move(stream)),
      tokens(request.prompt),
      num_prompt(int(request.prompt.size())),
      block_hashes(prefix_root({.cache_salt = request.cache_salt, .adapter = {}})),
      sampler(request.sampling, fallback_seed),
      stop(request.stop) {
  if (request.grammar) matcher.emplace(request.grammar);
}

Sequence::~Sequence() = default;

}  // namespace tandem
