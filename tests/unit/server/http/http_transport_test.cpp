// The transport under requests no SDK sends, each from issue 17: repeated Content-Length,
// HTTP/1.0 streams, compressed and chunked bodies past the limit (decoded size, enforced
// while reading, nothing buffered past it), the API key checked before a body is read,
// slow and idle connections (header and idle deadlines, never starving /health), and
// more connections than workers. After each, the server still answers a normal request.
#include <gtest/gtest.h>

#include <zlib.h>

#include <thread>

#include "../raw_http.h"
#include "../test_server.h"

namespace tandem::server::testing {
namespace http_transport_test {

using namespace std::chrono_literals;

const std::string kChat = chat_body("hi").dump();

void expect_still_serving(TestServer& s) {
  EXPECT_EQ(raw_exchange(s.port(), post_request("/v1/chat/completions", kChat)).status, 200);
}

void expect_openai_error(const RawReply& r, int status, const std::string& words) {
  EXPECT_EQ(r.status, status) << r.head << r.body;
  Json j = r.json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  std::string message = j["error"]["message"];
  EXPECT_NE(message.find(words), std::string::npos) << message;
}

std::string gzip(const std::string& in) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, uLong(in.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

FakeEngine::Script paced_chunks(int n) {
  return [n](int, const GenerationRequest& r) {
    std::vector<StreamChunk> chunks;
    for (int i = 0; i < n; ++i) chunks.push_back(text_chunk("tok ", {5}));
    chunks.push_back(final_chunk(FinishReason::Length, int(r.prompt.size()), n));
    return chunks;
  };
}

TEST(HttpTransport, ARepeatedContentLengthIsRefused) {
  TestServer s;
  RawReply r = raw_exchange(
      s.port(),
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"
      "{\"a\":");
  expect_openai_error(r, 400, "more than one Content-Length");
  r = raw_exchange(s.port(),
                   "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}");
  EXPECT_EQ(r.status, 400) << r.body;
  expect_still_serving(s);
}

TEST(HttpTransport, HttpTenClientsGetAStreamWithoutChunkedEncoding) {
  TestServer s;
  std::string body = chat_body("hi", {{"stream", true}}).dump();
  RawReply r = raw_exchange(s.port(), post_request("/v1/chat/completions", body, "", "HTTP/1.0"));
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_FALSE(r.has_header("Transfer-Encoding")) << r.head;
  EXPECT_TRUE(r.has_header("Connection: close")) << r.head;
  EXPECT_EQ(r.body.rfind("data: ", 0), 0u) << r.body;  // raw events, no chunk sizes
  EXPECT_NE(r.body.find("data: [DONE]\n\n"), std::string::npos) << r.body;
  // HTTP/1.1 still gets chunks.
  RawReply chunked = raw_exchange(s.port(), post_request("/v1/chat/completions", body));
  EXPECT_TRUE(chunked.has_header("Transfer-Encoding: chunked")) << chunked.head;
}

TEST(HttpTransport, CompressedAndChunkedBodiesAreDecoded) {
  TestServer s;
  std::string gz = gzip(kChat);
  RawReply r = raw_exchange(s.port(),
                            post_request("/v1/chat/completions", gz, "Content-Encoding: gzip\r\n"));
  EXPECT_EQ(r.status, 200) << r.body;
  std::string chunks = "5\r\n" + kChat.substr(0, 5) + "\r\n" +
                       fmt::format("{:x}\r\n", kChat.size() - 5) + kChat.substr(5) +
                       "\r\n0\r\n\r\n";
  r = raw_exchange(s.port(),
                   "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Content-Type: application/json\r\nConnection: close\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n" +
                       chunks);
  EXPECT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(s.engine.requests().size(), 2u);
}

TEST(HttpTransport, AGzipBombStopsAtTheDecodedLimitWithoutTheMemory) {
  ServerOptions o;
  o.limits.http.max_body_bytes = 1 << 20;
  TestServer s(o);
  // 64 MiB inflated from ~64 KB on the wire (the issue: 1 MB → 1 GiB, +2 GB RSS).
  std::string bomb = gzip("{\"prompt\": \"" + std::string(64 << 20, 'a') + "\"}");
  ASSERT_LT(bomb.size(), 1u << 20);
  reset_peak_rss();
  int64_t before = current_rss_bytes();
  RawReply r =
      raw_exchange(s.port(), post_request("/v1/completions", bomb, "Content-Encoding: gzip\r\n"));
  expect_openai_error(r, 413, "--max-body-bytes");
  EXPECT_LT(peak_rss_bytes() - before, int64_t(32) << 20);
  EXPECT_TRUE(s.engine.requests().empty());
  expect_still_serving(s);
}

TEST(HttpTransport, AChunkedBodyPastTheLimitIsRefusedBeforeItIsBuffered) {
  ServerOptions o;
  o.limits.http.max_body_bytes = 1 << 20;
  TestServer s(o);
  RawClient c(s.port());
  c.send(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  std::string chunk = fmt::format("{:x}\r\n{}\r\n", 64 << 10, std::string(64 << 10, 'x'));
  bool refused = false;
  std::string reply;
  for (int i = 0; i < 4096 && !refused; ++i) {  // up to 256 MiB offered
    if (!c.send(chunk)) refused = true;
    if (i % 16 == 15) {  // has the refusal arrived?
      reply += c.read_until("\r\n\r\n", 1ms);
      refused = refused || !reply.empty();
    }
  }
  reply += c.read_all(2000ms);
  EXPECT_TRUE(refused) << "the server kept reading past the limit";
  expect_openai_error(parse_reply(reply), 413, "larger than the limit of 1048576 bytes");
  expect_still_serving(s);
}

TEST(HttpTransport, TheApiKeyIsCheckedBeforeTheBodyIsRead) {
  ServerOptions o;
  o.api_key = "sekrit";
  TestServer s(o);
  // A head announcing 1 GiB, and not a byte of it sent: the 401 comes at once.
  RawClient c(s.port());
  c.send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n");
  RawReply r = parse_reply(c.read_until("}}", 3000ms));
  EXPECT_EQ(r.status, 401) << r.head;
  EXPECT_TRUE(r.has_header("Connection: close")) << r.head;
  // Anthropic's shape on its route; the key in x-api-key or "bearer" in any case.
  RawReply a = raw_exchange(s.port(), post_request("/v1/messages", "{}", "x-api-key: nope\r\n"));
  EXPECT_EQ(a.status, 401);
  EXPECT_EQ(a.json()["error"]["type"], "authentication_error") << a.body;
  for (const char* scheme : {"bearer", "BEARER", "Bearer"})
    EXPECT_EQ(
        raw_exchange(s.port(), post_request("/v1/chat/completions", kChat,
                                            fmt::format("Authorization: {} sekrit\r\n", scheme)))
            .status,
        200)
        << scheme;
}

TEST(HttpTransport, ExpectContinueIsAnsweredBeforeTheBody) {
  TestServer s;
  RawClient c(s.port());
  c.send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nConnection: close\r\nExpect: 100-continue\r\nContent-Length: " +
      std::to_string(kChat.size()) + "\r\n\r\n");
  EXPECT_EQ(c.read_until("\r\n\r\n", 3000ms), "HTTP/1.1 100 Continue\r\n\r\n");
  c.send(kChat);
  EXPECT_EQ(parse_reply(c.read_all()).status, 200);
}

TEST(HttpTransport, HeadersThatDripInMeetTheirDeadline) {
  ServerOptions o;
  o.limits.http.header_timeout = 1s;
  TestServer s(o);
  RawClient c(s.port());
  c.send("GET /health HTTP/1.1\r\nHo");
  RawReply r = parse_reply(c.read_all(4000ms));
  expect_openai_error(r, 408, "--header-timeout");
  EXPECT_TRUE(c.closed_within(3000ms));
}

TEST(HttpTransport, AnIdleConnectionIsClosedAtItsDeadlineButAStreamIsNot) {
  ServerOptions o;
  o.limits.http.idle_timeout = 1s;
  TestServer s(o);
  RawClient idle(s.port());
  EXPECT_TRUE(idle.closed_within(4000ms));
  // A response that takes longer than the idle deadline is never cut.
  s.engine.pace = 250ms;
  s.engine.script = paced_chunks(8);
  std::string body = chat_body("hi", {{"stream", true}}).dump();
  RawReply r = raw_exchange(s.port(), post_request("/v1/chat/completions", body), 5000ms);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("[DONE]"), std::string::npos) << r.body;
}

TEST(HttpTransport, SlowClientsAndBusyWorkersNeverStarveHealth) {
  ServerOptions o;
  o.limits.http.num_threads = 2;
  TestServer s(o);
  s.engine.pace = 100ms;
  s.engine.script = paced_chunks(12);
  // Both workers held by streams for ~1.2 s, and 300 connections dripping their headers
  // (the issue: 260 of them took /health down).
  std::vector<std::thread> streams;
  std::string body = chat_body("hi", {{"stream", true}}).dump();
  for (int i = 0; i < 2; ++i)
    streams.emplace_back(
        [&] { raw_exchange(s.port(), post_request("/v1/chat/completions", body)); });
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 300; ++i) {
    slow.push_back(std::make_unique<RawClient>(s.port()));
    slow.back()->send("POST /v1/chat/completions HTTP/1.1\r\nHo");
  }
  std::this_thread::sleep_for(300ms);
  auto start = std::chrono::steady_clock::now();
  RawReply health = raw_exchange(s.port(), get_request("/health"), 2000ms);
  EXPECT_EQ(health.status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);  // not queued behind streams
  EXPECT_EQ(raw_exchange(s.port(), get_request("/metrics"), 2000ms).status, 200);
  for (std::thread& t : streams) t.join();
  expect_still_serving(s);  // a queued request is served once a worker is free
}

TEST(HttpTransport, TheWorkerPoolGrowsWithTheStreamsUpToItsLimit) {
  ServerOptions o;
  o.limits.http.num_threads = 24;
  TestServer s(o);
  const int at_start = s.server().http_workers();
  EXPECT_GE(at_start, 1);
  EXPECT_LT(at_start, 24);  // made on demand, not all at start
  s.engine.pace = 100ms;
  s.engine.script = paced_chunks(12);
  // 40 streams of ~1.2 s: 24 are served at once, the other 16 wait for a free worker.
  std::string body = chat_body("hi", {{"stream", true}}).dump();
  std::vector<std::thread> streams;
  std::vector<int> status(40, 0);
  for (int i = 0; i < 40; ++i)
    streams.emplace_back([&, i] {
      status[size_t(i)] = raw_exchange(s.port(), post_request("/v1/chat/completions", body), 20000ms).status;
    });
  for (int i = 0; i < 100 && s.server().http_workers() < 24; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(s.server().http_workers(), 24);
  for (std::thread& t : streams) t.join();
  EXPECT_EQ(s.server().http_workers(), 24);  // never past the limit
  for (int st : status) EXPECT_EQ(st, 200);
  expect_still_serving(s);
}

TEST(HttpTransport, PastTheConnectionLimitTheIdlestGoesNotTheNewcomer) {
  ServerOptions o;
  o.limits.http.max_connections = 8;
  TestServer s(o);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(std::make_unique<RawClient>(s.port()));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(raw_exchange(s.port(), get_request("/health")).status, 200);
  EXPECT_TRUE(idle.front()->closed_within(2000ms));  // the oldest idle one made room
}

TEST(HttpTransport, PipelinedRequestsAreAnsweredInOrder) {
  TestServer s;
  RawClient c(s.port());
  std::string keep = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  std::string post = post_request("/v1/chat/completions", kChat);  // ends with Connection: close
  c.send(keep + keep + post);
  std::string all = c.read_all();
  size_t first = all.find("HTTP/1.1 200"), second = all.find("HTTP/1.1 200", first + 1),
         third = all.find("HTTP/1.1 200", second + 1);
  EXPECT_NE(third, std::string::npos) << all;
  EXPECT_NE(all.find("chat.completion", third), std::string::npos) << all;
}

TEST(HttpTransport, TheHostHeaderIsCheckedWithoutAnApiKey) {
  TestServer s;
  RawReply r = raw_exchange(
      s.port(), "GET /v1/models HTTP/1.1\r\nHost: evil.example:8080\r\nConnection: close\r\n\r\n");
  expect_openai_error(r, 403, "--allowed-hosts");
  EXPECT_EQ(r.json()["error"]["code"], "host_not_allowed");
  for (const char* host :
       {"127.0.0.1:1234", "localhost", "LOCALHOST:80", "[::1]:8080", "app.localhost", "10.1.2.3"})
    EXPECT_EQ(raw_exchange(s.port(), fmt::format("GET /v1/models HTTP/1.1\r\nHost: {}\r\n"
                                                 "Connection: close\r\n\r\n",
                                                 host))
                  .status,
              200)
        << host;
  // Probes answer whatever name a load balancer uses.
  EXPECT_EQ(raw_exchange(s.port(),
                         "GET /health HTTP/1.1\r\nHost: lb.internal\r\n"
                         "Connection: close\r\n\r\n")
                .status,
            200);
  ServerOptions o;
  o.allowed_hosts = std::vector<std::string>{".example.com"};
  TestServer listed(o);
  EXPECT_EQ(raw_exchange(listed.port(),
                         "GET /v1/models HTTP/1.1\r\nHost: api.example.com\r\n"
                         "Connection: close\r\n\r\n")
                .status,
            200);
  EXPECT_EQ(raw_exchange(listed.port(),
                         "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n"
                         "Connection: close\r\n\r\n")
                .status,
            403);
}

TEST(HttpTransport, WithoutAnApiKeyAPostMustSayItIsJson) {
  TestServer s;
  // A cross-site text/plain POST is one a browser sends without asking.
  std::string plain =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
      std::to_string(kChat.size()) + "\r\n\r\n" + kChat;
  expect_openai_error(raw_exchange(s.port(), plain), 415, "application/json");
  EXPECT_TRUE(s.engine.requests().empty());
  std::string charset = plain;
  charset.replace(charset.find("text/plain"), 10, "application/json; charset=utf-8");
  EXPECT_EQ(raw_exchange(s.port(), charset).status, 200);
  ServerOptions o;
  o.api_key = "k";
  TestServer keyed(o);
  plain.replace(plain.find("Connection"), 0, "x-api-key: k\r\n");
  EXPECT_EQ(raw_exchange(keyed.port(), plain).status, 200);  // the key is the defence there
}

TEST(HttpTransport, AHeadPastTheHeaderLimitIs431) {
  ServerOptions o;
  o.limits.http.max_header_bytes = 4096;
  TestServer s(o);
  RawReply r = raw_exchange(s.port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " +
                                          std::string(8000, 'b') + "\r\n\r\n");
  expect_openai_error(r, 431, "--max-header-bytes");
  expect_still_serving(s);
}

}  // namespace http_transport_test
}  // namespace tandem::server::testing
