// Images through the real server over the FakeEngine, on every API: what reaches the engine
// (the processor's prompt length, one span per image over its soft tokens), the refusals in
// each API's error shape naming the message part (and the server serving on), a text-only
// model's clear 400, return_token_ids, and what /v1/models and /stats say.
#include <gtest/gtest.h>

#include "test_images.h"
#include "test_server.h"

namespace tandem::server::testing {
namespace image_http_test {

namespace fs = std::filesystem;

Json golden_case(size_t i) {
  std::ifstream in(gemma3_vision_dir() / "golden.json");
  return Json::parse(in)["cases"][i];
}

std::string oracle_image_url(const Json& test_case, size_t j) {
  return data_url(file_bytes(gemma3_vision_dir() / test_case["images"][j].get<std::string>()));
}

// The golden case's messages as an OpenAI chat request: each {"type": "image"} item an
// image_url part with the case's image as a data: URL.
Json openai_messages(const Json& test_case) {
  Json messages = test_case["messages"];
  size_t next = 0;
  for (Json& m : messages)
    for (Json& item : m["content"])
      if (item["type"] == "image") item = image_url_part(oracle_image_url(test_case, next++));
  return messages;
}

class ImageServer : public ::testing::Test {
 protected:
  ImageServer() : s_(options(), /*ready=*/false) { s_.make_ready(vision_model(s_.engine)); }
  static ServerOptions options() {
    ServerOptions o;
    o.limits.request.media.max_images_per_request = 3;
    return o;
  }
  // The one request the engine got: its spans checked against the soft-token id.
  GenerationRequest only_request(size_t num_images) {
    auto requests = s_.engine.requests();
    EXPECT_EQ(requests.size(), 1u);
    if (requests.empty()) return {};
    const GenerationRequest& r = requests.back();
    EXPECT_EQ(r.media.size(), num_images);
    for (const MediaSpan& span : r.media) {
      EXPECT_EQ(span.length, span.image->num_soft_tokens);
      for (int32_t k = span.start; k < span.start + span.length; ++k)
        EXPECT_EQ(r.prompt[size_t(k)], 519);  // the oracle's image_token_id
    }
    return r;
  }
  TestServer s_;
};

TEST_F(ImageServer, ChatCompletionsWithTwoImages) {
  Json c = golden_case(1);
  HttpReply r =
      s_.post("/v1/chat/completions", {{"model", "test-model"}, {"messages", openai_messages(c)}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["usage"]["prompt_tokens"], c["prompt_len"]);
  GenerationRequest req = only_request(2);
  EXPECT_EQ(int(req.prompt.size()), c["prompt_len"].get<int>());
  EXPECT_LT(req.media[0].start, req.media[1].start);
  EXPECT_NE(req.media[0].image->content_hash, req.media[1].image->content_hash);
}

TEST_F(ImageServer, ImagesInEarlierTurnsAndAfterText) {
  Json c = golden_case(2);  // text, then the image
  ASSERT_EQ(s_.post("/v1/chat/completions", {{"messages", openai_messages(c)}}).status, 200);
  EXPECT_EQ(int(only_request(1).prompt.size()), c["prompt_len"].get<int>());
  Json earlier =
      Json::array({{{"role", "user"},
                    {"content", Json::array({image_url_part(oracle_image_url(c, 0)),
                                             {{"type", "text"}, {"text", "First."}}})}},
                   {{"role", "assistant"}, {"content", "Seen."}},
                   {{"role", "user"},
                    {"content", Json::array({{{"type", "text"}, {"text", "Then:"}},
                                             image_url_part(data_url(test_png(40, 20)))})}}});
  HttpReply r = s_.post("/v1/chat/completions", {{"messages", earlier}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(s_.engine.requests().back().media.size(), 2u);
}

TEST_F(ImageServer, ResponsesInputImage) {
  Json c = golden_case(0);
  Json body = {
      {"input",
       Json::array({{{"role", "user"},
                     {"content",
                      Json::array({{{"type", "input_image"}, {"image_url", oracle_image_url(c, 0)}},
                                   {{"type", "input_text"},
                                    {"text", "Describe the picture in detail."}}})}}})}};
  HttpReply r = s_.post("/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(int(only_request(1).prompt.size()), c["prompt_len"].get<int>());
}

TEST_F(ImageServer, AnthropicImageBlocksAndCountTokens) {
  Json c = golden_case(0);
  std::string b64 = oracle_image_url(c, 0).substr(std::string("data:image/png;base64,").size());
  Json messages = Json::array(
      {{{"role", "user"},
        {"content",
         Json::array(
             {{{"type", "image"},
               {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", b64}}}},
              {{"type", "text"}, {"text", "Describe the picture in detail."}}})}}});
  HttpReply count =
      s_.post("/v1/messages/count_tokens", {{"model", "test-model"}, {"messages", messages}});
  ASSERT_EQ(count.status, 200) << count.body;
  EXPECT_EQ(count.json()["input_tokens"], c["prompt_len"]);
  HttpReply r =
      s_.post("/v1/messages", {{"model", "test-model"}, {"max_tokens", 8}, {"messages", messages}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["usage"]["input_tokens"], c["prompt_len"]);
  only_request(1);
}

TEST_F(ImageServer, BadImagesAre400sNamingThePartAndTheServerGoesOn) {
  auto refused = [&](const Json& part, const std::string& needle) {
    Json messages =
        Json::array({{{"role", "user"},
                      {"content", Json::array({{{"type", "text"}, {"text", "Look"}}, part})}}});
    HttpReply r = s_.post("/v1/chat/completions", {{"messages", messages}});
    EXPECT_EQ(r.status, 400) << r.body;
    Json e = r.json()["error"];
    EXPECT_EQ(e["param"], "messages[0].content[1]") << r.body;
    EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  };
  Bytes png = test_png(16, 16);
  refused(image_url_part("data:image/png;base64,@@@@"), "not valid base64");
  refused(image_url_part(data_url(Bytes(png.begin(), png.begin() + 40))), "corrupt");
  refused(image_url_part(data_url(png_declaring(30000, 30000))), "--max-image-pixels");
  refused(image_url_part(data_url({'G', 'I', 'F', '8', '9', 'a'}, "image/gif")), "GIF image");
  refused(image_url_part("https://example.com/cat.png"), "--allowed-media-domains");
  refused(image_url_part("file:///etc/passwd"), "--allowed-local-media-path");
  // Field-level refusals name the field itself.
  Json bad_type = {
      {"messages",
       Json::array(
           {{{"role", "user"},
             {"content", Json::array({image_url_part("data:application/pdf;base64,AAAA")})}}})}};
  HttpReply r = s_.post("/v1/chat/completions", bad_type);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "messages[0].content[0].image_url.url");
  // Four images with --max-images-per-request 3: the fourth is named.
  Json four = Json::array();
  for (int i = 0; i < 4; ++i) four.push_back(image_url_part(data_url(test_png(8, 8, uint32_t(i)))));
  r = s_.post("/v1/chat/completions",
              {{"messages", Json::array({{{"role", "user"}, {"content", four}}})}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "messages[0].content[3]");
  EXPECT_TRUE(s_.engine.requests().empty());  // nothing reached the engine
  EXPECT_EQ(s_.post("/v1/chat/completions", chat_body("still there?")).status, 200);
}

TEST_F(ImageServer, AnthropicErrorShape) {
  Json messages = Json::array(
      {{{"role", "user"},
        {"content", Json::array({{{"type", "image"},
                                  {"source",
                                   {{"type", "base64"},
                                    {"media_type", "image/png"},
                                    {"data", base64::encode(test_png(8, 8)).substr(0, 30)}}}}})}}});
  HttpReply r =
      s_.post("/v1/messages", {{"model", "test-model"}, {"max_tokens", 8}, {"messages", messages}});
  ASSERT_EQ(r.status, 400) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["message"].get<std::string>().rfind("messages[0].content[0]: ", 0), 0u)
      << r.body;
}

TEST_F(ImageServer, ModelsAndStatsSayItTakesImages) {
  HttpReply models = s_.get("/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.json()["data"][0]["input_modalities"], Json::array({"text", "image"}));
  Json stats = s_.get("/stats").json();
  EXPECT_EQ(stats["images"]["takes_images"], true);
  EXPECT_EQ(stats["images"]["processor"], "Gemma 3");
  EXPECT_EQ(stats["images"]["tokens_per_image"], 16);
  EXPECT_EQ(stats["images_encoded_total"], 0);             // the engine's count (a fake here)
  EXPECT_TRUE(stats["vision_encode_ms_total"].is_null());  // untimed: null, not 0
}

TEST(TextOnlyModel, RefusesImagesClearlyOnEveryApi) {
  TestServer s;  // the llama oracle: no image processor, no vision tower
  std::string url = data_url(test_png(8, 8));
  Json chat = {
      {"messages",
       Json::array({{{"role", "user"},
                     {"content", Json::array({{{"type", "text"}, {"text", "What is this?"}},
                                              image_url_part(url)})}}})}};
  HttpReply r = s.post("/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "messages[0].content[1]");
  EXPECT_NE(r.body.find("does not take images (this model takes text only)"), std::string::npos)
      << r.body;
  Json responses = {
      {"input",
       Json::array({{{"role", "user"},
                     {"content", Json::array({{{"type", "input_image"}, {"image_url", url}}})}}})}};
  r = s.post("/v1/responses", responses);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "input[0].content[0]");
  Json anthropic = {
      {"model", "test-model"},
      {"max_tokens", 4},
      {"messages",
       Json::array({{{"role", "user"},
                     {"content", Json::array({{{"type", "image"},
                                               {"source", {{"type", "url"}, {"url", url}}}}})}}})}};
  r = s.post("/v1/messages", anthropic);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("does not take images"),
            std::string::npos);
  EXPECT_TRUE(s.engine.requests().empty());
  EXPECT_EQ(s.get("/v1/models").json()["data"][0]["input_modalities"], Json::array({"text"}));
  EXPECT_EQ(s.get("/stats").json()["images"]["takes_images"], false);
}

TEST(ReturnTokenIds, ChatCompletionsWholeAndStreamed) {
  TestServer s;
  HttpReply r = s.post("/v1/chat/completions", chat_body("hi", {{"return_token_ids", true}}));
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  std::vector<int32_t> prompt = s.engine.requests().back().prompt;
  EXPECT_EQ(j["prompt_token_ids"], Json(prompt));
  EXPECT_EQ(j["choices"][0]["token_ids"], Json::array({72, 87}));
  HttpReply plain = s.post("/v1/chat/completions", chat_body("hi"));
  EXPECT_FALSE(plain.json().contains("prompt_token_ids"));
  EXPECT_FALSE(plain.json()["choices"][0].contains("token_ids"));

  r = s.post("/v1/chat/completions",
             chat_body("hi", {{"return_token_ids", true}, {"stream", true}}));
  ASSERT_EQ(r.status, 200);
  std::vector<SseEvent> events = parse_sse(r.body);
  ASSERT_GE(events.size(), 3u);
  Json first = Json::parse(events[0].data);
  EXPECT_EQ(first["prompt_token_ids"], Json(prompt));
  Json streamed = Json::array();
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    Json e = Json::parse(events[i].data);
    EXPECT_FALSE(e.contains("prompt_token_ids"));
    if (!e["choices"].empty() && e["choices"][0].contains("token_ids"))
      for (const Json& id : e["choices"][0]["token_ids"]) streamed.push_back(id);
  }
  EXPECT_EQ(streamed, Json::array({72, 87}));
}

}  // namespace image_http_test
}  // namespace tandem::server::testing
