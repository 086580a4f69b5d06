// Where image bytes may come from (common/image_source.h): file: and http(s) URLs refused
// by default; under --allowed-local-media-path only files inside the directory (symlinks
// and ".." resolved first); under --allowed-media-domains only those hosts, at every
// redirect, with the download bounded by --max-image-bytes as it streams.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "../expect_400.h"
#include "../test_images.h"
#include "server/common/image_source.h"
#include "server/http/httplib_types.h"

namespace tandem::server {
namespace image_source_test {

namespace fs = std::filesystem;
using namespace testing;

ImagePart url_part(const std::string& url) {
  return image_part_from_url(url, "messages[0].content[0]", "messages[0].content[0].image_url.url");
}

std::string refusal(const ImagePart& p, const MediaFetchPolicy& policy,
                    const MediaLimits& limits = {}) {
  try {
    read_image_bytes(p, policy, limits);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), p.path);
    return e.what();
  }
  ADD_FAILURE() << "no refusal for " << p.payload;
  return "";
}

class LocalMedia : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("tandem_media_" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_ / "allowed/sub");
    fs::create_directories(base_ / "secret");
    write(base_ / "allowed/sub/a.png", png_);
    write(base_ / "allowed/b c.png", png_);
    write(base_ / "secret/s.png", png_);
    fs::create_symlink(base_ / "secret/s.png", base_ / "allowed/escape.png");
    fs::create_symlink(base_ / "secret", base_ / "allowed/escape_dir");
    fs::create_symlink(base_ / "allowed/sub/a.png", base_ / "allowed/inside.png");
    policy_.local_root = base_ / "allowed";
  }
  void TearDown() override { fs::remove_all(base_); }
  static void write(const fs::path& p, const Bytes& bytes) {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
  }
  std::string url(const fs::path& p) const { return "file://" + p.string(); }

  Bytes png_ = test_png(8, 8);
  fs::path base_;
  MediaFetchPolicy policy_;
};

TEST_F(LocalMedia, RefusedUnlessAllowed) {
  EXPECT_NE(refusal(url_part(url(base_ / "allowed/sub/a.png")), MediaFetchPolicy{})
                .find("--allowed-local-media-path"),
            std::string::npos);
}

TEST_F(LocalMedia, ReadsFilesInsideTheDirectory) {
  EXPECT_EQ(read_image_bytes(url_part(url(base_ / "allowed/sub/a.png")), policy_, {}), png_);
  EXPECT_EQ(
      read_image_bytes(url_part("file:" + (base_ / "allowed/sub/a.png").string()), policy_, {}),
      png_);
  EXPECT_EQ(read_image_bytes(url_part("file://localhost" + (base_ / "allowed/b%20c.png").string()),
                             policy_, {}),
            png_);
  EXPECT_EQ(read_image_bytes(url_part(url(base_ / "allowed/inside.png")), policy_, {}), png_);
}

TEST_F(LocalMedia, NothingOutsideIt) {
  for (fs::path p : {base_ / "secret/s.png", base_ / "allowed/escape.png",
                     base_ / "allowed/escape_dir/s.png", base_ / "allowed/../secret/s.png",
                     base_ / "allowed/sub/../../secret/s.png", fs::path("/etc/passwd")})
    EXPECT_NE(refusal(url_part(url(p)), policy_).find("outside --allowed-local-media-path"),
              std::string::npos)
        << p;
  // A sibling whose name starts like the root is not inside it.
  fs::create_directories(base_ / "allowed2");
  write(base_ / "allowed2/x.png", png_);
  EXPECT_NE(refusal(url_part(url(base_ / "allowed2/x.png")), policy_).find("outside"),
            std::string::npos);
}

TEST_F(LocalMedia, MissingDirectoriesOtherHostsAndLargeFiles) {
  EXPECT_NE(refusal(url_part(url(base_ / "allowed/none.png")), policy_).find("no readable file"),
            std::string::npos);
  EXPECT_NE(refusal(url_part(url(base_ / "allowed/sub")), policy_).find("regular file"),
            std::string::npos);
  EXPECT_NE(refusal(url_part("file://otherhost/x.png"), policy_).find("this machine"),
            std::string::npos);
  EXPECT_NE(refusal(url_part("file:///a%zz.png"), policy_).find("%-escape"), std::string::npos);
  MediaLimits small;
  small.max_image_bytes = 10;
  EXPECT_NE(
      refusal(url_part(url(base_ / "allowed/sub/a.png")), policy_, small).find("--max-image-bytes"),
      std::string::npos);
}

