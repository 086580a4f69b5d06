// The web pages through real HTTP: / and /dashboard are served from the embedded copies
// (byte for byte the files of src/server/web/), load without the API key, carry a CSP that
// keeps them on their own origin, revalidate by ETag, name only files that exist, and are
// 404 JSON with web_ui off. (What they do in a browser: tests/e2e/web_ui.test.mjs.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "../test_server.h"
#include "server/web/web_pages.h"

namespace tandem::server::testing {
namespace web_pages_test {

const std::filesystem::path kWebDir =
    std::filesystem::path(TANDEM_TEST_DATA).parent_path().parent_path() / "src/server/web";

httplib::Result fetch(TestServer& s, const std::string& path, httplib::Headers headers = {}) {
  httplib::Client client("127.0.0.1", s.port());
  client.set_read_timeout(10, 0);
  return client.Get(path.c_str(), headers);
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(WebPages, EmbeddedFilesAreTheSourceFiles) {
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(kWebDir)) {
    std::string ext = entry.path().extension().string();
    if (ext == ".html" || ext == ".js" || ext == ".css") on_disk.insert(entry.path().filename());
  }
  std::set<std::string> embedded;
  for (const EmbeddedFile& f : embedded_web_files()) {
    embedded.insert(std::string(f.name));
    EXPECT_TRUE(f.bytes == read_file(kWebDir / std::string(f.name)))
        << f.name << " differs from its source file";
  }
  EXPECT_EQ(embedded, on_disk);
  EXPECT_TRUE(embedded.count("index.html") && embedded.count("dashboard.html"));
}

TEST(WebPages, PagesLoadWithoutTheKeyAndStayOnTheirOrigin) {
  ServerOptions o;
  o.api_key = "sekrit";
  TestServer s(o);
  for (const char* path : {"/", "/dashboard"}) {
    auto res = fetch(s, path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/html; charset=utf-8");
    std::string csp = res->get_header_value("Content-Security-Policy");
    EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
    EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
    EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
    EXPECT_EQ(res->body.find("http://"), std::string::npos) << path << " names another origin";
    EXPECT_EQ(res->body.find("https://"), std::string::npos) << path << " names another origin";
  }
  EXPECT_EQ(s.get("/v1/models").status, 401);  // the API itself still needs the key
}

// Every /web/ file a page or script names is served, with its type.
TEST(WebPages, EveryReferencedFileIsServed) {
  TestServer s;
  std::set<std::string> referenced;
  const std::regex html_ref(R"re((?:src|href)="/web/([^"]+)")re");
  const std::regex js_import(R"re(from '\./([^']+)')re");
  for (const EmbeddedFile& f : embedded_web_files()) {
    std::string text(f.bytes);
    for (const std::regex* re : {&html_ref, &js_import})
      for (std::sregex_iterator it(text.begin(), text.end(), *re), end; it != end; ++it)
        referenced.insert((*it)[1].str());
  }
  ASSERT_TRUE(referenced.count("chat.js") && referenced.count("markdown.js"));
  for (const std::string& name : referenced) {
    auto res = fetch(s, "/web/" + name);
    ASSERT_TRUE(res) << name;
    EXPECT_EQ(res->status, 200) << name;
    std::string want =
        name.ends_with(".js") ? "text/javascript; charset=utf-8" : "text/css; charset=utf-8";
    EXPECT_EQ(res->get_header_value("Content-Type"), want) << name;
    EXPECT_EQ(res->get_header_value("X-Content-Type-Options"), "nosniff") << name;
  }
}

TEST(WebPages, ReloadsRevalidateByETag) {
  TestServer s;
  auto first = fetch(s, "/web/chat.js");
  ASSERT_TRUE(first);
  std::string etag = first->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = fetch(s, "/web/chat.js", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto other = fetch(s, "/web/chat.js", {{"If-None-Match", "\"stale\""}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  EXPECT_EQ(other->body, first->body);
  EXPECT_NE(fetch(s, "/web/markdown.js")->get_header_value("ETag"), etag);
}

TEST(WebPages, UnknownFilesAre404Json) {
  TestServer s;
  for (const char* path : {"/web/nope.js", "/web/", "/web/..%2fCMakeLists.txt", "/dashboard/x"}) {
    HttpReply r = s.get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_TRUE(Json::parse(r.body, nullptr, false).contains("error")) << path << ": " << r.body;
  }
}

TEST(WebPages, OffWithoutTheWebUi) {
  ServerOptions o;
  o.web_ui = false;
  TestServer s(o);
  for (const char* path : {"/", "/dashboard", "/web/chat.js"}) {
    HttpReply r = s.get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_TRUE(Json::parse(r.body, nullptr, false).contains("error")) << path;
  }
  EXPECT_EQ(s.get("/health").status, 200);
}

}  // namespace web_pages_test
}  // namespace tandem::server::testing
