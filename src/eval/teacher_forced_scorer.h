// The reference Scorer: every score read off teacher-forced logits (engine/teacher_forcing.h)
// of one sequence at a time, in f64 log-softmax. Simple and exact rather than fast:
// generation reruns the whole sequence for every new token.
#pragma once

#include <memory>
#include <span>

#include "backend/backend.h"
#include "eval/scorer.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tandem::eval {

class TeacherForcedScorer final : public Scorer {
 public:
  // `model` and `backend` must outlive the scorer.
  TeacherForcedScorer(Model& model, Backend& backend, std::shared_ptr<const Tokenizer> tokenizer);

  std::vector<Loglikelihood> loglikelihood(std::span<const LoglikelihoodRequest> requests) override;
  std::vector<std::string> generate(std::span<const GenerateRequest> requests) override;
  std::vector<WindowNll> rolling_nll(std::string_view text, std::optional<int> window,
                                     std::optional<size_t> max_windows) override;

  // The token-level core of loglikelihood. When context + continuation exceed the model's
  // context length, the oldest context tokens are dropped (at least one is kept).
  Loglikelihood score_tokens(std::span<const int32_t> context,
                             std::span<const int32_t> continuation);

 private:
  std::string generate_one(const GenerateRequest& request);
  int max_length() const;

  Model& model_;
  Backend& backend_;
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace tandem::eval