TEST(ImageUrls, ParsedForFetching) {
  auto u = parse_http_url("HTTPS://Images.Example.com:8443/a/b.png?x=1#frag");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "images.example.com");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->target, "/a/b.png?x=1");
  EXPECT_EQ(parse_http_url("http://example.com")->target, "/");
  EXPECT_EQ(parse_http_url("http://example.com")->port, 80);
  auto v6 = parse_http_url("http://[::1]:8080/x");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->origin(), "http://[::1]:8080");
  EXPECT_FALSE(parse_http_url("http://user:pw@example.com/x"));  // never sends credentials
  EXPECT_FALSE(parse_http_url("http://example.com:99999/"));
  EXPECT_FALSE(parse_http_url("http://:80/"));
  EXPECT_FALSE(parse_http_url("http://example.com/a b"));
  EXPECT_FALSE(parse_http_url("ftp://example.com/"));
}

TEST(ImageUrls, AllowedHosts) {
  std::vector<std::string> allowed = {"Example.com", ".cdn.net"};
  EXPECT_TRUE(media_host_allowed("example.com", allowed));
  EXPECT_FALSE(media_host_allowed("www.example.com", allowed));
  EXPECT_FALSE(media_host_allowed("badexample.com", allowed));
  EXPECT_TRUE(media_host_allowed("cdn.net", allowed));
  EXPECT_TRUE(media_host_allowed("a.b.cdn.net", allowed));
  EXPECT_FALSE(media_host_allowed("evilcdn.net", allowed));
}

// A local image host: /a.png, a redirect to it, a redirect off the allowed hosts, an image
// too large (declared, and streamed in chunks without a length), and a 404.
class RemoteMedia : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/a.png", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(png_.begin(), png_.end()), "image/png");
    });
    server_.Get("/to-a", [](const httplib::Request&, httplib::Response& res) {
      res.set_redirect("/a.png");
    });
    server_.Get("/away", [](const httplib::Request&, httplib::Response& res) {
      res.set_redirect("http://evil.example/a.png");
    });
    server_.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(100000, 'x'), "image/png");
    });
    server_.Get("/stream", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("image/png", [](size_t, httplib::DataSink& sink) {
        std::string chunk(4096, 'x');
        return sink.write(chunk.data(), chunk.size());  // endless, until the client drops it
      });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    policy_.allowed_domains = {"127.0.0.1"};
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  Bytes png_ = test_png(8, 8);
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  MediaFetchPolicy policy_;
};

TEST_F(RemoteMedia, RefusedUnlessTheHostIsAllowed) {
  EXPECT_NE(refusal(url_part(url("/a.png")), MediaFetchPolicy{}).find("--allowed-media-domains"),
            std::string::npos);
  MediaFetchPolicy other;
  other.allowed_domains = {"example.com"};
  EXPECT_NE(refusal(url_part(url("/a.png")), other).find("host '127.0.0.1' is not in"),
            std::string::npos);
}

TEST_F(RemoteMedia, FetchesFromAnAllowedHostAndFollowsRedirectsThere) {
  EXPECT_EQ(read_image_bytes(url_part(url("/a.png")), policy_, {}), png_);
  EXPECT_EQ(read_image_bytes(url_part(url("/to-a")), policy_, {}), png_);
}

TEST_F(RemoteMedia, NoRedirectOffTheAllowedHosts) {
  EXPECT_NE(refusal(url_part(url("/away")), policy_).find("host 'evil.example' is not in"),
            std::string::npos);
}

TEST_F(RemoteMedia, DownloadsAreBounded) {
  MediaLimits limits;
  limits.max_image_bytes = 10000;
  EXPECT_NE(refusal(url_part(url("/big")), policy_, limits).find("--max-image-bytes"),
            std::string::npos);
  EXPECT_NE(refusal(url_part(url("/stream")), policy_, limits).find("--max-image-bytes"),
            std::string::npos);
  EXPECT_NE(refusal(url_part(url("/missing.png")), policy_).find("answered 404"),
            std::string::npos);
}

}  // namespace image_source_test
}  // namespace tandem::server
