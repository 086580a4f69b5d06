// A real HttpServer on a free loopback port over a FakeEngine, with the llama oracle
// model's tokenizer and ChatML template, and small helpers to talk to it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fake_engine.h"
#include "server/http/httplib_types.h"
#include "server/http_server.h"

namespace tandem::server::testing {

inline const char* llama_dir() {
  return TANDEM_TEST_DATA "/oracle/llama";
}

struct HttpReply {
  int status = 0;
  std::string body;
  std::string content_type;
  Json json() const { return Json::parse(body); }
};

struct SseEvent {
  std::string event;  // "" when the stream names none (OpenAI)
  std::string data;
};

// Splits an SSE body into events; fails the test on a malformed frame.
inline std::vector<SseEvent> parse_sse(const std::string& body) {
  std::vector<SseEvent> events;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated SSE frame at " << pos;
    if (end == std::string::npos) break;
    SseEvent e;
    size_t line_start = pos;
    while (line_start < end) {
      size_t line_end = std::min(body.find('\n', line_start), end);
      std::string line = body.substr(line_start, line_end - line_start);
      if (line.rfind("event: ", 0) == 0) {
        e.event = line.substr(7);
      } else if (line.rfind("data: ", 0) == 0) {
        e.data = line.substr(6);
      } else {
        ADD_FAILURE() << "unexpected SSE line: " << line;
      }
      line_start = line_end + 1;
    }
    events.push_back(e);
    pos = end + 2;
  }
  return events;
}

class TestServer {
 public:
  explicit TestServer(ServerOptions options = {}, bool ready = true) {
    options.host = "127.0.0.1";
    options.port = 0;
    if (options.limits.http.num_threads == HttpLimits{}.num_threads)
      options.limits.http.num_threads = 16;
    if (options.served_model_name.empty()) options.served_model_name = "test-model";
    server_ = std::make_unique<HttpServer>(options);
    server_->start();
    if (ready) make_ready();
  }
  ~TestServer() { server_->stop(); }

  void make_ready() { server_->set_ready(load_served_model(llama_dir(), engine)); }
  void make_ready(ServedModel model) { server_->set_ready(std::move(model)); }

  HttpServer& server() { return *server_; }
  int port() const { return server_->port(); }

  HttpReply post(const std::string& path, const std::string& body, httplib::Headers headers = {}) {
    httplib::Client client("127.0.0.1", port());
    client.set_read_timeout(10, 0);
    auto res = client.Post(path.c_str(), headers, body, "application/json");
    return to_reply(res);
  }
  HttpReply post(const std::string& path, const Json& body, httplib::Headers headers = {}) {
    return post(path, body.dump(), std::move(headers));
  }
  HttpReply get(const std::string& path, httplib::Headers headers = {}) {
    httplib::Client client("127.0.0.1", port());
    client.set_read_timeout(10, 0);
    return to_reply(client.Get(path.c_str(), headers));
  }

  FakeEngine engine;

 private:
  static HttpReply to_reply(const httplib::Result& res) {
    HttpReply r;
    if (!res) {
      ADD_FAILURE() << "HTTP request failed: " << httplib::to_string(res.error());
      return r;
    }
    r.status = res->status;
    r.body = res->body;
    r.content_type = res->get_header_value("Content-Type");
    return r;
  }

  std::unique_ptr<HttpServer> server_;
};

// {"model": ..., "messages": [{"role": "user", "content": text}]} plus `extra`.
inline Json chat_body(const std::string& text, Json extra = Json::object()) {
  Json body = {{"model", "test-model"},
               {"messages", Json::array({{{"role", "user"}, {"content", text}}})}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

}  // namespace tandem::server::testing
