// The request head parser: what it accepts, and every refusal with the status RFC 9110 /
// 9112 give it (duplicate Content-Length, Content-Length with Transfer-Encoding, unknown
// codings and versions, a missing Host).
#include <gtest/gtest.h>

#include "server/http/request_head.h"

namespace tandem::server::http {
namespace request_head_test {

RequestHead parse_ok(const std::string& head) {
  auto r = parse_request_head(head);
  EXPECT_TRUE(std::holds_alternative<RequestHead>(r))
      << head << " → " << std::get<HttpRefusal>(r).message;
  return std::holds_alternative<RequestHead>(r) ? std::get<RequestHead>(r) : RequestHead{};
}

int refused(const std::string& head) {
  auto r = parse_request_head(head);
  EXPECT_TRUE(std::holds_alternative<HttpRefusal>(r)) << head;
  return std::holds_alternative<HttpRefusal>(r) ? std::get<HttpRefusal>(r).status : 0;
}

TEST(RequestHead, FindsTheEndOfTheHeadWithCrlfOrBareLf) {
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY"), 27u);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\nHost: a\n\nBODY"), 24u);
  EXPECT_EQ(find_head_end("\r\n\r\nGET / HTTP/1.1\r\n\r\n"), 22u);  // leading blank lines skipped
  EXPECT_FALSE(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n"));
  EXPECT_FALSE(find_head_end(""));
}

TEST(RequestHead, ParsesLineHeadersPathAndQuery) {
  RequestHead h = parse_ok(
      "POST /v1/models/my%20model?a=1&b=x+y HTTP/1.1\r\nHost: localhost:8080\r\n"
      "Content-Type: application/json\r\nContent-Length: 12\r\nX-Thing:  spaced  \r\n\r\n");
  EXPECT_EQ(h.request.method, "POST");
  EXPECT_EQ(h.request.path, "/v1/models/my model");
  EXPECT_EQ(h.request.target, "/v1/models/my%20model?a=1&b=x+y");
  EXPECT_EQ(h.request.get_param_value("b"), "x y");
  EXPECT_EQ(h.request.get_header_value("x-thing"), "spaced");  // names are case-insensitive
  EXPECT_EQ(h.body.kind, BodyFraming::Kind::Length);
  EXPECT_EQ(h.body.length, 12u);
  EXPECT_TRUE(h.keep_alive);
}

TEST(RequestHead, ConnectionAndVersionDecideKeepAlive) {
  EXPECT_FALSE(parse_ok("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse_ok("GET / HTTP/1.0\r\n\r\n").keep_alive);  // 1.0: no Host needed
  EXPECT_FALSE(parse_ok("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
}

TEST(RequestHead, FramingAndCodings) {
  RequestHead h = parse_ok(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\nContent-Encoding: gzip\r\n"
      "Expect: 100-continue\r\n\r\n");
  EXPECT_EQ(h.body.kind, BodyFraming::Kind::Chunked);
  EXPECT_EQ(h.body.coding, ContentCoding::Gzip);
  EXPECT_TRUE(h.body.expect_continue);
  EXPECT_EQ(parse_ok("POST / HTTP/1.1\r\nHost: a\r\nContent-Encoding: br\r\n\r\n").body.coding,
            ContentCoding::Brotli);
  EXPECT_EQ(parse_ok("POST / HTTP/1.1\r\nHost: a\r\nContent-Encoding: deflate\r\n\r\n").body.coding,
            ContentCoding::Deflate);
  EXPECT_EQ(parse_ok("GET / HTTP/1.1\r\nHost: a\r\n\r\n").body.kind, BodyFraming::Kind::None);
}

TEST(RequestHead, RefusesAmbiguousFraming) {
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"),
            400);
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n"), 400);
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n"),
            400);
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n"),
            400);
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
  EXPECT_EQ(refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
}

TEST(RequestHead, RefusesWhatItCannotServe) {
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Encoding: zstd\r\n\r\n"), 415);
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Encoding: gzip, br\r\n\r\n"), 415);
  EXPECT_EQ(refused("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\n\r\n"), 400);  // no Host
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n"), 417);
}

TEST(RequestHead, RefusesMalformedLines) {
  for (const char* head :
       {"GET\r\n\r\n", "GET /  HTTP/1.1\r\nHost: a\r\n\r\n", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET nopath HTTP/1.1\r\nHost: a\r\n\r\n", "GET / HTTP/1.1\r\nHost a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : a\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
        "GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", "GET / FTP/1.1\r\n\r\n"})
    EXPECT_EQ(refused(head), 400) << head;
}

TEST(RequestHead, PercentDecoding) {
  EXPECT_EQ(percent_decode("a%41%2fb", false), "aA/b");
  EXPECT_EQ(percent_decode("a+b", true), "a b");
  EXPECT_EQ(percent_decode("a+b", false), "a+b");
  EXPECT_FALSE(percent_decode("%4", false));
  EXPECT_FALSE(percent_decode("%", false));
  EXPECT_FALSE(percent_decode("%g0", false));
}

}  // namespace request_head_test
}  // namespace tandem::server::http
