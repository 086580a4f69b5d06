#include "server/common/response_writer.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "server/common/api_error.h"

namespace tandem::server {

// A request the engine refused is the client's error; a failed step (server_error), or
// one that struck after tokens were produced, is the server's.
void throw_engine_error(const std::string& message, bool before_any_token, bool server_error) {
  if (before_any_token && !server_error) throw ApiError(400, "invalid_request_error", message);
  throw internal_error(message);
}

void mark_client_gone(httplib::Response& res) {
  res.status = kClientClosedRequest;
  res.set_content("{}", "application/json");
}

namespace {

struct StreamState {
  std::unique_ptr<GenerationRun> run;
  std::unique_ptr<StreamEncoder> encoder;
  ClientWatch watch;
  std::optional<GenerationRun::Event> pending;  // the first chunk, read before the headers
  std::shared_ptr<void> guard;
  bool started = false;
  bool ended = false;

  void handle(GenerationRun::Event& e, std::string& out) {
    if (e.chunk.finish == FinishReason::Error) {
      out += encoder->error(e.chunk.error);
      run->cancel();
      ended = true;
      return;
    }
    out += encoder->chunk(e.choice, e.chunk);
  }

  // One call of httplib's content provider. Nothing may escape it: httplib calls it
  // outside the handler's try, where a throw would end the process.
  bool pump(httplib::DataSink& sink) noexcept {
    try {
      return pump_or_throw(sink);
    } catch (const std::exception& e) {
      return fail(sink, e.what());
    } catch (...) {
      return fail(sink, "Internal server error.");
    }
  }

  bool fail(httplib::DataSink& sink, const std::string& message) noexcept {
    try {
      run->cancel();
      std::string out = encoder->error(message);
      sink.write(out.data(), out.size());
      sink.done();
      return true;
    } catch (...) {
      return false;  // httplib drops the connection
    }
  }

  // Writes what is ready (waiting one poll interval if nothing is); ends the stream when
  // the run has finished.
  bool pump_or_throw(httplib::DataSink& sink) {
    std::string out;
    if (!started) {
      out += encoder->begin();
      started = true;
    }
    if (pending) {
      handle(*pending, out);
      pending.reset();
    }
    while (!ended && !run->finished()) {
      auto e = run->next(out.empty() ? watch.poll : std::chrono::milliseconds(0));
      if (!e) break;
      handle(*e, out);
    }
    if (!ended && run->finished()) {
      out += encoder->end();
      ended = true;
    }
    if (!ended && watch.aborting()) {
      out += encoder->error("The server is shutting down.");
      run->cancel();
      ended = true;
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (ended) sink.done();
    return true;
  }
};

}  // namespace

void respond_when_done(httplib::Response& res, GenerationRun& run, const ClientWatch& watch,
                       const ResultFormatter& format) {
  auto results = collect_results(run, watch);
  if (!results) {
    if (watch.aborting()) throw shutting_down_error();
    mark_client_gone(res);
    return;
  }
  for (const ChoiceResult& r : *results)
    if (r.finish == FinishReason::Error)
      throw_engine_error(r.error, r.tokens.empty(), r.server_error);
  res.status = 200;
  res.set_content(dump_json(format(*results)), "application/json");
}

void respond_streaming(httplib::Response& res, std::unique_ptr<GenerationRun> run,
                       const ClientWatch& watch, std::unique_ptr<StreamEncoder> encoder,
                       std::shared_ptr<void> guard) {
  auto first = run->next(watch);
  if (!first) {
    if (watch.aborting()) throw shutting_down_error();
    mark_client_gone(res);
    return;
  }
  if (first->chunk.finish == FinishReason::Error)
    throw_engine_error(first->chunk.error, first->chunk.tokens.empty(),
                       first->chunk.server_error);
  auto state = std::make_shared<StreamState>();
  state->run = std::move(run);
  state->encoder = std::move(encoder);
  state->watch = watch;
  state->pending = std::move(first);
  state->guard = std::move(guard);
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [state](size_t, httplib::DataSink& sink) { return state->pump(sink); });
}

}  // namespace tandem::server
