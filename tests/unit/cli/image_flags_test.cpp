// The image flags of `tandem serve` (cli/limit_flags.cpp): parsed into the request limits
// and the fetch policy, with check_limits refusing values that make no sense.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/limit_flags.h"
#include "core/error.h"

namespace tandem::cli {
namespace image_flags_test {

struct Parsed {
  server::ServerLimits limits;
  std::vector<std::string> hosts;
};

Parsed parse(std::vector<std::string> args) {
  Parsed p;
  CLI::App app;
  add_limit_flags(app, p.limits, p.hosts);
  std::reverse(args.begin(), args.end());
  app.parse(args);
  return p;
}

TEST(ImageFlags, DefaultsAreBoundedAndSourcesOff) {
  Parsed p = parse({});
  EXPECT_EQ(p.limits.request.media.max_image_bytes, MediaLimits{}.max_image_bytes);
  EXPECT_EQ(p.limits.request.media.max_images_per_request, MediaLimits{}.max_images_per_request);
  EXPECT_TRUE(p.limits.request.media_fetch.allowed_domains.empty());
  EXPECT_FALSE(p.limits.request.media_fetch.local_root);
}

TEST(ImageFlags, Parsed) {
  std::string dir = std::filesystem::temp_directory_path().string();
  Parsed p = parse({"--max-image-bytes", "5MiB", "--max-image-pixels", "1000000",
                    "--max-images-per-request", "2", "--allowed-media-domains",
                    "images.example.com,.cdn.example.org", "--allowed-local-media-path", dir,
                    "--media-fetch-timeout", "3"});
  const server::RequestLimits& r = p.limits.request;
  EXPECT_EQ(r.media.max_image_bytes, 5u << 20);
  EXPECT_EQ(r.media.max_image_pixels, 1000000u);
  EXPECT_EQ(r.media.max_images_per_request, 2);
  EXPECT_EQ(r.media_fetch.allowed_domains,
            (std::vector<std::string>{"images.example.com", ".cdn.example.org"}));
  EXPECT_EQ(r.media_fetch.local_root, std::filesystem::path(dir));
  EXPECT_EQ(r.media_fetch.fetch_timeout.count(), 3);
  EXPECT_NO_THROW(check_limits(p.limits));
}

TEST(ImageFlags, NonsenseIsRefusedNamingTheFlag) {
  auto refused = [](std::vector<std::string> args, const std::string& flag) {
    Parsed p = parse(std::move(args));
    try {
      check_limits(p.limits);
      ADD_FAILURE() << "accepted " << flag;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  refused({"--max-images-per-request", "0"}, "--max-images-per-request");
  refused({"--max-image-pixels", "0"}, "--max-image-pixels");
  refused({"--max-image-bytes", "0"}, "--max-image-bytes");
  refused({"--allowed-local-media-path", "/no/such/dir/here"}, "--allowed-local-media-path");
}

}  // namespace image_flags_test
}  // namespace tandem::cli
