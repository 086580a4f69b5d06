#include "engine/executor.h"

#include "core/error.h"

namespace tandem {

DraftProposals Executor::run_draft(const DraftStep& step) {
  (void)step;
  fail("speculative decoding: this executor runs no draft model");
}

}  // namespace tandem
