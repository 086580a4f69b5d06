// `tandem bench --image` (cli/bench/image_workload.h): the synthetic images decode, differ
// per request (and repeat with --same-image), --image-fraction spreads them evenly, and a
// run against a stand-in OpenAI server sends chat completions whose image_url parts the
// server decodes, counting prompt tokens from the server's usage.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/bench/image_workload.h"
#include "cli/bench/load_gen.h"
#include "core/base64.h"
#include "core/error.h"
#include "media/content_hash.h"
#include "media/image_decode.h"
#include "server/http/httplib_types.h"

namespace tandem::cli::bench {
namespace {

using nlohmann::json;

// The images of one chat body, decoded.
std::vector<DecodedImage> body_images(const json& body) {
  std::vector<DecodedImage> out;
  for (const json& part : body["messages"][0]["content"]) {
    if (part["type"] != "image_url") continue;
    std::string url = part["image_url"]["url"];
    const std::string prefix = "data:image/png;base64,";
    EXPECT_EQ(url.rfind(prefix, 0), 0u);
    auto bytes = base64::decode(std::string_view(url).substr(prefix.size()));
    EXPECT_TRUE(bytes);
    out.push_back(decode_image(*bytes, MediaLimits{}));
  }
  return out;
}

const SipKey kKey = {1, 2};

TEST(BenchImages, SizesParse) {
  EXPECT_EQ(parse_image_size("896x896"), std::make_pair(896, 896));
  EXPECT_EQ(parse_image_size("640X480"), std::make_pair(640, 480));
  for (const char* bad : {"896", "896x", "x896", "0x10", "10x-1", "896x896x3", "99999x10", "a x b"})
    EXPECT_THROW(parse_image_size(bad), Error) << bad;
}

TEST(BenchImages, FractionSpreadsEvenly) {
  ImageWorkload w;
  w.width = w.height = 8;
  w.fraction = 0.5;
  int n = 0;
  for (int i = 0; i < 100; ++i) n += w.carries(i);
  EXPECT_EQ(n, 50);
  EXPECT_NE(w.carries(0), w.carries(1));
  EXPECT_TRUE(w.carries(-1));  // the warm-up request
  w.fraction = 0;
  EXPECT_FALSE(w.carries(-1));
  ImageWorkload off;
  EXPECT_FALSE(off.carries(0));
}

TEST(BenchImages, ChatBodiesCarryDistinctImagesUnlessAskedForTheSame) {
  RequestShape shape;
  shape.model = "m";
  shape.images = {.width = 40, .height = 24, .per_request = 2, .fraction = 1.0, .same_image = false, .seed = 9};
  EXPECT_STREQ(request_path(shape), "/v1/chat/completions");
  std::set<uint64_t> hashes;
  for (int i = 0; i < 4; ++i) {
    json body = json::parse(completion_body(shape, {5, 6, 7}, false, i));
    EXPECT_FALSE(body.contains("prompt"));
    EXPECT_EQ(body["messages"][0]["content"].back()["text"], prompt_words({5, 6, 7}));
    std::vector<DecodedImage> images = body_images(body);
    ASSERT_EQ(images.size(), 2u);
    for (const DecodedImage& d : images) {
      EXPECT_EQ(d.rgb.width, 40);
      EXPECT_EQ(d.rgb.height, 24);
      hashes.insert(content_hash(d.rgb, kKey));
    }
  }
  EXPECT_EQ(hashes.size(), 8u);  // no image repeats, within or across requests
  shape.images.same_image = true;
  std::set<uint64_t> same;
  for (int i = 0; i < 3; ++i)
    for (const DecodedImage& d : body_images(json::parse(completion_body(shape, {5}, false, i))))
      same.insert(content_hash(d.rgb, kKey));
  EXPECT_EQ(same.size(), 2u);  // the same two images in every request
  EXPECT_EQ(prompt_words({0, 1, 64}), "the of the");
}

// A stand-in server: streams a two-token chat answer and records the images it was sent.
class ImageHost : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      json body = json::parse(req.body);
      std::vector<DecodedImage> images = body_images(body);
      {
        std::lock_guard<std::mutex> lock(mu_);
        num_images_.push_back(int(images.size()));
        for (const DecodedImage& d : images) hashes_.insert(content_hash(d.rgb, kKey));
      }
      std::string sse;
      for (const char* piece : {"Hel", "lo"})
        sse += "data: " + json{{"choices", {{{"index", 0}, {"delta", {{"content", piece}}}}}}}.dump() + "\n\n";
      int prompt = 10 + 100 * int(images.size());
      sse += "data: " + json{{"choices", json::array()},
                             {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", 2}}}}.dump() +
             "\n\n";
      sse += "data: [DONE]\n\n";
      res.set_content(sse, "text/event-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<int> num_images_;
  std::set<uint64_t> hashes_;
};

TEST_F(ImageHost, ARunSendsImagesOnTheRequestsThatCarryThem) {
  Endpoint endpoint = parse_endpoint("http://127.0.0.1:" + std::to_string(port_));
  RequestShape shape;
  shape.model = "m";
  shape.max_tokens = 2;
  shape.images = {.width = 32, .height = 32, .per_request = 3, .fraction = 0.5, .same_image = false, .seed = 1};
  LoadPlan plan;
  plan.concurrency = 3;
  plan.prompts.assign(8, std::vector<int32_t>{1, 2, 3});
  LoadResult result = run_load(endpoint, shape, plan);
  ASSERT_EQ(result.records.size(), 8u);
  int with_images = 0;
  for (const RequestRecord& r : result.records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.with_images, shape.images.carries(r.index));
    EXPECT_EQ(r.num_prompt_tokens, r.with_images ? 310 : 10);  // the server's count
    EXPECT_EQ(r.num_output_tokens, 2);
    EXPECT_EQ(r.arrivals_s.size(), 2u);
    with_images += r.with_images;
  }
  EXPECT_EQ(with_images, 4);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(std::count(num_images_.begin(), num_images_.end(), 3), 4);
  EXPECT_EQ(std::count(num_images_.begin(), num_images_.end(), 0), 4);
  EXPECT_EQ(hashes_.size(), 12u);
}

}  // namespace
}  // namespace tandem::cli::bench
