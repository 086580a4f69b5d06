// Turning a GenerationRun into an HTTP response, whole or streamed. This is where the
// waiting happens, and so where a vanished client or a stopping server is noticed: the
// run is cancelled and the engine frees the sequence within one step.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "server/common/generation_run.h"
#include "server/common/stream_encoder.h"
#include "server/http/httplib_types.h"

namespace tandem::server {

// HTTP status logged for a request whose client left before the answer (nginx's 499).
inline constexpr int kClientClosedRequest = 499;

using ResultFormatter = std::function<Json(const std::vector<ChoiceResult>&)>;

// A choice that ended in an engine error, as the ApiError it answers: 400 if it came before
// any token and the engine refused the request, else 500.
[[noreturn]] void throw_engine_error(const std::string& message, bool before_any_token,
                                     bool server_error);
// The client is gone: nothing can be sent; the status (kClientClosedRequest) only shows in
// logs.
void mark_client_gone(httplib::Response& res);

// Waits for every choice, then answers 200 with format(results). An engine error is an
// ApiError: 400 if it came before any token (the request could never run), else 500.
void respond_when_done(httplib::Response& res, GenerationRun& run, const ClientWatch& watch,
                       const ResultFormatter& format);

// Streams SSE. It first waits for the run's first chunk, so that an engine error that
// comes at once (a request the engine refuses) is still a proper 4xx response; after
// that, failures are error events inside the stream. `guard` is kept until the stream
// ends (the server counts in-flight requests with it).
void respond_streaming(httplib::Response& res, std::unique_ptr<GenerationRun> run,
                       const ClientWatch& watch, std::unique_ptr<StreamEncoder> encoder,
                       std::shared_ptr<void> guard);

}  // namespace tandem::server
